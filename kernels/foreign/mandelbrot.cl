// Escape-time Mandelbrot: one pixel per work-item, iterations counted
// until |z| >= 2 or maxit. Pixel centres are mapped onto the complex
// plane from the work-item's 2-D index. The iteration count varies from
// 1 (far outside) to maxit (inside the set), so work-groups take very
// different times.

__kernel void mandelbrot(const int width,
                         const int height,
                         const float x0, const float y0,   /* lower-left corner */
                         const float dx, const float dy,   /* pixel size */
                         const int maxit,
                         __global int* restrict iters)
{
    const int px = get_global_id(0);
    const int py = get_global_id(1);
    if (px >= width || py >= height) return;

    const float cx = x0 + ((float)px + 0.5f) * dx;
    const float cy = y0 + ((float)py + 0.5f) * dy;

    float x = 0.0f, y = 0.0f;
    int k = 0;
    while (k < maxit && x * x + y * y < 4.0f) {
        const float xt = x * x - y * y + cx;
        y = 2.0f * x * y + cy;
        x = xt;
        ++k;
    }
    iters[py * width + px] = k;
}
