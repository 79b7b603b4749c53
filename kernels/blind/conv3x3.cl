// conv3x3: 2-D convolution of a w x h float32 image with a 3x3 filter held in constant memory; border pixels have
// no full neighbourhood: their work-items return without writing
__kernel void conv3x3(__global const float *img, __constant float *filt, __global float *out, int w, int h)
{
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1)
        return;
    __global const float *p = img + (y - 1) * w + (x - 1);
    float acc = 0.0f;
    for (int dy = 0; dy < 3; ++dy) {
        acc += filt[3 * dy] * p[0] + filt[3 * dy + 1] * p[1] + filt[3 * dy + 2] * p[2];
        p += w;
    }
    out[y * w + x] = acc;
}
