// transpose_naive: dst[j*n + i] = src[i*n + j] for an n x n float32 matrix (dim 0 = column j, dim 1 = row i)
__kernel void transpose_naive(int n, __global const float *src, __global float *dst)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    if (i < n && j < n)
        dst[j * n + i] = src[i * n + j];
}
