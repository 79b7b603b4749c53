"""Benchmark of the pipeline model: simulated warp-instructions per second, and every builtin prediction's time.

Not a test. Run: ``python benchmarks/bench_pipeline.py [--only rate|predictions] [--repeat 3] [--limit 1.0]``.

* rate: each case is simulated exactly (no extrapolation) on the sm_90 defaults (132 SMs), so the busiest SM
  runs its share of the grid; the time is the simulator's alone (the PTX analysis before it is not counted);
* predictions: ``PipelinePredictor().fit(spec, profile).predict([size])`` for every builtin kernel spec at
  every size of its ``small`` and ``target`` lists with the H100 profile (default budget), sorted slowest
  first; exit status 1 if any takes more than ``--limit`` seconds.
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

from gpuprofiler.models.pipeline.predict import Options, predict  # noqa: E402
from gpuprofiler.models.pipeline.predictor import PipelinePredictor  # noqa: E402
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx  # noqa: E402
from gpuprofiler.models.pipeline.values import Launch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predictions import H100_PROFILE, time_all  # noqa: E402

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
    ap.add_argument("--only", choices=("rate", "predictions"), help="run one part (default: both)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the median rate / fastest time is reported")
    ap.add_argument("--profile", type=Path, default=H100_PROFILE, help="hardware profile for the predictions")
    ap.add_argument("--limit", type=float, default=1.0, help="seconds one prediction may take (exit 1 beyond)")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.node()}")
    if args.only != "predictions":
        rate(args.repeat)
    if args.only != "rate":
        return 0 if time_all("pipeline predictions (PTX fixtures or nvcc)", PipelinePredictor, args.profile,
                             args.limit, args.repeat) else 1
    return 0


def rate(repeat: int) -> None:
    """Simulated warp-instructions per second on the CASES, each simulated exactly."""
    print(f"{'case':<18} {'warp-instr':>11} {'seconds':>9} {'warp-instr/s':>13}")
    total_wi = total_s = 0.0
    for name, kernel, grid, block, cargs, trips in CASES:
        module = parse_ptx((FIXTURES / f"{name}.ptx").read_text(), name)
        rates, wi, secs = [], 0, []
        for _ in range(repeat):
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


if __name__ == "__main__":
    sys.exit(main())
