// scale: b[i] = alpha * a[i]
extern "C" __global__ void scale(int n, float alpha, const float *a, float *b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        b[i] = alpha * a[i];
}
