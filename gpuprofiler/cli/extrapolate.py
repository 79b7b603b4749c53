"""``gpuprofiler extrapolate``: predict large sizes from a small-size sweep; ``--check`` measures them too."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpuprofiler.cli.common import (
    add_cluster,
    add_device,
    add_profile,
    add_timing,
    checked,
    cluster_device,
    find_profile,
    int_list,
    open_runner,
    plot_path,
    policy,
    progress,
)
from gpuprofiler.errors import UserError
from gpuprofiler.measure.policy import SWEEP


def add_parser(sub) -> None:
    p = sub.add_parser("extrapolate", help="predict large sizes from a small-size sweep (fractal model)")
    p.add_argument("target", metavar="SPEC_OR_APP")
    p.add_argument("--small", type=int_list, help="small sizes (default: hardware-aware from the profile, --profile "
                                                   "or the device's stored one; without a profile the spec's)")
    p.add_argument("--target", dest="targets", type=int_list, help="target sizes (default: the spec's)")
    add_profile(p, "hardware profile (launch overhead, caches, bandwidth curve, concurrency)")
    p.add_argument("--check", action="store_true", help="also run the targets and report the error")
    p.add_argument("--json", action="store_true", help="print only JSON on stdout")
    p.add_argument("--plot", help="write a PNG of the sweep, fits and predictions")
    p.add_argument("--coverage", type=float, default=0.7, help="share of the run the major phases cover (0.7)")
    add_device(p)
    p.add_argument("-o", "--output", help="measurements log (default results/<device>/measurements.jsonl)")
    add_timing(p, SWEEP)
    p.add_argument("--no-check", action="store_true", help="skip the numpy reference checks")
    p.add_argument("--no-extrap", action="store_true", help="skip the Extra-P baseline even where installed")
    add_cluster(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checked(args.coverage, "--coverage", 0.0, 1.0, "a share of the run", above_low=True)
    policy(args)  # the timing options in their ranges before anything is measured
    plot_path(args.plot)
    from gpuprofiler.device import open_backend
    from gpuprofiler.measure.storage import MeasurementLog, default_path, json_ready
    from gpuprofiler.models.fractal.predictor import FractalPredictor, check_record
    from gpuprofiler.models.fractal.regimes import recommended_small
    from gpuprofiler.profile.file import load_profile
    from gpuprofiler.report.text import print_extrapolation
    from gpuprofiler.workloads.bounds import check_sizes
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import KernelSpec
    from gpuprofiler.workloads.sweep import load_target, run_sweep

    path = resolve(args.target)
    item = load_target(path)
    targets = args.targets or item.target
    if not targets:
        raise UserError(f"{path}: no --target given and no default target sizes")
    given = load_profile(args.profile) if args.profile else None
    notes: list[str] = []
    if args.small and (max(args.small) >= min(targets)):
        raise UserError("the small sizes must all lie below the targets")
    if args.small and len(args.small) < FractalPredictor.min_sizes:
        raise UserError(f"give at least {FractalPredictor.min_sizes} small sizes")
    runner = open_runner(args)
    if runner is not None:  # the sweep on a device of a cluster's kind (--device)
        kind, backend = cluster_device(runner, args.device)
    else:
        backend = open_backend(args.device)
    try:
        profile = given if given is not None else find_profile(args, backend.info).profile
        if args.small:
            small = args.small
        else:  # the sizes the profile (named, else the device's stored one) recommends; else the spec's own
            small, notes, how = recommended_small(item, targets, profile)
            if how == "hardware":
                progress(f"hardware-aware small sizes from the {'given' if given is not None else 'stored'} "
                         f"profile: {small}")
        if not small or max(small) >= min(targets):
            raise UserError("the small sizes must all lie below the targets")
        if len(small) < FractalPredictor.min_sizes:
            raise UserError(f"give at least {FractalPredictor.min_sizes} small sizes")
        if isinstance(item, KernelSpec):  # every launch against its buffers, before anything is compiled
            check_sizes(item, list(small) + (list(targets) if args.check else []), None, say=progress)
    except BaseException:
        backend.close()
        raise
    log = MeasurementLog(Path(args.output) if args.output else default_path(backend.info), backend.info)

    def sweep_at(sizes: list[int]):
        """The item at ``sizes``, timed together: here, or as one task on a device of the cluster's kind."""
        if runner is None:
            return run_sweep(backend, item, sizes, policy(args), check=not args.no_check, on_record=log.append,
                             progress=progress, bounds=False, isolate=None)
        from gpuprofiler.measure.runners.base import Task
        from gpuprofiler.measure.storage import provenance
        from gpuprofiler.workloads.builtin import portable
        from gpuprofiler.workloads.sweep import from_records, item_digest, sweep_task

        got: list[dict] = []

        def done(task, outcome) -> None:
            for _, records in sorted(outcome.value.items()):
                log.append_many(records, provenance(outcome.slot.info, outcome.slot.host))
                got.extend(records)
            progress(f"sizes {', '.join(map(str, sizes))} measured on {outcome.slot.name} in {outcome.seconds:.1f} s")

        runner.run([Task("sweep", sweep_task, (portable(path), item_digest(path, item), list(sizes), policy(args),
                                               False, not args.no_check), kind=kind)], done)
        return from_records(got)

    try:
        if profile is None:
            notes.append("no hardware profile of this device: the small sizes are the spec's own, and cache and "
                         "concurrency boundaries between them and the targets cannot be detected "
                         "(`gpuprofiler calibrate --quick` makes one)")
        sweep = sweep_at(small)
        checks = {}
        if args.check:
            for t in targets:
                progress(f"--check: measuring target {t}")
                checks[t] = sweep_at([t])
    except KeyboardInterrupt:
        progress(f"interrupted: measurements so far are kept in {log.path}")
        return 130
    finally:
        backend.close()
    fractal = FractalPredictor(coverage=args.coverage, extrap=not args.no_extrap).fit(item, profile, sweep)
    if fractal.extrap_error_:
        progress(fractal.extrap_error_)
    records = []
    for p in fractal.predict(targets):
        rec = dict(p.details)
        rec["warnings"] = notes + rec["warnings"]
        records.append(check_record(rec, checks[p.size]) if p.size in checks else rec)
    for w in dict.fromkeys(w for r in records for w in r["warnings"]):
        progress(f"warning: {w}")
    if args.plot:
        from gpuprofiler.report.plots import plot_extrapolation

        plot_extrapolation(fractal.extrapolation_, records, args.plot)
        progress(f"plot written to {args.plot}")
    if args.json:
        print(json.dumps(json_ready(records), indent=1))
    else:
        print_extrapolation(records)
    return 0
