// matmul_tiled: C = A @ B for n x n row-major float32 matrices using TILE x TILE tiles in local memory (n multiple of TILE)
#ifndef TILE
#define TILE 16
#endif

__kernel void matmul_tiled(int n, __global const float *A, __global const float *B, __global float *C)
{
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int tx = get_local_id(0);
    int ty = get_local_id(1);
    int j = get_global_id(0);
    int i = get_global_id(1);

    float acc = 0.0f;
    for (int t = 0; t < n / TILE; ++t) {
        As[ty][tx] = A[i * n + t * TILE + tx];
        Bs[ty][tx] = B[(t * TILE + ty) * n + j];
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[i * n + j] = acc;
}
