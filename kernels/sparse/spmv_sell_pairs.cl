// spmv_sell_pairs: y = A x, A's nonzeros grouped into 1x2 blocks (two consecutive columns, one index; a nonzero
// without a neighbour padded with a zero) stored in Sliced ELLPACK with slice height S (Monakov, Lokhmotov &
// Avetisyan's small-block variant): block k of row r of slice s at sliceptr[s] + k*S + r, its two values at
// vals[2*that], vals[2*that + 1]. One work-item per row, Nt per work-group (S divides Nt).
__kernel void spmv_sell_pairs(int n, __global const int *sliceptr, __global const int *cols,
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
            int c = cols[e];
            sum += vals[2 * e] * x[c] + vals[2 * e + 1] * x[c + 1];
        }
        y[row] = sum;
    }
}
