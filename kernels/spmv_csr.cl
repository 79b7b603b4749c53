// spmv_csr: y = A x with A (n rows) in CSR format (rowptr, cols, vals), one work-item per row
__kernel void spmv_csr(int n, __global const int *rowptr, __global const int *cols, __global const float *vals,
                       __global const float *x, __global float *y)
{
    int row = get_global_id(0);
    if (row < n) {
        float acc = 0.0f;
        for (int p = rowptr[row]; p < rowptr[row + 1]; ++p)
            acc += vals[p] * x[cols[p]];
        y[row] = acc;
    }
}
