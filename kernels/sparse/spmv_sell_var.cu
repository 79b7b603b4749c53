// spmv_sell_var: y = A x, A in Sliced ELLPACK with a height per slice of at most S rows (Monakov, Lokhmotov &
// Avetisyan's variable slice height: a row much longer than its neighbours starts a slice of its own instead of
// padding theirs): slice s holds rows slicerow[s] .. slicerow[s+1]-1, element k of its row r at
// sliceptr[s] + k*h + r (h its height); rowslice gives each row's slice. One thread per row, Nt per block.
extern "C" __global__ void spmv_sell_var(int n, const int *sliceptr, const int *slicerow,
                                         const int *rowslice, const int *cols, const float *vals,
                                         const float *x, float *y)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
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
