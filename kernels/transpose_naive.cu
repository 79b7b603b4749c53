// transpose_naive: dst[j*n + i] = src[i*n + j] for an n x n float32 matrix (x = column j, y = row i)
extern "C" __global__ void transpose_naive(int n, const float *src, float *dst)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < n)
        dst[j * n + i] = src[i * n + j];
}
