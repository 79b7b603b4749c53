// gather_index: out[i] = table[idx[i]], a gather through an index array (an embedding or permutation lookup)
__kernel void gather_index(__global const int *idx, __global const float *table, __global float *out, int n)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    out[i] = table[idx[i]];
}
