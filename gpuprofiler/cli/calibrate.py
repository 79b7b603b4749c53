"""``gpuprofiler calibrate``: run the microbenchmarks and write the device's hardware profile."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuprofiler.cli.common import add_cluster, add_device, cluster_kind, end_with_failures, open_runner, progress
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="run the microbenchmarks and write the device's hardware profile")
    add_device(p, "device id (default: the default device)")
    p.add_argument("--quick", action="store_true", help="fewer points and repeats (about a minute on a CPU)")
    p.add_argument("--only", help="comma-separated sections: launch,memory,bandwidth,latency,instructions,transfer")
    p.add_argument("-o", "--output", help="profile file (default results/<device>/profile.json)")
    p.add_argument("--resume", action="store_true",
                   help="complete the profile already at the output path: measure only the sections an interrupted "
                        "calibration left out (of --only's, where given)")
    add_cluster(p)
    p.add_argument("--all-devices", action="store_true",
                   help="with --cluster: calibrate every device of the cluster, each profile written to "
                        "OUT/<device-slug>/<host>/profile.json (OUT: -o, default results); a rerun finishes partial "
                        "profiles and skips complete ones. Compare them with `gpuprofiler profile fleet OUT`")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.calibrate.driver import calibrate, parse_only
    from gpuprofiler.device import open_backend
    from gpuprofiler.profile.locate import stored_profile_path
    from gpuprofiler.report.plots import plot_latency
    from gpuprofiler.report.profile_table import show

    only = parse_only(args.only)
    if args.all_devices:
        return _fleet(args, only)
    runner = open_runner(args)
    if runner is not None:
        return _on_cluster(args, only, runner)
    backend = open_backend(args.device)
    out = Path(args.output) if args.output else stored_profile_path(backend.info)
    resume = None
    try:
        if args.resume:
            resume, only = _resumable(out, backend.info, only, args.only is not None)
    except BaseException:
        backend.close()
        raise
    try:
        profile = calibrate(backend, out, quick=args.quick, only=only, progress=progress, resume=resume)
    except KeyboardInterrupt:
        progress(f"interrupted: the sections already finished are in {out}")
        return 130
    finally:
        backend.close()
    png = plot_latency(profile, out.with_name(out.stem + "_latency.png"))
    print(show(profile))
    progress(f"profile written to {out}" + (f"; latency plot {png}" if png else ""))
    return 0


def _resumable(out: Path, info, only: tuple[str, ...], chosen: bool):
    """``--resume``: the partial profile at ``out`` (of this device) and the sections it lacks, of ``only`` where
    ``--only`` chose them."""
    from gpuprofiler.calibrate.driver import missing_sections, sections_done
    from gpuprofiler.profile.file import load_profile

    if not out.exists():
        raise UserError(f"--resume: no profile at {out} to complete (leave out --resume to calibrate)")
    profile = load_profile(out)
    device = (profile.data.get("device") or {}).get("name")
    if device != info.name:
        raise UserError(f"--resume: {out} is a profile of {device}, not of {info.name}")
    done = set(sections_done(profile.data))
    # --only: those of its sections the profile lacks (planned or not); else what the calibration planned and lacks
    missing = [s for s in only if s not in done] if chosen else missing_sections(profile.data)
    progress(f"resuming {out}: " + (f"measuring {', '.join(missing)}" if missing else "nothing is missing"))
    return profile, tuple(missing)


def _on_cluster(args: argparse.Namespace, only: tuple[str, ...], runner) -> int:
    """``calibrate --cluster``: one device of the cluster (``--device``: its id, HOST/ID or kind) into -o or its
    stored place."""
    from gpuprofiler.calibrate.fleet import calibrate_slot
    from gpuprofiler.device.base import DeviceInfo
    from gpuprofiler.profile.locate import stored_profile_path
    from gpuprofiler.report.profile_table import show

    try:
        kind = cluster_kind(runner, args.device)
        slot = next(s for s in runner.slots() if s.kind == kind and args.device in (None, kind, s.device_id,
                                                                                    s.resource, s.name))
        info = DeviceInfo.from_dict(slot.info)
        out = Path(args.output) if args.output else stored_profile_path(info)
        resume = None
        if args.resume:
            resume, only = _resumable(out, info, only, args.only is not None)
        progress(f"calibrating {slot.name} ({info.name}) into {out}")
        profile = calibrate_slot(runner, slot, out, args.quick, only, resume, progress)
    except KeyboardInterrupt:
        progress("interrupted: the sections already finished are in the profile")
        return 130
    finally:
        runner.close()
    print(show(profile))
    progress(f"profile written to {out}")
    return 0


def _fleet(args: argparse.Namespace, only: tuple[str, ...]) -> int:
    """``calibrate --cluster ... --all-devices``: every device of the cluster, a profile each; a device whose section
    fails keeps the sections before it, the others go on, and the failures are listed (OUT/failed.csv too): exit 4."""
    from gpuprofiler.calibrate.fleet import failures, plan, profile_path, run_calibrations, summary_rows
    from gpuprofiler.measure.storage import results_root

    if args.device:
        raise UserError("--all-devices calibrates every device of the cluster: leave out --device")
    runner = open_runner(args)
    if runner is None:
        raise UserError("--all-devices needs --cluster (or $GPUPROFILER_CLUSTER): the devices of a Dask cluster")
    outdir = Path(args.output) if args.output else results_root()
    try:
        slots = runner.slots()
        runs = [plan(s, profile_path(outdir, s, slots), only, resume=True) for s in slots]
        skipped = sum(1 for r in runs if not r.todo)
        progress(f"{len(runs)} device(s): {len(runs) - skipped} to calibrate, {skipped} already complete; profiles "
                 f"under {outdir}")
        sections = sum(len(r.todo) for r in runs)
        run_calibrations(runner, runs, args.quick, progress)
    except KeyboardInterrupt:
        progress(f"interrupted: each device's finished sections are in its profile under {outdir}; rerun to finish")
        return 130
    finally:
        runner.close()
    rows = summary_rows(runs)
    for r in rows:
        print(f"{r['device']:<40} {r['status']:<9} {r['seconds']:7.1f} s  {r['profile']}")
    bad = [r for r in rows if r["status"] != "complete"]
    print(f"{len(rows) - len(bad)} of {len(rows)} profile(s) complete under {outdir}; compare them with "
          f"`gpuprofiler profile fleet {outdir}`")
    return end_with_failures(failures(runs), outdir / "failed.csv", sections, "section")
