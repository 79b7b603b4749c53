// mvt: x1 = x1 + A y1 and x2 = x2 + A^T y2 for an n x n row-major float32 matrix (PolyBench/GPU's MVT, its two
// kernels fused): one work-item per row i reads row i of A (stride n across the work-items of a group) for x1
// and column i (consecutive across them) for x2, so A is read twice, once in each order
__kernel void mvt(int n, __global const float *A, __global float *x1, __global float *x2,
                  __global const float *y1, __global const float *y2)
{
    int i = get_global_id(0);
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
