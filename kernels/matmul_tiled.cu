// matmul_tiled: C = A @ B for n x n row-major float32 matrices using TILE x TILE tiles in shared memory (n multiple of TILE)
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void matmul_tiled(int n, const float *A, const float *B, float *C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    float acc = 0.0f;
    for (int t = 0; t < n / TILE; ++t) {
        As[ty][tx] = A[i * n + t * TILE + tx];
        Bs[ty][tx] = B[(t * TILE + ty) * n + j];
        __syncthreads();

        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[i * n + j] = acc;
}
