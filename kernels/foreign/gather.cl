// Indexed gather: y[i] = x[idx[i]], the index array drawn at random.
// Written like a lookup table pass in an application: restrict pointers,
// an early-return guard, the index loaded into a register first.

__kernel void gather(const int n,
                     __global const int* restrict idx,
                     __global const float* restrict x,
                     __global float* restrict y)
{
    const int i = get_global_id(0);
    if (i >= n) return;

    const int j = idx[i];
    y[i] = x[j];
}
