// gesummv: y = alpha * A x + beta * B x for n x n float32 matrices stored column-major (element (i, j) at [j * n + i]),
// one thread per row i: at each step j the threads of a warp read consecutive elements of column j
extern "C" __global__ void gesummv(int n, float alpha, float beta, const float *A, const float *B, const float *x,
                                   float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
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
