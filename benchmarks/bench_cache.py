"""Benchmark (not a test): the cache analysis (`gpuprofiler cache`) of kernels whose working set is 1 GiB, on
this machine, with the committed PoCL and H100 profiles: address streams laid out in each device's order, reuse
distances sampled at 1e-3, miss ratios at every level. A table of the wall times, exit status 1 if any analysis
takes more than ``--limit`` seconds (10 s).

    python benchmarks/bench_cache.py [--limit 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.models.cache.analysis import analyse  # noqa: E402
from gpuprofiler.profile.file import load_profile  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402

PROFILES = {"pocl": REPO / "tests" / "fixtures" / "profiles" / "pocl.json",
            "h100": REPO / "tests" / "fixtures" / "profiles" / "h100.json"}
GIB = 1 << 30


def size_for(spec, bytes_wanted: float) -> int:
    """The smallest size whose arrays take at least ``bytes_wanted`` (bisection on the spec's shapes)."""
    lo, hi = 1024, 2048  # small sizes may not instantiate (a side below a tile)
    while spec.instantiate(spec.valid_size(hi)).array_bytes < bytes_wanted:
        hi *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if spec.instantiate(spec.valid_size(mid)).array_bytes >= bytes_wanted:
            hi = mid
        else:
            lo = mid
    return spec.valid_size(hi)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=10.0)
    ap.add_argument("--kernels", default="vadd,stencil5,transpose_naive,transpose_tiled,spmv_csr,matmul_naive,gemm,"
                                         "kmeans,conv3d")
    args = ap.parse_args(argv)
    worst = 0.0
    print(f"{'kernel':<16} {'profile':<6} {'size':>11} {'working set':>12} {'accesses':>10} {'samples':>8} "
          f"{'seconds':>8}  last-level miss ratio")
    for name in args.kernels.split(","):
        spec = load_spec(resolve(name))
        size = size_for(spec, GIB)
        inst = spec.instantiate(size)
        for label, path in PROFILES.items():
            profile = load_profile(path)
            t0 = time.perf_counter()
            res = analyse(inst, profile)
            secs = time.perf_counter() - t0
            worst = max(worst, secs)
            last = res.levels[-1] if res.levels else None
            print(f"{name:<16} {label:<6} {size:>11} {inst.array_bytes / GIB:>10.2f} GiB {res.accesses:>10.3g} "
                  f"{res.samples:>8} {secs:>8.2f}  {last.miss_ratio if last else float('nan'):.3f}")
    print(f"slowest: {worst:.2f} s (limit {args.limit:g} s)")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
