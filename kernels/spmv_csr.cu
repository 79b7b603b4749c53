// spmv_csr: y = A x with A (n rows) in CSR format (rowptr, cols, vals), one thread per row
extern "C" __global__ void spmv_csr(int n, const int *rowptr, const int *cols, const float *vals,
                                    const float *x, float *y)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n) {
        float acc = 0.0f;
        for (int p = rowptr[row]; p < rowptr[row + 1]; ++p)
            acc += vals[p] * x[cols[p]];
        y[row] = acc;
    }
}
