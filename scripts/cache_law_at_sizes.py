#!/usr/bin/env python3
"""The cache-miss law fitted on a stored validate run's sweep of one kernel, evaluated at other sizes beside their
measured times, its terms per n^3 (no device).

    python scripts/cache_law_at_sizes.py RUN_DIR KERNEL --sizes 512,768,1024 [--measured TABLE]

RUN_DIR holds validate's measurements.jsonl and profile.json; the law is fitted on the kernel's small sizes there
(the sizes below its targets), as validate --replay fits it. TABLE: a text table whose rows start with a size and
whose fifth column is the measured time per n^3 in ns (``matmul_naive_strides.txt``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuprofiler.models import registry
from gpuprofiler.profile.file import load_profile
from gpuprofiler.validate.replay import latest_per_size, read_log, stored_sweep
from gpuprofiler.validate.suite import suite_paths
from gpuprofiler.workloads.sweep import from_records, load_target

TERMS = ("work_s", "page_walks_s", "cache_served_s", "memory_s", "store_stall_s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("kernel")
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--measured", type=Path)
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        print(f"--sizes: not a comma-separated list of integers: {args.sizes!r}", file=sys.stderr)
        return 2
    profile = load_profile(args.run / "profile.json")
    records = [r for r in read_log(args.run / "measurements.jsonl", lambda m: None) if r["kernel"] == args.kernel]
    paths = list(suite_paths("builtin", [args.kernel]))
    if not records or not paths:
        print(f"{args.kernel}: not a builtin kernel measured in {args.run}", file=sys.stderr)
        return 2
    item = load_target(paths[0])
    per_size = latest_per_size(records)
    small, _ = stored_sweep(sorted(per_size), item)
    predictor = registry.create("fractal").fit(item, profile, from_records([r for s in small for r in per_size[s]]))
    model = list(predictor.extrapolation_.fits.values())[0].model
    law = next((m for m in [model] + list(getattr(model, "rivals_", [])) if m.name == "cache-miss"), None)
    if law is None:
        print(f"{args.kernel}: no cache-miss law fitted on {args.run}'s sweep", file=sys.stderr)
        return 1
    measured = {}
    if args.measured:
        for line in args.measured.read_text().splitlines():
            cols = line.split()
            if cols and not line.startswith("#") and cols[0].isdigit():
                measured[int(cols[0])] = float(cols[4])
    c0, k, s, r = law.coef_
    print(f"# {args.kernel}: cache-miss law on {args.run}'s sweep {small}: c0 {c0:.3g} s, k {k:.4g}, s {s:.3g}, "
          f"r {r:.3g}; terms in ns per n^3")
    print(f"{'size':>6} {'predicted':>9} {'measured':>9} {'error':>7}  " + " ".join(f"{t[:-2]:>10}" for t in TERMS)
          + "  bound")
    for n in sizes:
        value, _, details = law._predict(n)
        per = value / n**3 * 1e9
        meas = measured.get(n)
        error = f"{(per / meas - 1) * 100:+6.1f}%" if meas else "      -"
        print(f"{n:>6} {per:>9.3f} {meas if meas else float('nan'):>9.3f} {error}  "
              + " ".join(f"{float(details.get(t, 0.0)) / n**3 * 1e9:>10.3f}" for t in TERMS) + f"  {details['bound']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
