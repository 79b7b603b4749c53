// scan_blelloch: work-efficient exclusive prefix sum (Blelloch's up-sweep / down-sweep) of each block of 2 * L
// floats in local memory, one work-group of L work-items per block (GPU Gems 3, ch. 39, without the bank-conflict
// padding); the block's total goes to sums[] for a later pass. Elements past n read as 0 and are not written.
#ifndef L
#define L 128
#endif

__kernel void scan_blelloch(__global const float *x, __global float *out, __global float *sums, int n)
{
    __local float tmp[2 * L];
    int lid = get_local_id(0);
    int block = get_group_id(0);
    int base = block * (2 * L);
    int a = base + 2 * lid, b = a + 1;

    tmp[2 * lid] = a < n ? x[a] : 0.0f;
    tmp[2 * lid + 1] = b < n ? x[b] : 0.0f;

    int offset = 1;
    for (int d = L; d > 0; d >>= 1) {          // up-sweep: partial sums up the tree
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < d) {
            int ai = offset * (2 * lid + 1) - 1;
            int bi = offset * (2 * lid + 2) - 1;
            tmp[bi] += tmp[ai];
        }
        offset <<= 1;
    }
    if (lid == 0) {
        sums[block] = tmp[2 * L - 1];
        tmp[2 * L - 1] = 0.0f;
    }
    for (int d = 1; d <= L; d <<= 1) {         // down-sweep: push the prefixes back down
        offset >>= 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < d) {
            int ai = offset * (2 * lid + 1) - 1;
            int bi = offset * (2 * lid + 2) - 1;
            float t = tmp[ai];
            tmp[ai] = tmp[bi];
            tmp[bi] += t;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (a < n) out[a] = tmp[2 * lid];
    if (b < n) out[b] = tmp[2 * lid + 1];
}
