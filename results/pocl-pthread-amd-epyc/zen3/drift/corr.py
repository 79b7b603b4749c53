import time, json, sys, numpy as np, pyopencl as cl
ctx = cl.Context(cl.get_platforms()[0].get_devices())
q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
srcs = {
 "ref": "__kernel void k(int n, float alpha, __global const float *a, __global float *b){size_t i=get_global_id(0); b[i]=alpha*a[i];}",
 "spec": "__kernel void k(int n, float alpha, __global const float *a, __global float *b){int i=get_global_id(0); if(i<n) b[i]=alpha*a[i];}",
 "fma": "__kernel void k(int n, float alpha, __global const float *a, __global float *b){int i=get_global_id(0); float x=a[i&1023]; for(int r=0;r<n;r++) x=fma(x,alpha,0.5f); b[i&1023]=x;}",
}
N = 1 << 27
mf = cl.mem_flags
a = cl.Buffer(ctx, mf.READ_WRITE, 4*N); b = cl.Buffer(ctx, mf.READ_WRITE, 4*N)
cl.enqueue_copy(q, a, np.random.rand(N).astype(np.float32)); cl.enqueue_fill_buffer(q, b, np.float32(0), 0, 4*N); q.finish()
ks = {k: cl.Kernel(cl.Program(ctx, s).build(), "k") for k, s in srcs.items()}
args = {"ref": (N, (N,)), "spec": (N, (N,)), "fma": (2000, (1 << 16,))}
def run(name):
    n, g = args[name]
    k = ks[name]; k.set_args(np.int32(n), np.float32(0.999), a, b)
    e = cl.enqueue_nd_range_kernel(q, k, g, (256,)); e.wait()
    return (e.profile.end - e.profile.start) * 1e-9
for name in ks: run(name)
for blk in range(int(sys.argv[1])):
    res = {k: [] for k in ks}
    for r in range(6):
        for name in ks: res[name].append(run(name))
    print(json.dumps({"t": time.strftime('%T'), **{k: float(np.percentile(v, 10)) for k, v in res.items()}}), flush=True)
    time.sleep(float(sys.argv[2]))
