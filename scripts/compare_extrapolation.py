#!/usr/bin/env python3
"""Issue 4's acceptance run: every builtin kernel spec and app, extrapolated from its default small sizes to its
default target (8x beyond the largest small size), each target measured for real (--check).

Prints and writes (under --out) a table per case with the chosen model's, the pure fractal fit's, Extra-P's
(where the `extrap` command is installed, or $EXTRAP names it) and the polynomial baselines' signed errors,
and a summary: median |error| per model and the share of measured times inside the chosen model's interval.

    python scripts/compare_extrapolation.py --profile results/<device>/profile.json --out results/<device>/extrapolation
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuprofiler import __version__  # noqa: E402
from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.policy import SWEEP  # noqa: E402
from gpuprofiler.measure.storage import MeasurementLog, json_ready, read_records  # noqa: E402
from gpuprofiler.models.fractal.predictor import FractalPredictor, check_record  # noqa: E402
from gpuprofiler.profile.file import load_profile  # noqa: E402
from gpuprofiler.report.plots import plot_extrapolation  # noqa: E402
from gpuprofiler.workloads.builtin import builtin_apps, builtin_specs  # noqa: E402
from gpuprofiler.workloads.sweep import from_records, load_target, run_sweep  # noqa: E402


def item_name(item) -> str:
    return item.name


MODELS = ("chosen", "fractal", "extrap", "poly1", "poly2", "poly3", "poly4")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", help="hardware profile (launch overhead for the overhead law; regime warnings)")
    ap.add_argument("--device")
    ap.add_argument("--out", default=None, help="folder for table.csv, summary.md, predictions.json, plots")
    ap.add_argument("--only", help="comma-separated names")
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--from-log", help="reuse the measurements of an earlier run (its measurements.jsonl) instead "
                                       "of measuring again: same sweeps, models refitted")
    args = ap.parse_args()
    profile = load_profile(args.profile) if args.profile else None
    stored = read_records(Path(args.from_log)) if args.from_log else None
    if stored is None:
        backend = open_backend(args.device)
        device = {"name": backend.info.name, "id": backend.info.id, "slug": backend.info.slug}
    else:  # refitting: the device is the one that measured, and none is opened
        backend, device = None, stored[0]["device"]
    out = Path(args.out) if args.out else Path("results") / device["slug"] / "extrapolation"
    out.mkdir(parents=True, exist_ok=True)
    log = MeasurementLog(out / "measurements.jsonl", backend.info) if stored is None else None
    policy = SWEEP.but(budget_s=args.budget)
    items = builtin_specs() + builtin_apps()
    if args.only:
        keep = set(args.only.split(","))
        items = [p for p in items if p.stem in keep]
    rows, everything = [], []
    started = time.time()
    for path in items:
        item = load_target(path)
        small, targets = item.small, item.target
        print(f"== {path.stem}: small {small} -> target {targets}", file=sys.stderr, flush=True)
        if stored is not None:
            sweep = from_records([r for r in stored if r["kernel"] == item_name(item) and r["size"] in small])
        else:
            sweep = run_sweep(backend, item, small, policy, on_record=log.append)
        if stored is not None:
            checks = {t: from_records([r for r in stored if r["kernel"] == item_name(item) and r["size"] == t])
                      for t in targets}
        else:
            checks = {t: run_sweep(backend, item, [t], policy.but(warmup=1), on_record=log.append) for t in targets}
        fractal = FractalPredictor(extrap=True).fit(item, profile, sweep)
        if fractal.extrap_error_:
            print(f"   {fractal.extrap_error_}", file=sys.stderr)
        recs = [check_record(p.details, checks[p.size]) for p in fractal.predict(targets)]
        plot_extrapolation(fractal.extrapolation_, recs, out / f"{path.stem}.png")
        for r in recs:
            errs = {"chosen": r["error"], "fractal": r["fractal_error"], **r["baseline_errors"]}
            rows.append({"name": path.stem, "size": r["size"], "measured_s": r["measured_s"],
                         "predicted_s": r["predicted_s"], "interval_low_s": r["interval_s"][0],
                         "interval_high_s": r["interval_s"][1], "inside": r["inside_interval"], "model": r["model"],
                         **{f"err_{m}": errs.get(m) for m in MODELS}, "warnings": " | ".join(r["warnings"])})
            everything.append({"name": path.stem, **r})
            xp = "-" if errs.get("extrap") is None else f"{errs['extrap'] * 100:+.1f}%"
            print(f"   {path.stem} {r['size']}: measured {r['measured_s'] * 1e3:.4g} ms, chosen {r['error'] * 100:+.1f}%"
                  f" ({r['model']}), fractal {r['fractal_error'] * 100:+.1f}%, extrap {xp}, inside "
                  f"{r['inside_interval']}", file=sys.stderr, flush=True)
    with open(out / "table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (out / "predictions.json").write_text(json.dumps(json_ready(everything), indent=1))
    lines = [f"# Fractal extrapolation on {device['name']} ({device['id']})", "",
             f"gpuprofiler {__version__}, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, host "
             f"{platform.node()}, {time.time() - started:.0f} s. Command: `python {' '.join(sys.argv)}`", "",
             *([f"Measurements reused from `{args.from_log}`, taken {min(r['date'] for r in stored)} .. "
                f"{max(r['date'] for r in stored)} by "
                + " and ".join(f"`{c}`" for c in dict.fromkeys(r["command"] for r in stored))
                + f" (gpuprofiler {stored[0]['version']}); the models are refitted on them.", ""] if stored else []),
             "| case | target | measured (ms) | chosen | error | inside | fractal | Extra-P | poly1 | poly2 | poly3 | poly4 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pct = lambda v: "-" if v is None else f"{v * 100:+.1f}%"  # noqa: E731
    for r in rows:
        lines.append(f"| {r['name']} | {r['size']} | {r['measured_s'] * 1e3:.4g} | {r['model']} | {pct(r['err_chosen'])} "
                     f"| {'yes' if r['inside'] else 'no'} | {pct(r['err_fractal'])} | {pct(r['err_extrap'])} | "
                     f"{pct(r['err_poly1'])} | {pct(r['err_poly2'])} | {pct(r['err_poly3'])} | {pct(r['err_poly4'])} |")
    lines += ["", "| model | cases | median abs error | mean abs error |", "|---|---|---|---|"]
    summary = {}
    for m in MODELS:
        vals = [abs(r[f"err_{m}"]) for r in rows if r[f"err_{m}"] is not None]
        if vals:
            summary[m] = float(np.median(vals))
            lines.append(f"| {m} | {len(vals)} | {np.median(vals) * 100:.1f}% | {np.mean(vals) * 100:.1f}% |")
    inside = float(np.mean([r["inside"] for r in rows]))
    lines += ["", f"Measured time inside the chosen model's 95% interval: {inside * 100:.0f}% of {len(rows)} cases.", ""]
    warned = [r for r in rows if r["warnings"]]
    if warned:
        lines += ["Warnings:", ""] + [f"- {r['name']}: {r['warnings']}" for r in warned]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
