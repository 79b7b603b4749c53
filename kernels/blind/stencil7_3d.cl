// stencil7_3d: a 7-point heat-equation step on an nz x NY x NX float32 grid, 2.5-D: one work-item per (x, y)
// column marching up z, keeping the column's below / centre / above values in registers; points on the x or y
// faces return at once, the z faces are skipped by the loop, and neither is written
__kernel void stencil7_3d(__global const float *in, __global float *out, int nx, int ny, int nz, float alpha)
{
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x < 1 || y < 1 || x >= nx - 1 || y >= ny - 1 || nz < 3)
        return;
    int plane = nx * ny;
    int c = y * nx + x;
    float below = in[c];
    float centre = in[c + plane];
    for (int z = 1; z < nz - 1; ++z) {
        int idx = c + z * plane;
        float above = in[idx + plane];
        float lap = in[idx - 1] + in[idx + 1] + in[idx - nx] + in[idx + nx] + below + above - 6.0f * centre;
        out[idx] = centre + alpha * lap;
        below = centre;
        centre = above;
    }
}
