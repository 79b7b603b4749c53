// Sum reduction, four floats per work-item: vload4 from global memory,
// the four lanes added in registers, then a shared-memory tree over the
// work-group and one partial sum per group written by work-item 0.

#define WG 256

inline float hsum4(float4 v)
{
    return (v.x + v.y) + (v.z + v.w);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void reduce_float4(const int n4,
                   __global const float* restrict x,
                   __global float* restrict partial)
{
    __local float scratch[WG];

    const int gid = get_global_id(0);
    const int lid = get_local_id(0);

    scratch[lid] = (gid < n4) ? hsum4(vload4(gid, x)) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int offset = WG >> 1; offset > 0; offset >>= 1) {
        if (lid < offset)
            scratch[lid] += scratch[lid + offset];
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}
