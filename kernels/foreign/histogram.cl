// Global-memory histogram of integer keys: every work-item bins one key
// with a shift and a mask and bumps the counter with atomic_inc.
// No privatisation in local memory: the naive version many codes start from.

#define NBINS 256
#define SHIFT 8

inline uint bin_of(uint key)
{
    return (key >> SHIFT) & (NBINS - 1);
}

__kernel void histogram(const int n,
                        __global const uint* restrict keys,
                        __global volatile uint* hist)
{
    const int i = get_global_id(0);
    if (i >= n) return;

    atomic_inc(&hist[bin_of(keys[i])]);
}
