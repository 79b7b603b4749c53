// Kernels of the conjugate-gradient app: CSR SpMV, per-block dot products, axpy and xpay.
extern "C" __global__ void spmv(int n, const int *rowptr, const int *cols, const float *vals,
                                const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        for (int k = rowptr[i]; k < rowptr[i + 1]; ++k) s += vals[k] * x[cols[k]];
        y[i] = s;
    }
}

extern "C" __global__ void dot_partial(int n, const float *a, const float *b, float *partial) {
    __shared__ float buf[LOCAL];
    int i = blockIdx.x * blockDim.x + threadIdx.x, l = threadIdx.x;
    buf[l] = i < n ? a[i] * b[i] : 0.0f;
    __syncthreads();
    for (int s = LOCAL / 2; s > 0; s >>= 1) {
        if (l < s) buf[l] += buf[l + s];
        __syncthreads();
    }
    if (l == 0) partial[blockIdx.x] = buf[0];
}

// y += alpha * x
extern "C" __global__ void axpy(int n, float alpha, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += alpha * x[i];
}

// p = r + beta * p
extern "C" __global__ void xpay(int n, float beta, const float *r, float *p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = r[i] + beta * p[i];
}
