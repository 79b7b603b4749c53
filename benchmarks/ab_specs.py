"""A/B (not a test): kernel specs or configurations timed in alternation, one launch of each per round, so that a
shared device's drift falls on all alike; prints each one's 10th percentile with its 95% interval, and each
against the first.

    python benchmarks/ab_specs.py --size N [--seconds S] [--matrix FAMILY] SPEC[:NAME=V,...] SPEC[:NAME=V,...] ...

A SPEC is a path or a builtin name; the part after ":" overrides its parameters (``spmv_sell_pairs:S=1,Nt=512``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.engine import Engine  # noqa: E402
from gpuprofiler.measure.policy import TimingPolicy  # noqa: E402
from gpuprofiler.measure.stats import summarize  # noqa: E402
from gpuprofiler.workloads.bounds import check_sizes  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.kernel import _timed_run, prepare, run_checked  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("items", nargs="+", metavar="SPEC[:NAME=V,...]")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--matrix", help="the matrix family for specs with a [matrix] table")
    ap.add_argument("--device")
    args = ap.parse_args()
    backend = open_backend(args.device)
    engine = Engine(TimingPolicy(warmup=2, min_samples=5, budget_s=args.seconds, rel_ci=0.0, max_samples=100000))
    runs, labels = [], []
    for item in args.items:
        name, _, sets = item.partition(":")
        spec = load_spec(resolve(name))
        if args.matrix and spec.matrix is not None:
            spec = spec.with_matrix(args.matrix)
        config = {k: int(v) for k, v in (p.split("=") for p in sets.split(",") if p)}
        check_sizes(spec, [args.size], config)
        prepared = prepare(backend, spec, args.size, overrides=config, bounds_checked=True)
        run_checked(backend, prepared)
        runs.append(_timed_run(backend, engine, prepared))
        labels.append(item)
    timings = engine.interleave(runs)
    first = summarize(timings[0].device_s)
    print(f"{backend.info.name}, size {args.size}" + (f", matrix {args.matrix}" if args.matrix else "")
          + f", {len(timings[0].device_s)} rounds")
    for label, t in zip(labels, timings):
        s = summarize(t.device_s)
        print(f"{label:<44} p10 {s.model * 1e3:9.4f} ms [{s.model_ci_low * 1e3:.4f}, {s.model_ci_high * 1e3:.4f}]"
              f"  x{s.model / first.model:.3f} of the first")
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
