// reduction: partial[g] = sum of the LOCAL consecutive elements x[g*LOCAL .. g*LOCAL+LOCAL-1] (tree reduction in shared memory)
#ifndef LOCAL
#define LOCAL 256
#endif

extern "C" __global__ void reduction(int n, const float *x, float *partial)
{
    __shared__ float s[LOCAL];
    int lid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    // n must be a multiple of LOCAL; the guard only keeps the load in bounds
    s[lid] = (i < n) ? x[i] : 0.0f;
    __syncthreads();

    for (int stride = LOCAL / 2; stride > 0; stride >>= 1) {
        if (lid < stride)
            s[lid] += s[lid + stride];
        __syncthreads();
    }

    if (lid == 0)
        partial[blockIdx.x] = s[0];
}
