// Kernels of the conjugate-gradient app: CSR SpMV, per-group dot products, axpy and xpay.
__kernel void spmv(int n, __global const int *rowptr, __global const int *cols,
                   __global const float *vals, __global const float *x, __global float *y) {
    int i = get_global_id(0);
    if (i < n) {
        float s = 0.0f;
        for (int k = rowptr[i]; k < rowptr[i + 1]; ++k) s += vals[k] * x[cols[k]];
        y[i] = s;
    }
}

__kernel void dot_partial(int n, __global const float *a, __global const float *b, __global float *partial) {
    __local float buf[LOCAL];
    int i = get_global_id(0), l = get_local_id(0);
    buf[l] = i < n ? a[i] * b[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LOCAL / 2; s > 0; s >>= 1) {
        if (l < s) buf[l] += buf[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) partial[get_group_id(0)] = buf[0];
}

// y += alpha * x
__kernel void axpy(int n, float alpha, __global const float *x, __global float *y) {
    int i = get_global_id(0);
    if (i < n) y[i] += alpha * x[i];
}

// p = r + beta * p
__kernel void xpay(int n, float beta, __global const float *r, __global float *p) {
    int i = get_global_id(0);
    if (i < n) p[i] = r[i] + beta * p[i];
}
