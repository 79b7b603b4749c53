// spmv_sell: y = A x, A in Sliced ELLPACK (Monakov, Lokhmotov & Avetisyan): slices of S consecutive rows, each
// stored as an ELLPACK block column by column (element k of row r of slice s at sliceptr[s] + k*S + r), short rows
// padded with zeros. One work-item per row, Nt work-items per work-group (S divides Nt: a group holds whole
// slices); the work-items of a slice read consecutive elements in each column step.
__kernel void spmv_sell(int n, __global const int *sliceptr, __global const int *cols,
                        __global const float *vals, __global const float *x, __global float *y)
{
    int row = get_global_id(0);
    if (row < n) {
        int s = row / S;
        int start = sliceptr[s] + row % S;
        int width = (sliceptr[s + 1] - sliceptr[s]) / S;
        float sum = 0.0f;
        for (int k = 0; k < width; ++k) {
            int e = start + k * S;
            sum += vals[e] * x[cols[e]];
        }
        y[row] = sum;
    }
}
