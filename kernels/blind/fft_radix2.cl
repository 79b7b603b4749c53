// fft_radix2: one radix-2 Stockham stage of an n-point complex FFT (float2 = re, im), out of place: work-item i
// (of m = n/2) takes x[i] and x[i + m], multiplies the second by the twiddle exp(-pi i k / p) with k = i mod p, and
// writes the sum and the difference p apart at j = 2 (i - k) + k; the host runs the stages p = 1, 2, ..., n/2
__kernel void fft_radix2(__global const float2 *x, __global float2 *y, int p, int m)
{
    int i = get_global_id(0);
    if (i >= m)
        return;
    int k = i & (p - 1);
    float2 u0 = x[i];
    float2 u1 = x[i + m];
    float c;
    float s = sincos(-M_PI_F * (float)k / (float)p, &c);
    u1 = (float2)(c * u1.x - s * u1.y, s * u1.x + c * u1.y);
    int j = ((i - k) << 1) + k;
    y[j] = u0 + u1;
    y[j + p] = u0 - u1;
}
