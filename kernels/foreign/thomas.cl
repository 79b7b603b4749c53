// Batched tridiagonal solver (Thomas algorithm), one independent system
// of NEQ equations per work-item. The systems are interleaved so that
// equation k of system i sits at k * n + i: neighbouring work-items read
// neighbouring addresses. The modified super-diagonal lives in a private
// array; the modified right-hand side is kept in x and overwritten by the
// back substitution.
//
//   a[k] x[k-1] + b[k] x[k] + c[k] x[k+1] = d[k]   (a[0], c[NEQ-1] unused)

#ifndef NEQ
#define NEQ 32
#endif

__kernel void thomas(const int n,
                     __global const float* restrict a,
                     __global const float* restrict b,
                     __global const float* restrict c,
                     __global const float* restrict d,
                     __global float* restrict x)
{
    const int i = get_global_id(0);
    if (i >= n) return;

    float cp[NEQ];

    /* forward elimination */
    float denom = b[i];
    cp[0] = c[i] / denom;
    float dprev = d[i] / denom;
    x[i] = dprev;
    for (int k = 1; k < NEQ; ++k) {
        const int off = k * n + i;
        const float ak = a[off];
        denom = b[off] - ak * cp[k - 1];
        cp[k] = c[off] / denom;
        dprev = (d[off] - ak * dprev) / denom;
        x[off] = dprev;
    }

    /* back substitution */
    float xnext = dprev;
    for (int k = NEQ - 2; k >= 0; --k) {
        const int off = k * n + i;
        xnext = x[off] - cp[k] * xnext;
        x[off] = xnext;
    }
}
