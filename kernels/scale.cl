// scale: b[i] = alpha * a[i]
__kernel void scale(int n, float alpha, __global const float *a, __global float *b)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = alpha * a[i];
}
