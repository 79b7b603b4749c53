// mvt: x1 = x1 + A y1 and x2 = x2 + A^T y2 for an n x n row-major float32 matrix (PolyBench/GPU's MVT, its two
// kernels fused): one thread per row i reads row i of A (stride n across a warp, uncoalesced) for x1 and column i
// (consecutive across a warp) for x2, so A is read twice, once in each order
extern "C" __global__ void mvt(int n, const float *A, float *x1, float *x2, const float *y1, const float *y2)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s1 = x1[i];
        float s2 = x2[i];
        for (int j = 0; j < n; ++j) {
            s1 += A[i * n + j] * y1[j];
            s2 += A[j * n + i] * y2[j];
        }
        x1[i] = s1;
        x2[i] = s2;
    }
}
