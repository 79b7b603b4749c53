// syr2k: C = alpha * (A @ B^T + B @ A^T) + beta * C for n x n row-major float32 matrices (the full C, as
// PolyBench/GPU computes it), one thread per C element (x = column j, y = row i)
extern "C" __global__ void syr2k(int n, float alpha, float beta, const float *A, const float *B, float *C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * B[j * n + k] + B[i * n + k] * A[j * n + k];
        C[i * n + j] = alpha * acc + beta * C[i * n + j];
    }
}
