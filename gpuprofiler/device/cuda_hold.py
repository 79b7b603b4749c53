"""The CUDA source of the hold kernel the CUDA backend queues before each timed launch (no pycuda needed)."""

# Spins on the global nanosecond timer: keeps the GPU busy while the host queues the timed launch.
HOLD_SOURCE = r"""
extern "C" __global__ void gpuprofiler_hold(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""
