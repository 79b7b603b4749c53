// vadd: c[i] = a[i] + b[i]
extern "C" __global__ void vadd(int n, const float *a, const float *b, float *c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}
