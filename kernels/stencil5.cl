// stencil5: one 5-point Jacobi step on an n x n grid, out = 0.25*(N + S + W + E) at interior points; boundary is not written
__kernel void stencil5(int n, __global const float *u, __global float *out)
{
    int j = get_global_id(0);
    int i = get_global_id(1);
    if (i >= 1 && i < n - 1 && j >= 1 && j < n - 1)
        out[i * n + j] = 0.25f * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1]);
}
