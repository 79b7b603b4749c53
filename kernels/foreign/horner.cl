// Polynomial of degree DEG evaluated by Horner's rule on four elements at
// a time (vload4 / vstore4), the coefficients in constant memory and the
// loop unrolled: compute-bound, 2 * DEG flops per element for 8 bytes.

#ifndef DEG
#define DEG 32
#endif

__kernel void horner(const int n4,
                     __constant float* coef,       /* coef[k] multiplies x^k */
                     __global const float* restrict x,
                     __global float* restrict y)
{
    const int i = get_global_id(0);
    if (i >= n4) return;

    const float4 v = vload4(i, x);
    float4 acc = (float4)(coef[DEG]);
#pragma unroll
    for (int k = DEG - 1; k >= 0; --k)
        acc = mad(acc, v, (float4)(coef[k]));
    vstore4(acc, i, y);
}
