// list_walk: pointer chasing; work-item i starts at node i (mod the table size) and follows next[] for STEPS dependent hops, writing
// the node it ends on. next[] holds a linear congruential sequence; masked to the table's power-of-two size it is
// one cycle through every node, so the hops land all over the table
#ifndef STEPS
#define STEPS 32
#endif

__kernel void list_walk(__global const uint *next, __global uint *end, uint mask, int walkers)
{
    int i = get_global_id(0);
    if (i >= walkers)
        return;
    uint p = (uint)i & mask;
    for (int s = 0; s < STEPS; ++s)
        p = next[p] & mask;
    end[i] = p;
}
