// matvec_cols: y = A^T x for a row-major k x m float32 matrix, one work-item per column j of A (one output):
// it walks down its column, so at each step the work-items of a group read consecutive floats of one row
__kernel void matvec_cols(__global const float *A, __global const float *x, __global float *y, int k, int m)
{
    int j = get_global_id(0);
    if (j >= m)
        return;
    __global const float *col = A + j;
    float acc = 0.0f;
    for (int i = 0; i < k; ++i) {
        acc += col[0] * x[i];
        col += m;
    }
    y[j] = acc;
}
