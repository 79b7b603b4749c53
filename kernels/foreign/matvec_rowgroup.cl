// Dense y = A x with one work-group per row: the work-items of the group
// stride across the row, then a local-memory tree adds their partial
// dot products and work-item 0 writes y[row].

#define LSIZE 128

__kernel __attribute__((reqd_work_group_size(LSIZE, 1, 1)))
void matvec_rowgroup(const int rows,
                     const int cols,
                     __global const float* restrict A,
                     __global const float* restrict x,
                     __global float* restrict y)
{
    __local float part[LSIZE];

    const int r = get_group_id(0);
    const int lid = get_local_id(0);
    __global const float* row = A + (size_t)r * cols;

    float acc = 0.0f;
    for (int j = lid; j < cols; j += LSIZE)
        acc += row[j] * x[j];
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int s = LSIZE / 2; s > 0; s >>= 1) {
        if (lid < s)
            part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        y[r] = part[0];
}
