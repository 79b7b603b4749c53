"""``gpuprofiler calibrate``: run the microbenchmarks and write the device's hardware profile."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuprofiler.cli.common import add_device, progress
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.calibrate.driver import calibrate, parse_only
    from gpuprofiler.device import open_backend
    from gpuprofiler.profile.locate import stored_profile_path
    from gpuprofiler.report.plots import plot_latency
    from gpuprofiler.report.profile_table import show

    only = parse_only(args.only)
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
