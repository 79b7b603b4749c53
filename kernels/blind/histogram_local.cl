// histogram_local: a 256-bin histogram of the top byte of 32-bit keys; each work-group counts its grid-stride
// share into private-to-the-group bins in local memory with atomic_inc, then adds its bins to the global
// histogram with one atomic_add per bin
#define BINS 256

__kernel void histogram_local(__global const uint *keys, __global uint *hist, int n)
{
    __local uint bins[BINS];
    int lid = get_local_id(0);
    int lsize = get_local_size(0);
    for (int b = lid; b < BINS; b += lsize)
        bins[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);

    int stride = get_global_size(0);
    for (int i = get_global_id(0); i < n; i += stride)
        atomic_inc(&bins[keys[i] >> 24]);
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int b = lid; b < BINS; b += lsize)
        if (bins[b])
            atomic_add(&hist[b], bins[b]);
}
