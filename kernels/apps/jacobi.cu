// Kernels of the Jacobi app: one 5-point sweep on an n x n grid, and per-block sums of squared updates.
extern "C" __global__ void jacobi_step(int n, const float *u, float *v) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= 1 && i < n - 1 && j >= 1 && j < n - 1)
        v[i * n + j] = 0.25f * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1]);
}

extern "C" __global__ void diff_partial(int count, const float *u, const float *v, float *partial) {
    __shared__ float buf[LOCAL];
    int i = blockIdx.x * blockDim.x + threadIdx.x, l = threadIdx.x;
    float d = i < count ? v[i] - u[i] : 0.0f;
    buf[l] = d * d;
    __syncthreads();
    for (int s = LOCAL / 2; s > 0; s >>= 1) {
        if (l < s) buf[l] += buf[l + s];
        __syncthreads();
    }
    if (l == 0) partial[blockIdx.x] = buf[0];
}
