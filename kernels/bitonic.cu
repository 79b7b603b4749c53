// bitonic: each block sorts its 2 * L float32 keys ascending in shared memory with a bitonic sorting network (the
// CUDA samples' bitonicSortShared): log2(2L) (log2(2L) + 1) / 2 compare-and-swap stages, a __syncthreads() before
// each, every thread comparing one pair per stage; data-dependent swaps, no global traffic inside
#ifndef L
#define L 256
#endif

extern "C" __global__ void bitonic(int n, const float *keys, float *out)
{
    __shared__ float s[2 * L];
    int lid = threadIdx.x;
    int base = blockIdx.x * 2 * L;
    s[lid] = keys[base + lid];
    s[lid + L] = keys[base + lid + L];
    for (int size = 2; size <= 2 * L; size <<= 1) {
        int up = (lid & (size / 2)) == 0;
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            __syncthreads();
            int pos = 2 * lid - (lid & (stride - 1));
            float a = s[pos];
            float b = s[pos + stride];
            if ((a > b) == up) {
                s[pos] = b;
                s[pos + stride] = a;
            }
        }
    }
    __syncthreads();
    out[base + lid] = s[lid];
    out[base + lid + L] = s[lid + L];
}
