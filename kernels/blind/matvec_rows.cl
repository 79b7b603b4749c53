// matvec_rows: y = A x for a row-major m x k float32 matrix, one work-item per row walking its row with float4
// loads (k a multiple of 4); work-items past the last row return
__kernel void matvec_rows(__global const float *A, __global const float *x, __global float *y, int m, int k)
{
    int i = get_global_id(0);
    if (i >= m)
        return;
    __global const float *row = A + (size_t)i * k;
    float4 acc = (float4)(0.0f);
    for (int j = 0; j < (k >> 2); ++j)
        acc += vload4(j, row) * vload4(j, x);
    y[i] = acc.x + acc.y + acc.z + acc.w;
}
