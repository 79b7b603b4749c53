"""Comparison (not a test): Kernel Tuner's brute force on the same Sliced ELLPACK space, matrix and device as
``gpuprofiler tune --strategy brute``. Runs in a separate venv that has Kernel Tuner, not in the project's:

    python3 -m venv /tmp/kt && /tmp/kt/bin/pip install "kernel_tuner==1.5.*" pyopencl scipy
    /tmp/kt/bin/python benchmarks/kernel_tuner_sell.py --family poisson2d --size 1048576 [--iterations 32]

The SELL arrays depend on the slice height S, and Kernel Tuner passes one argument list to every configuration,
so each S is its own ``tune_kernel`` call over Nt (the work-group size, ``block_size_names``) with the restriction
Nt % S == 0; S reaches the kernel as Kernel Tuner's own #define. Every configuration's result is checked against
scipy's product (``answer``). Prints one row per configuration: Kernel Tuner's mean time over ``iterations``
launches with its 95% t interval, and the minimum and 10th percentile of those launches (the figure gpuprofiler
models).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.workloads import sparse  # noqa: E402  (numpy and scipy only)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="poisson2d")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--S", default="1,2,4,8,16,32")
    ap.add_argument("--Nt", default="64,128,256,512")
    ap.add_argument("--iterations", type=int, default=32)
    ap.add_argument("--json", help="write the rows here too")
    args = ap.parse_args()
    import kernel_tuner
    from scipy import stats

    source = (REPO / "kernels" / "sparse" / "spmv_sell.cl").read_text()
    n = args.size
    m = sparse.matrix(args.family, n)
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    want = (m.scipy().astype(np.float64) @ x.astype(np.float64)).astype(np.float32)
    rows = []
    for S in (int(v) for v in args.S.split(",")):
        s = sparse.to_sell(m, S)
        arguments = [np.int32(n), s.sliceptr, s.cols, s.vals, x, np.zeros(n, np.float32)]
        results, env = kernel_tuner.tune_kernel(
            "spmv_sell", source, n, arguments, {"S": [S], "Nt": [int(v) for v in args.Nt.split(",")]},
            lang="OpenCL", block_size_names=["Nt"], restrictions=["Nt % S == 0"], answer=[None] * 5 + [want],
            atol=1e-3, iterations=args.iterations, verbose=False, quiet=True)
        for r in results:
            times = np.asarray(r.get("times", []), dtype=float)
            half = float(stats.t.ppf(0.975, times.size - 1) * times.std(ddof=1) / np.sqrt(times.size)) \
                if times.size > 1 else float("nan")
            rows.append({"S": S, "Nt": r["Nt"], "mean_ms": float(r["time"]), "mean_ci_ms": half,
                         "times_ms": times.tolist(),
                         "min_ms": float(times.min()) if times.size else float("nan"),
                         "p10_ms": float(np.quantile(times, 0.1)) if times.size else float("nan"),
                         "launches": int(times.size)})
    rows.sort(key=lambda r: r["mean_ms"])
    print(f"Kernel Tuner {kernel_tuner.__version__}, {env.get('device_name')}, {args.family} at {n} rows "
          f"({m.nnz} nonzeros), {args.iterations} launches per configuration")
    print(f"{'S':>4} {'Nt':>5} {'mean ms':>9} {'95% interval of the mean':>25} {'p10 ms':>9} {'min ms':>9}")
    for r in rows:
        iv = f"[{r['mean_ms'] - r['mean_ci_ms']:.4f}, {r['mean_ms'] + r['mean_ci_ms']:.4f}]"
        print(f"{r['S']:>4} {r['Nt']:>5} {r['mean_ms']:>9.4f} {iv:>25} {r['p10_ms']:>9.4f} {r['min_ms']:>9.4f}")
    best_mean = rows[0]
    best_p10 = min(rows, key=lambda r: r["p10_ms"])
    print(f"best by mean: S={best_mean['S']};Nt={best_mean['Nt']}; best by p10: S={best_p10['S']};Nt={best_p10['Nt']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
