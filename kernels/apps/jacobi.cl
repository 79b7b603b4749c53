// Kernels of the Jacobi app: one 5-point sweep on an n x n grid, and per-group sums of squared updates.
__kernel void jacobi_step(int n, __global const float *u, __global float *v) {
    int j = get_global_id(0), i = get_global_id(1);
    if (i >= 1 && i < n - 1 && j >= 1 && j < n - 1)
        v[i * n + j] = 0.25f * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1]);
}

__kernel void diff_partial(int count, __global const float *u, __global const float *v, __global float *partial) {
    __local float buf[LOCAL];
    int i = get_global_id(0), l = get_local_id(0);
    float d = i < count ? v[i] - u[i] : 0.0f;
    buf[l] = d * d;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LOCAL / 2; s > 0; s >>= 1) {
        if (l < s) buf[l] += buf[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) partial[get_group_id(0)] = buf[0];
}
