// triad (STREAM): a[i] = b[i] + alpha * c[i]
__kernel void triad(int n, float alpha, __global float *a, __global const float *b, __global const float *c)
{
    int i = get_global_id(0);
    if (i < n)
        a[i] = b[i] + alpha * c[i];
}
