// bitonic_step: one compare-exchange step (j, k) of a global bitonic sort, in place: work-item i compares its key
// with that of its partner i ^ j (the lower index of the pair does the work) and orders the pair ascending when
// bit k of i is clear, descending when it is set; the host launches it for k = 2, 4, ..., n and j = k/2, ..., 1
__kernel void bitonic_step(__global float *keys, uint j, uint k)
{
    uint i = get_global_id(0);
    uint partner = i ^ j;
    if (partner <= i)
        return;
    float a = keys[i];
    float b = keys[partner];
    bool up = (i & k) == 0;
    if ((a > b) == up) {
        keys[i] = b;
        keys[partner] = a;
    }
}
