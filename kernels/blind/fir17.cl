// fir17: a 17-tap FIR filter, y[i] = sum_t h[t] * x[i + t] (a "valid" 1-D convolution), taps in constant memory;
// the last 16 outputs have no full window and are not written
#define TAPS 17

__kernel void fir17(__global const float *x, __constant float *h, __global float *y, int n)
{
    int i = get_global_id(0);
    if (i >= n - (TAPS - 1))
        return;
    __global const float *w = x + i;
    float acc = 0.0f;
#pragma unroll
    for (int t = 0; t < TAPS; ++t)
        acc += h[t] * w[t];
    y[i] = acc;
}
