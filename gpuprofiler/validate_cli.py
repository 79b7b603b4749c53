"""``gpuprofiler validate``: the command line of :mod:`gpuprofiler.validate`."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="run every applicable model on a suite, measure the targets, write a report")
    p.add_argument("--suite", default="builtin", help="'builtin' (default) or a folder of kernel specs and apps")
    p.add_argument("--device", help="device id (default: the default device)")
    p.add_argument("--profile", help="hardware profile (default: OUTDIR/profile.json, calibrated if missing)")
    p.add_argument("--models", default="fractal,maxplus,pipeline", help="comma-separated: fractal, maxplus, pipeline")
    p.add_argument("--quick", action="store_true", help="shorter sampling (and a quick calibration if one is needed)")
    p.add_argument("--fresh", action="store_true", help="measure everything again instead of reusing OUTDIR's runs")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="folder for the report and measurements")
    p.set_defaults(func=cmd_validate)


def say(message: str) -> None:
    print(f"gpuprofiler: {message}", file=sys.stderr, flush=True)


def cmd_validate(args) -> int:
    from gpuprofiler import validate
    from gpuprofiler.backends import open_backend
    from gpuprofiler.profile import load_profile
    from gpuprofiler.storage import command_line
    from gpuprofiler.validate_report import (
        PREDICTION_COLUMNS,
        SUMMARY_COLUMNS,
        write_csv,
        write_report,
    )

    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    bad = [m for m in models if m not in validate.MODELS]
    if bad or not models:
        raise UserError(f"unknown model(s) {', '.join(bad) or '(none)'}: choose from {', '.join(validate.MODELS)}")
    outdir = Path(args.output)
    validate.suite_paths(args.suite)  # a bad suite fails before anything is opened
    backend = open_backend(args.device)
    try:
        if args.profile:
            profile = load_profile(args.profile)
            profile_name = args.profile
        else:
            path = outdir / "profile.json"
            if path.exists() and not args.fresh:
                say(f"reusing the profile {path}")
                profile = load_profile(path)
            else:
                from gpuprofiler.calibrate import calibrate

                say(f"no --profile: calibrating {backend.info.id} first ({'quick' if args.quick else 'full'})")
                outdir.mkdir(parents=True, exist_ok=True)
                profile = calibrate(backend, path, quick=args.quick, progress=say)
            profile_name = str(path)
        try:
            results = validate.run(backend, args.suite, outdir, profile, models, args.quick, args.fresh, say)
        except KeyboardInterrupt:
            say(f"interrupted: finished measurements are kept in {outdir / 'measurements.jsonl'}; rerun to resume")
            return 130
    finally:
        backend.close()
    rows = [r for res in results for r in res.rows]
    summary = validate.summarize(rows)
    write_csv(outdir / "predictions.csv", rows, PREDICTION_COLUMNS)
    write_csv(outdir / "summary.csv", summary, SUMMARY_COLUMNS)
    notes = []
    if "pipeline" in models and backend.kind != "cuda":
        notes.append(f"pipeline: not run, it models NVIDIA GPUs and {backend.info.id} is not a CUDA device")
    reused = sum(res.reused for res in results)
    notes.append(f"{reused} of {sum(res.measurements for res in results)} measurement(s) reused from an earlier run "
                 "(see the command in each record of measurements.jsonl)" if reused else
                 "every measurement taken by this run")
    meta = {"device_name": backend.info.name, "device_id": backend.info.id, "suite": args.suite,
            "quick": args.quick, "profile": profile_name, "command": command_line(), "notes": notes}
    report = write_report(outdir, results, rows, summary, meta)
    for s in summary:
        print(f"{s['model']:<9} {s['cases']:>3} cases  MAPE {100 * s['mape']:6.1f}%  median |error| "
              f"{100 * s['median_abs_error']:5.1f}%  max {100 * s['max_abs_error']:7.1f}%")
    say(f"report: {report}")
    return 0
