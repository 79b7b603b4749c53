// triad (STREAM): a[i] = b[i] + alpha * c[i]
extern "C" __global__ void triad(int n, float alpha, float *a, const float *b, const float *c)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = b[i] + alpha * c[i];
}
