// lu_step: one step of LU factorisation without pivoting, for pivot k: every element of the trailing submatrix
// (rows and columns past k) loses the multiplier A[i][k] / A[k][k] times the pivot row's A[k][j]; in place, 2-D
// launch over the trailing submatrix (dim 0 = column, dim 1 = row). Row k and column k are only read, so the
// update has no race; the multipliers are stored into column k by a separate kernel.
__kernel void lu_step(__global float *A, int n, int k)
{
    int j = k + 1 + get_global_id(0);
    int i = k + 1 + get_global_id(1);
    if (i >= n || j >= n)
        return;
    __global float *row = A + i * n;
    __global const float *pivot_row = A + k * n;
    row[j] -= row[k] / pivot_row[k] * pivot_row[j];
}
