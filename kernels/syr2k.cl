// syr2k: C = alpha * (A @ B^T + B @ A^T) + beta * C for n x n row-major float32 matrices (the full C, as
// PolyBench/GPU computes it), one work-item per C element (dim 0 = column j, dim 1 = row i)
__kernel void syr2k(int n, float alpha, float beta, __global const float *A, __global const float *B,
                    __global float *C)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * B[j * n + k] + B[i * n + k] * A[j * n + k];
        C[i * n + j] = alpha * acc + beta * C[i * n + j];
    }
}
