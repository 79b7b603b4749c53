// matmul with four independent accumulators: the same loads as matmul_naive, a chain a quarter as long
__kernel void mm4(int n, __global const float *A, __global const float *B, __global float *C)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    if (i < n && j < n) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (int k = 0; k < n; k += 4) {
            a0 += A[i * n + k] * B[k * n + j];
            a1 += A[i * n + k + 1] * B[(k + 1) * n + j];
            a2 += A[i * n + k + 2] * B[(k + 2) * n + j];
            a3 += A[i * n + k + 3] * B[(k + 3) * n + j];
        }
        C[i * n + j] = (a0 + a1) + (a2 + a3);
    }
}
