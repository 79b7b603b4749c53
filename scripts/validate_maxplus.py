"""Validate the max-plus models on the device: each builtin memory-bound kernel at its largest size,
measured for real, against every model's prediction from the hardware profile. Prints the table and
the serialized-memory model's MAPE; writes table.csv, summary.md and measurements.jsonl.

    python scripts/validate_maxplus.py --profile results/<device>/profile.json [--device ID] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuprofiler import __version__
from gpuprofiler.device import open_backend
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.storage import MeasurementLog, command_line
from gpuprofiler.models.maxplus.builder import build_spec
from gpuprofiler.models.maxplus.models import parameters, predict
from gpuprofiler.profile.file import load_profile
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.kernel import measure_spec
from gpuprofiler.workloads.spec import load_spec

KERNELS = ("copy", "scale", "vadd", "saxpy", "triad")
EXTRA = ("transpose_naive", "stencil5")
VARIANTS = (("naive", None), ("ops", None), ("serial", "sequential"), ("serial", "pipelined"),
            ("cache", "pipelined"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--device")
    ap.add_argument("--out")
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--only", help="comma-separated kernel names")
    args = ap.parse_args()
    profile = load_profile(args.profile)
    backend = open_backend(args.device)
    out = Path(args.out) if args.out else Path("results") / backend.info.slug / "maxplus"
    out.mkdir(parents=True, exist_ok=True)
    log = MeasurementLog(out / "measurements.jsonl", backend.info)
    policy = TimingPolicy(warmup=1, min_samples=5, budget_s=args.budget)
    names = args.only.split(",") if args.only else KERNELS + EXTRA
    rows = []
    for name in names:
        spec = load_spec(resolve(name))
        size = max(spec.target or spec.small)
        kernel = build_spec(spec.instantiate(size), backend.kind)
        params = parameters(profile, kernel)
        print(f"== {name} at {size}: measuring", file=sys.stderr, flush=True)
        (rec,) = measure_spec(backend, spec, [size], policy, on_record=log.append)
        measured = rec["median_s"]
        items = math.prod(spec.instantiate(size).global_size)
        for model, batches in VARIANTS:
            p = predict(kernel, params, items, size, model, batches)
            d = p.details
            rows.append({"kernel": name, "size": size, "model": model, "batches": d["batches"], "n": d["n"],
                         "predicted_s": p.seconds, "measured_s": measured,
                         "rel_error": (p.seconds - measured) / measured, "core": name in KERNELS,
                         "symbolic": d["symbolic"]})
            print(f"   {model:<6} {d['batches']:<10} {p.seconds:.4g} s vs {measured:.4g} s: "
                  f"{rows[-1]['rel_error'] * 100:+.1f}%", file=sys.stderr, flush=True)
    with open(out / "table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# Max-plus models on {backend.info.name} ({backend.info.id})", "",
             (f"gpuprofiler {__version__}, {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}, "
              f"host {platform.node()}; profile {args.profile}"), f"command: `{command_line()}`", "",
             "| kernel | size | model | batches | n | predicted (s) | measured (s) | error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['size']} | {r['model']} | {r['batches']} | {r['n']} | "
                     f"{r['predicted_s']:.4g} | {r['measured_s']:.4g} | {r['rel_error'] * 100:+.1f}% |")
    lines += ["", "MAPE over " + ", ".join(KERNELS) + " (largest size):", ""]
    for model, batches in VARIANTS:
        errs = [abs(r["rel_error"]) for r in rows if r["core"] and r["model"] == model and
                r["batches"] == (batches or "sequential")]
        if errs:
            lines.append(f"* {model} ({batches or 'sequential'} batches): {100 * sum(errs) / len(errs):.1f}%")
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(f"({time.time() - t0:.0f} s)", file=sys.stderr)
    sys.exit(rc)
