// transpose_float4: out = A^T for an n x n float32 matrix (n a multiple of 4), each work-item moving one 4 x 4
// tile: four float4 row loads, the tile transposed in registers by swizzles, four float4 stores
__kernel void transpose_float4(__global const float *A, __global float *out, int n)
{
    int bx = get_global_id(0);          // tile column
    int by = get_global_id(1);          // tile row
    int q = n >> 2;                     // tiles per row
    if (bx >= q || by >= q)
        return;
    __global const float *src = A + (by << 2) * n;
    float4 r0 = vload4(bx, src);
    float4 r1 = vload4(bx, src + n);
    float4 r2 = vload4(bx, src + 2 * n);
    float4 r3 = vload4(bx, src + 3 * n);
    float4 t0 = (float4)(r0.x, r1.x, r2.x, r3.x);
    float4 t1 = (float4)(r0.y, r1.y, r2.y, r3.y);
    float4 t2 = (float4)(r0.z, r1.z, r2.z, r3.z);
    float4 t3 = (float4)(r0.w, r1.w, r2.w, r3.w);
    __global float *dst = out + (bx << 2) * n;
    vstore4(t0, by, dst);
    vstore4(t1, by, dst + n);
    vstore4(t2, by, dst + 2 * n);
    vstore4(t3, by, dst + 3 * n);
}
