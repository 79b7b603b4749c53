// syrk: C = alpha * A @ A^T + beta * C for n x n row-major float32 matrices (the full C, as PolyBench/GPU computes
// it), one thread per C element (x = column j, y = row i): row i of A is the same for a row of threads, row j is
// read with stride n across them
extern "C" __global__ void syrk(int n, float alpha, float beta, const float *A, float *C)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k)
            acc += A[i * n + k] * A[j * n + k];
        C[i * n + j] = alpha * acc + beta * C[i * n + j];
    }
}
