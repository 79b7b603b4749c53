// transpose_tiled: dst = transpose(src) for an n x n float32 matrix through a TILE x (TILE+1) padded shared tile (n multiple of TILE)
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void transpose_tiled(int n, const float *src, float *dst)
{
    __shared__ float tile[TILE][TILE + 1];   // +1 column of padding avoids bank conflicts
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int bx = blockIdx.x * TILE;               // first column of this tile in src
    int by = blockIdx.y * TILE;               // first row of this tile in src

    tile[ty][tx] = src[(by + ty) * n + (bx + tx)];
    __syncthreads();

    // write the tile to the mirrored position, reading it column-wise
    dst[(bx + ty) * n + (by + tx)] = tile[tx][ty];
}
