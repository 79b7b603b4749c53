// conv3d: PolyBench's 3DCONV kind of stencil on an n x n x n float32 grid (index (i * n + j) * n + k): a fixed-
// coefficient sum over the centre, its 6 face neighbours and its 8 corner neighbours. As in PolyBench/GPU the
// launch is 2-D (dim 0 = k, dim 1 = j) and each work-item walks its column over i; interior points only, the
// boundary of B is not written
__kernel void conv3d(int n, __global const float *A, __global float *B)
{
    int k = get_global_id(0);
    int j = get_global_id(1);
    if (j >= 1 && j < n - 1 && k >= 1 && k < n - 1) {
        int p = n * n;  // plane stride (i)
        for (int i = 1; i < n - 1; ++i) {
            int c = (i * n + j) * n + k;
            B[c] = 0.6f * A[c]
                 + 0.2f * A[c - p] + 0.5f * A[c + p] - 0.3f * A[c - n] + 0.4f * A[c + n] - 0.8f * A[c - 1] + 0.7f * A[c + 1]
                 + 0.1f * A[c - p - n - 1] - 0.9f * A[c - p - n + 1] + 0.3f * A[c - p + n - 1] - 0.2f * A[c - p + n + 1]
                 - 0.4f * A[c + p - n - 1] + 0.8f * A[c + p - n + 1] - 0.5f * A[c + p + n - 1] + 0.9f * A[c + p + n + 1];
        }
    }
}
