"""``gpuprofiler validate``: every registered predictor on a suite, its targets measured, a report written; an item
that fails is listed (report.md, failed.csv, the terminal) and the run goes on, ending in exit 4."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from gpuprofiler.cli.common import (
    add_cluster,
    add_device,
    cluster_kind,
    end_with_failures,
    name_list,
    open_runner,
    output_dir,
    progress,
    warn,
)
from gpuprofiler.errors import DeviceError, UserError


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="run every applicable model on a suite, measure the targets, write a report")
    p.add_argument("--suite", default="builtin",
                   help="'builtin' (default), 'blind' (kernels never tuned on), 'foreign' (development kernels in "
                        "other people's idioms) or a folder of kernel specs and apps")
    p.add_argument("--items", type=name_list, help="only these items of the suite (comma-separated names)")
    add_device(p, "device id (default: the default device)")
    p.add_argument("--profile", help="hardware profile (default: OUTDIR/profile.json from an earlier run, else the "
                                     "device's stored profile, else a calibration run first)")
    p.add_argument("--models", type=name_list, help="comma-separated predictors (default: every registered one: "
                                                    "fractal, maxplus, pipeline and any plugin's)")
    p.add_argument("--quick", action="store_true", help="shorter sampling (and a quick calibration if one is needed)")
    p.add_argument("--fresh", action="store_true", help="measure everything again instead of reusing OUTDIR's runs")
    p.add_argument("--spec-sizes", action="store_true",
                   help="measure each item's own small sizes (its `small` list) instead of the hardware-aware sizes "
                        "`extrapolate` recommends for its targets from the profile")
    p.add_argument("--replay", metavar="LOG", help="no device: predict the stored measurements of LOG (a "
                                                   "measurements.jsonl) with every model; --profile defaults to the "
                                                   "stored profile of the device that measured them")
    p.add_argument("--fit-correction", metavar="FILE",
                   help="also fit each static model's learned correction on every case of this run and write it "
                        "to FILE (apply it with `pipeline` / `maxplus --correction FILE`); the report always shows "
                        "the leave-one-kernel-out corrected errors beside the static ones")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="folder for the report and measurements")
    add_cluster(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.measure.runners import check_address, cluster_address

    address = cluster_address(args.cluster)
    if address is not None:
        check_address(address)  # a bad address fails before the suite's modules load
    from gpuprofiler.calibrate.driver import calibrate
    from gpuprofiler.device import open_backend
    from gpuprofiler.validate import suite

    models = suite.check_models(args.models)
    outdir = Path(args.output)
    paths = suite.suite_paths(args.suite, args.items)  # a bad suite fails before anything is opened
    if args.fit_correction:
        _enough_kernels(paths)
    output_dir(outdir)  # a folder that takes the results, before anything is measured
    if args.replay:
        return _replay(args, models, outdir)
    runner = open_runner(args)
    if runner is not None:  # the suite on the cluster's devices of one kind, the profile calibrated on one of them
        from gpuprofiler.calibrate.fleet import calibrate_slot
        from gpuprofiler.device.base import DeviceInfo

        try:
            kind = cluster_kind(runner, args.device)
        except BaseException:
            runner.close()
            raise
        slots = runner.kinds()[kind]
        hosts = sorted({s.name for s in slots})
        where = [f"measured on {len(hosts)} device(s) of a Dask cluster ({', '.join(hosts[:6])}"
                 f"{', ...' if len(hosts) > 6 else ''}): each record names the device and host that measured it"]
        return _measure(args, models, outdir, runner, DeviceInfo.from_dict(slots[0].info), f"kind:{kind}",
                        lambda out, **kw: calibrate_slot(runner, slots[0], out, say=progress, **kw), runner.close,
                        where, kind)
    backend = open_backend(args.device)
    return _measure(args, models, outdir, backend, backend.info, backend.info.id,
                    lambda out, **kw: calibrate(backend, out, progress=progress, **kw), backend.close)


def _measure(args: argparse.Namespace, models: list[str], outdir: Path, where_to, info, device_id: str, calibrate,
             close, notes: list[str] | None = None, kind: str | None = None) -> int:
    """The profile chosen (or calibrated with ``calibrate``), the suite measured through ``where_to`` (a backend,
    or a cluster's runner on devices of ``kind``) and predicted, the report written; ``close`` gives the device or
    cluster back once the measuring is over."""
    from gpuprofiler.calibrate import regather
    from gpuprofiler.profile.hardware import view
    from gpuprofiler.validate import suite

    def calibrate_here(out, **kw):
        """A calibration for this run, its gathered reads and streams to be drawn again once the measuring is over."""
        made = calibrate(out, **kw)
        made.data[regather.PLANNED] = True
        made.save(out)
        return made

    try:
        profile, profile_name = choose(args, outdir, info, calibrate_here)
        own = regather.planned(profile) and Path(profile_name) == outdir / "profile.json"
        again = functools.partial(regather.regather, calibrate, path=outdir / "profile.json", quick=args.quick,
                                  say=progress) if own else None
        described = view(profile).name
        mismatch = (f"the profile describes {described}; the measurements are of {info.name}"
                    if described != info.name else None)
        if mismatch:
            progress(f"note: {mismatch}")
        try:
            results = suite.run(where_to, args.suite, outdir, profile, models, args.quick, args.fresh, progress,
                                args.items, spec_sizes=args.spec_sizes, isolate=None, kind=kind,
                                after_measuring=again)
        except KeyboardInterrupt:
            progress(f"interrupted: finished measurements are kept in {outdir / 'measurements.jsonl'}; rerun to resume")
            return 130
        except DeviceError:
            progress(f"finished measurements are kept in {outdir / 'measurements.jsonl'}; a rerun resumes")
            raise
    finally:
        close()
    reused = sum(res.reused for res in results)
    notes = list(notes or []) + [
        f"{reused} of {sum(res.measurements for res in results)} measurement(s) reused from an earlier run "
        "(see the command in each record of measurements.jsonl)" if reused else
        "every measurement taken by this run"] + ([mismatch] if mismatch else [])
    drawn = regather.describe(profile)
    notes += [drawn] if drawn else []
    return _write(args, models, outdir, results, info.name, device_id, profile_name, notes)


def _replay(args: argparse.Namespace, models: list[str], outdir: Path) -> int:
    """``validate --replay LOG``: the log's measurements predicted without a device."""
    from gpuprofiler.device.base import DeviceInfo
    from gpuprofiler.profile.hardware import view
    from gpuprofiler.profile.locate import choose_profile
    from gpuprofiler.validate.replay import logged_device, read_log, replay

    records = read_log(args.replay)
    device = logged_device(records)
    info = None
    if not args.profile and device.get("slug"):
        info = DeviceInfo.from_dict(device)
    choice = choose_profile(args.profile, info)
    if choice.profile is None:
        raise UserError(choice.message)
    if not choice.given:
        progress(choice.message)
    outdir.mkdir(parents=True, exist_ok=True)
    results = replay(args.replay, choice.profile, models, args.suite, args.items, progress)
    notes = [f"replay of {args.replay}: measured {min(r.get('date', '?') for r in records)} .. "
             f"{max(r.get('date', '?') for r in records)} by "
             + " and ".join(f"`{c}`" for c in dict.fromkeys(r.get("command", "?") for r in records))
             + "; no device was used by this run"]
    described = view(choice.profile).name
    if described != device.get("name"):
        notes.append(f"the profile describes {described}; the measurements are of {device.get('name')}")
    return _write(args, models, outdir, results, device.get("name", "?"), device.get("id", "?"),
                  str(choice.path), notes)


def _enough_kernels(paths: list[Path]) -> None:
    """--fit-correction on kernel specs alone, fewer than a correction needs: refused before anything is measured
    or predicted (specs that share a kernel count once, and an app's kernels are known once it is traced: those
    are refused after predicting, by :func:`_fit_corrections`)."""
    from gpuprofiler.models.correction import MIN_KERNELS

    if all(p.suffix == ".toml" for p in paths) and len(paths) < MIN_KERNELS:
        raise UserError(f"--fit-correction: {len(paths)} kernel spec(s) chosen; a correction needs at least "
                        f"{MIN_KERNELS} kernels (each is left out in turn and predicted by the others)")


def _fit_corrections(rows: list[dict]) -> list:
    """--fit-correction: one correction per model that reports the features, fitted on every case."""
    from gpuprofiler.models.correction import fit_all
    from gpuprofiler.validate import suite

    fitted = []
    for name in dict.fromkeys(r["model"] for r in rows):
        samples = suite.correction_samples(rows, name)
        if samples:
            fitted.append(fit_all(samples, name))
    if not fitted:
        raise UserError("--fit-correction: no model of this run reports the correction's features "
                        "(the static models pipeline and maxplus do)")
    return fitted


def _write(args: argparse.Namespace, models: list[str], outdir: Path, results: list, device_name: str,
           device_id: str, profile_name: str, notes: list[str]) -> int:
    """predictions.csv, summary.csv and report.md of a run or a replay, and the summary on stdout; the failed items
    listed (failed.csv too) and the exit status (4 where some failed)."""
    from gpuprofiler.measure.storage import command_line
    from gpuprofiler.models import registry
    from gpuprofiler.report.validation import (
        BASELINE_COLUMNS,
        BASELINE_SUMMARY_COLUMNS,
        PREDICTION_COLUMNS,
        SUMMARY_COLUMNS,
        write_csv,
        write_report,
    )
    from gpuprofiler.validate import suite

    rows = [r for res in results for r in res.rows]
    notes = suite.add_corrections(rows) + notes
    fitted = _fit_corrections(rows) if args.fit_correction else []  # refused before any file is written
    summary = suite.summarize(rows)
    write_csv(outdir / "predictions.csv", rows, PREDICTION_COLUMNS)
    write_csv(outdir / "summary.csv", summary, SUMMARY_COLUMNS)
    baselines = [b for res in results for b in res.baselines]
    baseline_summary = suite.summarize_baselines(baselines)
    if baselines:
        write_csv(outdir / "baselines.csv", baselines, BASELINE_COLUMNS)
        write_csv(outdir / "baselines_summary.csv", baseline_summary, BASELINE_SUMMARY_COLUMNS)
    notes = suite.model_notes(results, models) + notes
    meta = {"device_name": device_name, "device_id": device_id, "suite": args.suite, "quick": args.quick,
            "profile": profile_name, "command": command_line(), "notes": notes,
            "models": {name: registry.describe(name) for name in models}, "baselines": baseline_summary}
    if fitted:
        from gpuprofiler.models.correction import save

        path = save(fitted, args.fit_correction, {"device": device_name, "device_id": device_id,
                                                  "profile": profile_name, "command": command_line()})
        meta["notes"].append(f"learned correction fitted on every case written to {path} (models: "
                             f"{', '.join(c.model for c in fitted)})")
    failures = [res.failure for res in results if res.failure is not None]
    report = write_report(outdir, [res for res in results if res.failure is None], rows, summary, meta, failures)
    for s in summary:
        loko = (f"  corrected (leave-one-kernel-out) MAPE {100 * s['loko_corrected_mape']:5.1f}%"
                if s["loko_corrected_mape"] == s["loko_corrected_mape"] else "")
        inside = (f"  inside {100 * s['inside_interval']:3.0f}% (median width {s['median_interval_width']:.2f}x)"
                  if s["inside_interval"] == s["inside_interval"] else "")
        if s["inside_interval"] == s["inside_interval"] and s["inside_calibrated"] != s["inside_interval"]:
            inside += (f" [calibrated alone {100 * s['inside_calibrated']:.0f}%, "
                       f"{s['median_calibrated_width']:.2f}x]")
        print(f"{s['model']:<9} {s['cases']:>3} cases  MAPE {100 * s['mape']:6.1f}%  median |error| "
              f"{100 * s['median_abs_error']:5.1f}%  max {100 * s['max_abs_error']:7.1f}%{inside}{loko}")
    for b in baseline_summary:
        print(f"  law {b['law']:<8} {b['cases']:>3} cases  MAPE {100 * b['mape']:6.1f}%  median |error| "
              f"{100 * b['median_abs_error']:5.1f}%  max {100 * b['max_abs_error']:7.1f}%  (same sweeps and targets)")
    progress(f"report: {report}")
    return end_with_failures(failures, outdir / "failed.csv", len(results))


def choose(args: argparse.Namespace, outdir: Path, info, calibrate) -> tuple:
    """The run's profile and its name: ``--profile``; else OUTDIR's from an earlier run (not with ``--fresh``);
    else the stored profile of the device ``info`` describes, copied into OUTDIR so the run's folder holds what it
    used, unless some of its figures were measured with methods since replaced; else a calibration into OUTDIR
    (``calibrate(path, quick=, only=, resume=)``)."""
    import shutil

    from gpuprofiler.calibrate.driver import missing_sections
    from gpuprofiler.profile.file import load_profile, superseded
    from gpuprofiler.profile.locate import choose_profile, how_to_make

    kept = outdir / "profile.json"
    if args.profile:
        given = load_profile(args.profile)
        missing = missing_sections(given.data)
        if missing:
            warn(f"the profile {args.profile} is incomplete (its calibration did not finish: {', '.join(missing)} "
                 f"missing); the models that need those figures may not run. Complete it with `gpuprofiler "
                 f"calibrate --resume -o {args.profile}`, or leave out --profile to have validate calibrate")
        return given, args.profile
    if kept.exists() and not args.fresh:
        profile = load_profile(kept)
        missing = missing_sections(profile.data)
        if not missing:
            progress(f"reusing the profile {kept}")
            return profile, str(kept)
        warn(f"the profile {kept} is incomplete (an interrupted calibration: {', '.join(missing)} missing): "
             f"calibrating the missing section(s) into it")
        return calibrate(kept, quick=args.quick, only=missing, resume=profile), str(kept)
    outdir.mkdir(parents=True, exist_ok=True)
    stored = choose_profile(None, info)
    stale = superseded(stored.profile.data) if stored.profile is not None else []
    if stale:
        progress(f"the stored profile {stored.path} (calibrated {stored.profile.data.get('created', '?')}) measured "
                 f"{', '.join(stale)} with methods since replaced: not validating against it; calibrating "
                 f"{info.id} ({'quick' if args.quick else 'full'}) into {kept} (`gpuprofiler calibrate` refreshes "
                 f"the stored one)")
        return calibrate(kept, quick=args.quick), str(kept)
    if stored.profile is not None:
        progress(f"{stored.message}; copied to {kept}")
        shutil.copyfile(stored.path, kept)
        profile = load_profile(kept)
        missing = missing_sections(profile.data)
        if missing:
            warn(f"the stored profile {stored.path} is incomplete ({', '.join(missing)} missing): calibrating the "
                 f"missing section(s) into the copy {kept}")
            profile = calibrate(kept, quick=args.quick, only=missing, resume=profile)
        return profile, f"{stored.path} (copied to {kept})"
    progress(f"no --profile and none stored ({how_to_make(info)}): calibrating {info.id} first "
             f"({'quick' if args.quick else 'full'}) into {kept}")
    return calibrate(kept, quick=args.quick), str(kept)
