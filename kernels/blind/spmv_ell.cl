// spmv_ell: y = A x for a sparse n x n matrix in ELLPACK form, column-major: entry k of row i at k * n + i, so
// the work-items of a group read consecutive entries; a padded entry has a negative column and is skipped
__kernel void spmv_ell(__global const int *cols, __global const float *vals, __global const float *x,
                       __global float *y, int n, int width)
{
    int row = get_global_id(0);
    if (row >= n)
        return;
    float dot = 0.0f;
    for (int k = 0; k < width; ++k) {
        int idx = k * n + row;
        int col = cols[idx];
        if (col >= 0)
            dot += vals[idx] * x[col];
    }
    y[row] = dot;
}
