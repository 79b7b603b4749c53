#!/usr/bin/env python3
"""The max-plus overlap model with its DRAM and cache traffic from the fixed footprint and reuse rules against the
same model fed with the sampled address stream's predicted misses, on stored measurements (no device).

    python scripts/compare_maxplus_cache.py LOG PROFILE [--targets-only] [--items a,b]

LOG is a measurements.jsonl (validate's, measure's); every stored size of every builtin kernel spec in it is
predicted both ways and set against its modelling figure (10th percentile). Prints one row per case and the MAPE
and median |error| of each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from gpuprofiler.measure.stats import model_value
from gpuprofiler.models.base import NotApplicable
from gpuprofiler.models.maxplus.predictor import MaxPlusPredictor
from gpuprofiler.profile.file import load_profile
from gpuprofiler.validate.replay import latest_per_size, read_log
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.spec import load_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("profile", type=Path)
    ap.add_argument("--targets-only", action="store_true", help="only each kernel's largest stored size")
    ap.add_argument("--items", help="comma-separated kernel names")
    args = ap.parse_args(argv)
    profile = load_profile(args.profile)
    measured: dict[tuple[str, int], float] = {}
    kernels = [r for r in read_log(args.log) if r.get("kernel") == r.get("phase") and r.get("kind", "kernel") == "kernel"]
    for name in {r["kernel"] for r in kernels}:
        for size, recs in latest_per_size([r for r in kernels if r["kernel"] == name]).items():
            measured[(name, size)] = model_value(recs[0]["samples_s"])  # a validate run's visits pooled
    names = sorted({k for k, _ in measured} & set(args.items.split(",") if args.items else {k for k, _ in measured}))
    errs: dict[str, list[float]] = {"rules": [], "misses": []}
    print(f"{'kernel':<16} {'size':>11} {'measured':>10} {'rules':>10} {'err':>8} {'misses':>10} {'err':>8}")
    for name in names:
        try:
            spec = load_spec(resolve(name))
        except Exception:  # noqa: BLE001 - an app or a kernel no longer builtin: not compared
            continue
        sizes = sorted(s for k, s in measured if k == name)
        if args.targets_only:
            sizes = sizes[-1:]
        try:
            rules = MaxPlusPredictor(cache=False).fit(spec, profile).predict(sizes)
            misses = MaxPlusPredictor(cache=True).fit(spec, profile).predict(sizes)
        except NotApplicable as exc:
            print(f"{name:<16} refused: {exc}")
            continue
        for size, a, b in zip(sizes, rules, misses):
            m = measured[(name, size)]
            ea, eb = (a.seconds - m) / m, (b.seconds - m) / m
            errs["rules"].append(abs(ea))
            errs["misses"].append(abs(eb))
            print(f"{name:<16} {size:>11} {m:>10.4g} {a.seconds:>10.4g} {100 * ea:>+7.1f}% {b.seconds:>10.4g} "
                  f"{100 * eb:>+7.1f}%")
    for how, e in errs.items():
        if e:
            print(f"{how:<7} {len(e)} cases  MAPE {100 * np.mean(e):6.1f}%  median |error| {100 * np.median(e):5.1f}%")
    if errs["rules"]:
        print(f"MAPE with predicted misses / with the rules: {np.mean(errs['misses']) / np.mean(errs['rules']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
