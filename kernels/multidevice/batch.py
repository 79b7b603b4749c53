"""A batch of independent tasks, each an upload, a kernel and a download, spread over the devices it is given.

Task t goes to device ``t % len(ctx.devices)``: on a device split into sub-devices (``--device opencl:P:D/2``)
the tasks run side by side, so the batch shows what a second device buys. Uploads and downloads block the host,
as in most programs; each kernel is queued behind its upload, and the downloads come after every task is queued.
"""

import numpy as np

NAME = "batch"
TASKS = 8
ITERS = 16
LOCAL = 64
SMALL = [262144, 524288, 1048576, 2097152]  # elements per task
TARGET = [8388608]


def working_set(n):
    return TASKS * 2 * 4 * n


def work_items(n):
    return TASKS * n


def inputs(n):
    rng = np.random.default_rng(3)
    return [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(TASKS)]


def run(ctx, n):
    devices = ctx.devices
    kernels = [d.compile(d.source("batch"), "relax", {"ITERS": ITERS}) for d in devices]
    outs = []
    for t, x in enumerate(inputs(n)):
        k = t % len(devices)
        d = devices[k]
        d_in = d.to_device(x)
        d_out = d.empty(n, np.float32)
        d.launch(kernels[k], (n,), (LOCAL,), d_in, d_out, np.int32(n))
        outs.append((d, d_out))
    return [d.from_device(buf, np.empty(n, np.float32)) for d, buf in outs]


def reference(x):
    x = x.astype(np.float64)
    y = 0.5 * x
    for _ in range(ITERS):
        x, y = 0.75 * x - 0.25 * y + 0.125, x
    return x


def check(n, result):
    for t, (x, got) in enumerate(zip(inputs(n), result)):
        err = float(np.max(np.abs(got - reference(x))))
        assert err < 1e-4, f"task {t}: differs from numpy by {err:.2e}"
