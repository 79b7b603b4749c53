// gemm: C = alpha * A @ B + beta * C for n x n row-major float32 matrices, one thread per C element
// (x = column j, y = row i); the dot product is kept in a register and C is read and written once
extern "C" __global__ void gemm(int n, float alpha, float beta, const float *A, const float *B, float *C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * B[k * n + j];
        C[i * n + j] = alpha * acc + beta * C[i * n + j];
    }
}
