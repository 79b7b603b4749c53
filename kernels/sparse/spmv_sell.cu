// spmv_sell: y = A x, A in Sliced ELLPACK (Monakov, Lokhmotov & Avetisyan): slices of S consecutive rows, each
// stored as an ELLPACK block column by column (element k of row r of slice s at sliceptr[s] + k*S + r), short rows
// padded with zeros. One thread per row, Nt threads per block (S divides Nt: a block holds whole slices); the
// threads of a slice read consecutive elements in each column step.
extern "C" __global__ void spmv_sell(int n, const int *sliceptr, const int *cols, const float *vals,
                                     const float *x, float *y)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
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
