// gesummv: y = alpha * A x + beta * B x for n x n float32 matrices stored column-major (element (i, j) at [j * n + i]),
// one work-item per row i: at each step j the work-items of a group read consecutive elements of column j
__kernel void gesummv(int n, float alpha, float beta, __global const float *A, __global const float *B,
                      __global const float *x, __global float *y)
{
    int i = get_global_id(0);
    if (i < n) {
        float sa = 0.0f;
        float sb = 0.0f;
        for (int j = 0; j < n; ++j) {
            float xj = x[j];
            sa += A[j * n + i] * xj;
            sb += B[j * n + i] * xj;
        }
        y[i] = alpha * sa + beta * sb;
    }
}
