// Out-of-place transpose of a rows x cols matrix through a 16 x 17 tile
// in local memory (the extra column keeps the column reads off one bank).
// Edge tiles are guarded per element, never with an early return: every
// work-item must reach the barrier.

#define TDIM 16

__kernel void transpose_rect(const int rows,
                             const int cols,
                             __global const float* restrict src,
                             __global float* restrict dst)
{
    __local float tile[TDIM][TDIM + 1];

    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int bx = get_group_id(0) * TDIM;   /* first column of the source tile */
    const int by = get_group_id(1) * TDIM;   /* first row of the source tile */

    int c = bx + tx;
    int r = by + ty;
    if (r < rows && c < cols)
        tile[ty][tx] = src[r * cols + c];

    barrier(CLK_LOCAL_MEM_FENCE);

    /* the destination is cols x rows: swap the roles of the block indices */
    c = by + tx;
    r = bx + ty;
    if (r < cols && c < rows)
        dst[r * rows + c] = tile[tx][ty];
}
