// matmul_naive: C = A @ B for n x n row-major float32 matrices, one work-item per C element (dim 0 = column j, dim 1 = row i)
__kernel void matmul_naive(int n, __global const float *A, __global const float *B, __global float *C)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * B[k * n + j];
        C[i * n + j] = acc;
    }
}
