// sum_float4: partial sums of x with vector loads: each work-item adds float4s in a grid-stride loop, the group
// reduces its work-items' sums in local memory, and writes one partial sum per group (the host adds those)
__kernel void sum_float4(__global const float4 *x, __global float *partial, int n4)
{
    __local float acc[128];
    int lid = get_local_id(0);
    float4 s = (float4)(0.0f);
    for (int i = get_global_id(0); i < n4; i += get_global_size(0))
        s += x[i];
    acc[lid] = (s.x + s.y) + (s.z + s.w);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = get_local_size(0) >> 1; stride > 0; stride >>= 1) {
        if (lid < stride)
            acc[lid] += acc[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = acc[0];
}
