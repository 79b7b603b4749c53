#!/usr/bin/env python3
"""Reproducibility of two `gpuprofiler validate` runs of the same suite on the same device: for every measured
target (an item's or app phase's largest sizes, the ones predicted), its modelling figure (10th percentile) and its
median in each run, their ratio, and the share of targets of at least --min-ms whose figure agrees within --within.

    python scripts/compare_runs.py RUN_A RUN_B [--min-ms 1] [--within 0.10]

RUN_A and RUN_B are validate output folders (each with predictions.csv); exit 1 if the share is below --need.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def targets(folder: Path) -> dict[tuple[str, int], tuple[float, float]]:
    """(kernel, size) -> (modelling figure, median) of every measured target in a run's predictions.csv."""
    out = {}
    with open(folder / "predictions.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            out[(r["kernel"], int(r["size"]))] = (float(r["measured_s"]), float(r["measured_median_s"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--min-ms", type=float, default=1.0, help="targets at least this long (default 1 ms)")
    ap.add_argument("--within", type=float, default=0.10, help="agreement wanted (default 0.10: 10%%)")
    ap.add_argument("--need", type=float, default=0.90, help="share of targets that must agree (default 0.90)")
    args = ap.parse_args(argv)
    try:
        a, b = targets(args.a), targets(args.b)
    except (OSError, KeyError, ValueError) as exc:
        print(f"compare_runs: cannot read the runs' predictions.csv: {exc}", file=sys.stderr)
        return 2
    common = sorted(set(a) & set(b))
    if not common:
        print("compare_runs: the runs share no target", file=sys.stderr)
        return 2
    print(f"{'target':<28} {'size':>11} {'p10 A (s)':>11} {'p10 B (s)':>11} {'B/A':>6} {'median A':>10} "
          f"{'median B':>10} {'B/A':>6}")
    judged = agree = 0
    for key in common:
        (fa, ma), (fb, mb) = a[key], b[key]
        long_enough = min(fa, fb) >= args.min_ms * 1e-3
        ok = abs(fb / fa - 1) <= args.within
        judged += long_enough
        agree += long_enough and ok
        mark = "" if not long_enough else ("  ok" if ok else "  OFF")
        print(f"{key[0]:<28} {key[1]:>11} {fa:>11.4g} {fb:>11.4g} {fb / fa:>6.3f} {ma:>10.4g} {mb:>10.4g} "
              f"{mb / ma:>6.3f}{mark}")
    share = agree / judged if judged else 0.0
    print(f"\n{agree} of {judged} targets of >= {args.min_ms:g} ms agree within {100 * args.within:g}% "
          f"({100 * share:.0f}%; wanted {100 * args.need:.0f}%)")
    return 0 if share >= args.need else 1


if __name__ == "__main__":
    sys.exit(main())
