"""``gpuprofiler intervals``: the calibration of every predictor's intervals on its own out-of-sample errors."""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path

from gpuprofiler.cli.common import progress
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("intervals", help="fit or show the calibration of the predictors' intervals")
    isub = p.add_subparsers(dest="action", required=True)
    fit = isub.add_parser("fit", help="calibrate the intervals on the rows of validation runs (predictions.csv)")
    fit.add_argument("runs", nargs="+", metavar="RUN_DIR",
                     help="`validate` output folders (live or --replay) whose predictions.csv rows are the cases")
    fit.add_argument("-o", "--output", required=True, metavar="FILE", help="the calibration file to write")
    fit.add_argument("--level", type=float, default=None,
                     help="the share of out-of-sample cases an interval is made to hold (default 0.8)")
    fit.set_defaults(func=run_fit)
    show = isub.add_parser("show", help="a calibration's cases and its leave-family-out coverage and widths")
    show.add_argument("file", nargs="?", metavar="FILE", help="a calibration file (default: the shipped one)")
    show.set_defaults(func=run_show)


def _rows(run: Path) -> list[dict]:
    path = run / "predictions.csv"
    if not path.is_file():
        raise UserError(f"{run}: no predictions.csv (give the output folder of a `validate` run)")
    from gpuprofiler.textfile import read_text

    return list(csv.DictReader(io.StringIO(read_text(path, "predictions file", 64 << 20))))


def _device(run: Path) -> str:
    """The device a run measured on, for rows that do not name it: its profile's, else its first record's."""
    import json

    from gpuprofiler.measure.storage import read_records

    try:
        if (run / "profile.json").is_file():
            return str(json.loads((run / "profile.json").read_text()).get("device", {}).get("name") or "")
        if (run / "measurements.jsonl").is_file():
            for r in read_records(run / "measurements.jsonl"):
                return str((r.get("device") or {}).get("name") or "")
    except (OSError, ValueError, AttributeError):
        pass
    return ""


def run_fit(args: argparse.Namespace) -> int:
    from gpuprofiler.models.intervals import LEVEL, Calibration, residuals_from_rows, stamp

    level = LEVEL if args.level is None else args.level
    if not (isinstance(level, float) and math.isfinite(level) and 0.5 <= level < 1.0):
        raise UserError("--level must lie in [0.5, 1)")
    residuals, sources = [], []
    for run in map(Path, args.runs):
        rows = _rows(run)
        got = residuals_from_rows(rows, str(run), device=_device(run))
        if not got:
            raise UserError(f"{run}/predictions.csv: no usable rows (kernel, size, model, predicted_s, measured_s)")
        if not all(r.kind for r in got):
            raise UserError(f"{run}/predictions.csv: rows without a device_kind (a run before intervals were "
                            "calibrated: replay its measurements with `validate --replay` first)")
        residuals += got
        sources.append({"run": str(run), "cases": len(got), "models": sorted({r.model for r in got}),
                        "kinds": sorted({r.kind for r in got}), "devices": sorted({r.device for r in got}),
                        "kernels": len({r.kernel for r in got})})
    cal = Calibration(residuals, level, sources, stamp())
    cal.save(args.output)
    progress(f"wrote {len(residuals)} residual(s) of {len({r.kernel for r in residuals})} kernel(s) from "
             f"{len(sources)} run(s) to {args.output}")
    _print(cal)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from gpuprofiler.models.intervals import DEFAULT_FILE, load

    cal = load(args.file)
    if not cal.residuals:
        raise UserError(f"{args.file or DEFAULT_FILE}: no calibration")
    for s in cal.sources:
        print(f"from {s.get('run')}: {s.get('cases')} case(s), {s.get('kernels')} kernel(s), "
              f"{', '.join(s.get('models', []))} on {', '.join(s.get('kinds', []))}")
    _print(cal)
    return 0


def _print(cal) -> None:
    from gpuprofiler.models.intervals import summary

    print(f"level {cal.level:g}; leave-family-out on the calibration's own cases (each kernel weighing one):")
    print(f"{'model':10s} {'kind':5s} {'cases':>6s} {'kernels':>8s} {'families':>9s} {'median |err|':>13s} "
          f"{'inside':>7s} {'median width':>13s}")
    for r in summary(cal):
        print(f"{r['model']:10s} {r['kind']:5s} {r['cases']:6d} {r['kernels']:8d} {r['families']:9d} "
              f"{r['median_abs_error']:12.1%} {r['inside']:7.0%} {r['median_width']:12.2f}x")
