"""Benchmark of the pipeline simulator: simulated warp-instructions per second on the builtin kernels' PTX.

Not a test. Run: ``python benchmarks/bench_pipeline.py [--repeat 3]``. Each case is simulated exactly (no
extrapolation) on the sm_90 defaults (132 SMs), so the busiest SM runs its share of the grid; the time
is the simulator's alone (the PTX analysis before it is not counted). Prints each case and the total.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.models.pipeline.predict import Options, predict
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
from gpuprofiler.models.pipeline.values import Launch

FIXTURES = REPO / "tests" / "fixtures" / "ptx"
CASES = [  # (fixture, kernel, grid, block, args, trips)
    ("matmul_tiled", None, (64, 64), (16, 16), {0: 1024}, {}),
    ("matmul_naive", None, (64, 64), (16, 16), {0: 1024}, {}),
    ("vadd", None, (131072,), (256,), {0: 1 << 25}, {}),
    ("transpose_naive", None, (256, 256), (16, 16), {0: 4096}, {}),
    ("reduction", None, (65536,), (256,), {0: 1 << 24}, {}),
    ("stencil5", None, (256, 256), (16, 16), {0: 4096}, {}),
    ("spmv_csr", None, (16384,), (256,), {0: 1 << 22}, {"$L__BB0_7": 2, "$L__BB0_4": 0}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the median rate is reported")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.node()}")
    print(f"{'case':<18} {'warp-instr':>11} {'seconds':>9} {'warp-instr/s':>13}")
    total_wi = total_s = 0.0
    for name, kernel, grid, block, cargs, trips in CASES:
        module = parse_ptx((FIXTURES / f"{name}.ptx").read_text(), name)
        rates, wi, secs = [], 0, []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            r = predict(module, kernel, Launch(grid, block, cargs), None,
                        Options(arch="sm_90", trips=trips, registers=32, budget=10 ** 9))
            sim = r["simulation"]
            assert sim["method"] == "exact", sim["method"]
            wi = sim["warp_instructions_simulated"]
            secs.append(sim["seconds"])
            rates.append(wi / sim["seconds"])
            del t0
        s = statistics.median(secs)
        total_wi += wi
        total_s += s
        print(f"{name:<18} {wi:>11} {s:>9.3f} {statistics.median(rates):>13.3g}")
    print(f"{'all':<18} {int(total_wi):>11} {total_s:>9.3f} {total_wi / total_s:>13.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
