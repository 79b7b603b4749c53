#!/usr/bin/env python3
"""A float copy at 2^27 elements with and without its bounds guard (``if (i < n)``), int and size_t indices, the
kernels in alternation on the default OpenCL device: whether the compiler keeps a guarded region in vector lanes.

    python scripts/guarded_copy.py [--rounds R] [--log2 N]

Prints each kernel's 10th percentile of its device times over the rounds and the time per work-item and core.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from gpuprofiler.device import open_backend
from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import TimingPolicy

SOURCE = r"""
__kernel void guarded_int(int n, __global const float *a, __global float *b)
{ int i = get_global_id(0); if (i < n) b[i] = a[i]; }
__kernel void guarded_size_t(int n, __global const float *a, __global float *b)
{ size_t i = get_global_id(0); if (i < n) b[i] = a[i]; }
__kernel void plain_int(int n, __global const float *a, __global float *b)
{ int i = get_global_id(0); b[i] = a[i]; }
__kernel void plain_size_t(int n, __global const float *a, __global float *b)
{ size_t i = get_global_id(0); b[i] = a[i]; }
"""
NAMES = ("guarded_int", "guarded_size_t", "plain_int", "plain_size_t")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--log2", type=int, default=27)
    args = ap.parse_args(argv)
    backend = open_backend(None)
    n = 1 << args.log2
    a, b = backend.alloc(4 * n), backend.alloc(4 * n)
    kernels = [backend.compile(SOURCE, name) for name in NAMES]
    engine = Engine(TimingPolicy(warmup=2, min_samples=args.rounds, max_samples=args.rounds, budget_s=1e9))

    def timed(kernel):
        def once() -> float:
            event = engine.launch_once(backend, kernel, (n,), (256,), [np.int32(n), a, b])
            backend.finish()
            return event.seconds()
        return once

    cores = max(1, backend.info.compute_units)
    print(f"{backend.info.name} ({backend.info.driver}); {n} floats, groups of 256, {args.rounds} rounds")
    for name, timing in zip(NAMES, engine.interleave([timed(k) for k in kernels])):
        p10 = float(np.percentile(timing.device_s, 10))
        print(f"{name:<16} {p10 * 1e3:8.2f} ms  {p10 * cores / n * 1e9:6.3f} ns per work-item and core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
