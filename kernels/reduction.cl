// reduction: partial[g] = sum of the LOCAL consecutive elements x[g*LOCAL .. g*LOCAL+LOCAL-1] (tree reduction in local memory)
#ifndef LOCAL
#define LOCAL 256
#endif

__kernel void reduction(int n, __global const float *x, __global float *partial)
{
    __local float s[LOCAL];
    int lid = get_local_id(0);
    int i = get_global_id(0);

    // n must be a multiple of LOCAL; the guard only keeps the load in bounds
    s[lid] = (i < n) ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int stride = LOCAL / 2; stride > 0; stride >>= 1) {
        if (lid < stride)
            s[lid] += s[lid + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    if (lid == 0)
        partial[get_group_id(0)] = s[0];
}
