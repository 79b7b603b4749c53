// transpose_tiled: dst = transpose(src) for an n x n float32 matrix through a TILE x (TILE+1) padded local tile (n multiple of TILE)
#ifndef TILE
#define TILE 16
#endif

__kernel void transpose_tiled(int n, __global const float *src, __global float *dst)
{
    __local float tile[TILE][TILE + 1];   // +1 column of padding avoids bank conflicts
    int tx = get_local_id(0);
    int ty = get_local_id(1);
    int bx = get_group_id(0) * TILE;     // first column of this tile in src
    int by = get_group_id(1) * TILE;     // first row of this tile in src

    tile[ty][tx] = src[(by + ty) * n + (bx + tx)];
    barrier(CLK_LOCAL_MEM_FENCE);

    // write the tile to the mirrored position, reading it column-wise
    dst[(bx + ty) * n + (by + tx)] = tile[tx][ty];
}
