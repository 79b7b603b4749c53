// copy: b[i] = a[i]
__kernel void copy(int n, __global const float *a, __global float *b)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = a[i];
}
