// 3-D 7-point Jacobi-style stencil on an m x m x m grid (x fastest).
// One work-item per cell of a 3-D launch; cells on the border return
// without writing, as in most hand-written heat/Poisson sweeps.

#define IDX(x, y, z, m) (((z) * (m) + (y)) * (m) + (x))

__kernel void stencil7(const int m,
                       const float c0,
                       const float c1,
                       __global const float* restrict u,
                       __global float* restrict v)
{
    const int x = get_global_id(0);
    const int y = get_global_id(1);
    const int z = get_global_id(2);

    if (x < 1 || y < 1 || z < 1 || x >= m - 1 || y >= m - 1 || z >= m - 1)
        return;

    const int plane = m * m;
    const int c = IDX(x, y, z, m);

    const float nb = u[c - 1] + u[c + 1]
                   + u[c - m] + u[c + m]
                   + u[c - plane] + u[c + plane];
    v[c] = c0 * u[c] + c1 * nb;
}
