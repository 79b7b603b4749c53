// segmented_sum: the sum of each fixed-length segment of x, one work-group per segment: each work-item adds up a
// strided share of its segment, then the group's partial sums are combined by a tree in local memory
#define WG 256

__kernel void segmented_sum(__global const float *x, __global float *sums, int seglen)
{
    __local float part[WG];
    int lid = get_local_id(0);
    int seg = get_group_id(0);
    __global const float *p = x + (size_t)seg * seglen;

    float acc = 0.0f;
    for (int e = lid; e < seglen; e += WG)
        acc += p[e];
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int s = WG >> 1; s > 0; s >>= 1) {
        if (lid < s)
            part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        sums[seg] = part[0];
}
