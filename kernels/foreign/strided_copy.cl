// Strided read, contiguous write: pulls one component out of an
// array-of-structures record of `stride` floats (b[i] = a[i * stride]).

__kernel void strided_copy(const int n,
                           const int stride,
                           __global const float* restrict a,
                           __global float* restrict b)
{
    const size_t i = get_global_id(0);
    if (i >= (size_t)n) return;

    b[i] = a[i * (size_t)stride];
}
