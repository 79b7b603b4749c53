// conv2d: PolyBench's 2DCONV, a 3x3 convolution with fixed coefficients on an n x n row-major float32 grid,
// one thread per point (x = column j, y = row i); interior points only, the boundary of B is not written
extern "C" __global__ void conv2d(int n, const float *A, float *B)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= 1 && i < n - 1 && j >= 1 && j < n - 1) {
        int c = i * n + j;
        B[c] = 0.2f * A[c - n - 1] - 0.3f * A[c - n] + 0.4f * A[c - n + 1]
             + 0.5f * A[c - 1] + 0.6f * A[c] + 0.7f * A[c + 1]
             - 0.8f * A[c + n - 1] - 0.9f * A[c + n] + 0.1f * A[c + n + 1];
    }
}
