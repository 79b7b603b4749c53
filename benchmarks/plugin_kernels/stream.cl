// y = a + b + c (12 bytes read and 4 written per element), or with EXTRA also + d: 25% more memory traffic
__kernel void stream(int n, __global const float *a, __global const float *b, __global const float *c,
                     __global const float *d, __global float *y)
{
    int i = get_global_id(0);
    if (i < n) {
#ifdef EXTRA
        y[i] = a[i] + b[i] + c[i] + d[i];
#else
        y[i] = a[i] + b[i] + c[i];
#endif
    }
}
