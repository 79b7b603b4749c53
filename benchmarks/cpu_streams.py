"""Benchmark (not a test): what a CPU's DRAM time is made of, on the default device (PoCL). Scalar stream kernels
(one float per work-item, as users write them) timed in alternation, in rounds, beside the read bandwidth of a
contiguous float16 read; each kernel's time set against the bytes its cores wait to read -- the bytes it loads
plus the lines it writes without having read them (write-allocate) -- over that read bandwidth. Kernels that write
lines they read (saxpy, an in-place increment) read no line for their stores.

    python benchmarks/cpu_streams.py [--device opencl:0:0] [--floats 134217728] [--rounds 3]

Prints, per round, each kernel's 10th-percentile time, its predicted time and the ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.engine import Engine  # noqa: E402
from gpuprofiler.measure.policy import TimingPolicy  # noqa: E402

SOURCE = """
__kernel void rd(__global const float16 *a, __global float *out, float never) {
    long g = get_global_id(0); float16 v = a[g]; float8 h = v.lo + v.hi; float4 q = h.lo + h.hi;
    float2 d = q.lo + q.hi; if (d.x + d.y == never) out[0] = 1.0f; }
__kernel void wr(__global float *b, float v) { int i = get_global_id(0); b[i] = v; }
__kernel void scale(__global const float *a, __global float *b, float s) { int i = get_global_id(0); b[i] = s * a[i]; }
__kernel void vadd(__global const float *a, __global const float *b, __global float *c) {
    int i = get_global_id(0); c[i] = a[i] + b[i]; }
__kernel void saxpy(__global const float *a, __global float *b, float s) { int i = get_global_id(0); b[i] += s * a[i]; }
__kernel void inc(__global float *b, float s) { int i = get_global_id(0); b[i] += s; }
"""

# kernel: (floats loaded per work-item, lines written without being read, per work-item, in floats)
WAITED = {"wr": (0, 1), "scale": (1, 1), "vadd": (2, 1), "saxpy": (2, 0), "inc": (1, 0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--floats", type=int, default=1 << 27)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.floats - args.floats % 4096
    with open_backend(args.device) as be:
        rng = np.random.default_rng(0)
        a, b, c = (be.to_device(rng.random(n, dtype=np.float32))[0] for _ in range(3))
        out = be.alloc(64)
        kernels = {name: be.compile(SOURCE, name) for name in ("rd", *WAITED)}
        cases = {"rd": ((n // 16,), [a, out, np.float32(-1)]), "wr": ((n,), [b, np.float32(1)]),
                 "scale": ((n,), [a, b, np.float32(2)]), "vadd": ((n,), [a, b, c]),
                 "saxpy": ((n,), [a, b, np.float32(1e-7)]), "inc": ((n,), [b, np.float32(1e-7)])}
        engine = Engine(TimingPolicy(warmup=1, min_samples=8, budget_s=1.5 * len(cases)))

        def run(name):
            size, kargs = cases[name]

            def once() -> float:
                event = engine.launch_once(be, kernels[name], size, (256,), kargs)
                be.finish()
                return event.seconds()
            return once

        print(f"{be.info.name}: {n} floats per array; times are 10th percentiles, predicted = (loads + fills) / "
              "the contiguous read bandwidth of the same round")
        for r in range(args.rounds):
            timings = engine.interleave([run(name) for name in cases])
            times = {name: t.device.model for name, t in zip(cases, timings)}
            read_bps = 4 * n / times["rd"]
            print(f"round {r + 1}: read {read_bps / 1e9:.1f} GB/s")
            for name, (loads, fills) in WAITED.items():
                want = (loads + fills) * 4 * n / read_bps
                print(f"  {name:6s} {times[name] * 1e3:8.2f} ms  predicted {want * 1e3:8.2f} ms  "
                      f"ratio {times[name] / want:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
