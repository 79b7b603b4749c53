// 5x5 filter (cross-correlation) over a width x height image with zero
// padding. Each 16x16 work-group stages a (16+4) x (16+4) tile with its
// halo in local memory, loaded by a strided loop over the flattened tile,
// then every work-item reads its 25 neighbours from the tile.

#define RAD 2
#define TW 16
#define TS (TW + 2 * RAD)

__kernel __attribute__((reqd_work_group_size(TW, TW, 1)))
void conv5x5(const int width,
             const int height,
             __constant float* filt,          /* 5x5, row-major */
             __global const float* restrict img,
             __global float* restrict out)
{
    __local float tile[TS][TS];

    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
    const int ox = (int)get_group_id(0) * TW - RAD;   /* tile origin in the image */
    const int oy = (int)get_group_id(1) * TW - RAD;

    for (int t = ly * TW + lx; t < TS * TS; t += TW * TW) {
        const int ty = t / TS;
        const int tx = t - ty * TS;
        const int gx = ox + tx;
        const int gy = oy + ty;
        const bool inside = gx >= 0 && gx < width && gy >= 0 && gy < height;
        tile[ty][tx] = inside ? img[gy * width + gx] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int x = get_global_id(0);
    const int y = get_global_id(1);
    if (x >= width || y >= height) return;   /* past the barrier: safe */

    float acc = 0.0f;
    for (int dy = 0; dy < 2 * RAD + 1; ++dy) {
        __constant float* frow = filt + dy * (2 * RAD + 1);
        for (int dx = 0; dx < 2 * RAD + 1; ++dx)
            acc = mad(frow[dx], tile[ly + dy][lx + dx], acc);
    }
    out[y * width + x] = acc;
}
