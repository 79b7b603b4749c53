// bitonic: each work-group sorts its block of 2 * L float32 keys ascending in local memory with a bitonic sorting
// network (the CUDA samples' bitonicSortShared): log2(2L) (log2(2L) + 1) / 2 compare-and-swap stages, a barrier
// before each, every work-item comparing one pair per stage; data-dependent swaps, no global traffic inside
#ifndef L
#define L 256
#endif

__kernel void bitonic(int n, __global const float *keys, __global float *out)
{
    __local float s[2 * L];
    int lid = get_local_id(0);
    int base = get_group_id(0) * 2 * L;
    s[lid] = keys[base + lid];
    s[lid + L] = keys[base + lid + L];
    for (int size = 2; size <= 2 * L; size <<= 1) {
        int up = (lid & (size / 2)) == 0;
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            barrier(CLK_LOCAL_MEM_FENCE);
            int pos = 2 * lid - (lid & (stride - 1));
            float a = s[pos];
            float b = s[pos + stride];
            if ((a > b) == up) {
                s[pos] = b;
                s[pos + stride] = a;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    out[base + lid] = s[lid];
    out[base + lid + L] = s[lid + L];
}
