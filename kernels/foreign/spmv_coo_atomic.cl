// COO sparse matrix-vector product y += A x, one non-zero per work-item,
// the products scattered into y with a float atomic add built from
// atomic_cmpxchg on the float's bits (OpenCL 1.x has no float atomics).

inline void atomic_add_float(volatile __global float* addr, const float val)
{
    uint prev = as_uint(*addr);
    uint assumed;
    do {
        assumed = prev;
        prev = atomic_cmpxchg((volatile __global uint*)addr,
                              assumed, as_uint(as_float(assumed) + val));
    } while (prev != assumed);
}

__kernel void spmv_coo_atomic(const int nnz,
                              __global const int* restrict row,
                              __global const int* restrict col,
                              __global const float* restrict val,
                              __global const float* restrict x,
                              __global float* y)
{
    const int e = get_global_id(0);
    if (e >= nnz) return;

    atomic_add_float(&y[row[e]], val[e] * x[col[e]]);
}
