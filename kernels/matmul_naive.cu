// matmul_naive: C = A @ B for n x n row-major float32 matrices, one thread per C element (x = column j, y = row i)
extern "C" __global__ void matmul_naive(int n, const float *A, const float *B, float *C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * B[k * n + j];
        C[i * n + j] = acc;
    }
}
