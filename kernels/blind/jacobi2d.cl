// jacobi2d: one Jacobi sweep of Laplace's equation on an h x w float32 grid: each interior point becomes the mean
// of its four neighbours; boundary points (the fixed Dirichlet values) are copied through, so the whole grid is
// written and the next sweep can swap the buffers
__kernel void jacobi2d(__global const float *u, __global float *unew, int h, int w)
{
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x >= w || y >= h)
        return;
    int c = y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) {
        unew[c] = u[c];
        return;
    }
    unew[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - w] + u[c + w]);
}
