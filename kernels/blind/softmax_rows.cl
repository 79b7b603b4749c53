// softmax_rows: y = softmax of each row of a rows x COLS float32 matrix, one work-group per row: the row's
// maximum and then its sum of exponentials by tree reductions in local memory, the row read as float4
#ifndef WG
#define WG 128
#endif

__kernel void softmax_rows(__global const float *x, __global float *y, int cols)
{
    __local float red[WG];
    int lid = get_local_id(0);
    int r = get_group_id(0);
    __global const float *row = x + (size_t)r * cols;
    __global float *dst = y + (size_t)r * cols;
    int quads = cols >> 2;

    float m = -INFINITY;
    for (int q = lid; q < quads; q += WG) {
        float4 v = vload4(q, row);
        m = fmax(m, fmax(fmax(v.x, v.y), fmax(v.z, v.w)));
    }
    red[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG >> 1; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] = fmax(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    float sum = 0.0f;
    for (int q = lid; q < quads; q += WG) {
        float4 e = exp(vload4(q, row) - m);
        sum += e.x + e.y + e.z + e.w;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG >> 1; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float inv = 1.0f / red[0];

    for (int q = lid; q < quads; q += WG)
        vstore4(exp(vload4(q, row) - m) * inv, q, dst);
}
