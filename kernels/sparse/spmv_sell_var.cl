// spmv_sell_var: y = A x, A in Sliced ELLPACK with a height per slice of at most S rows (Monakov, Lokhmotov &
// Avetisyan's variable slice height: a row much longer than its neighbours starts a slice of its own instead of
// padding theirs): slice s holds rows slicerow[s] .. slicerow[s+1]-1, element k of its row r at
// sliceptr[s] + k*h + r (h its height); rowslice gives each row's slice. One work-item per row, Nt per work-group.
__kernel void spmv_sell_var(int n, __global const int *sliceptr, __global const int *slicerow,
                            __global const int *rowslice, __global const int *cols, __global const float *vals,
                            __global const float *x, __global float *y)
{
    int row = get_global_id(0);
    if (row < n) {
        int s = rowslice[row];
        int first = slicerow[s];
        int h = slicerow[s + 1] - first;
        int start = sliceptr[s] + row - first;
        int width = (sliceptr[s + 1] - sliceptr[s]) / h;
        float sum = 0.0f;
        for (int k = 0; k < width; ++k) {
            int e = start + k * h;
            sum += vals[e] * x[cols[e]];
        }
        y[row] = sum;
    }
}
