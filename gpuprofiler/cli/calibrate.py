"""``gpuprofiler calibrate``: run the microbenchmarks and write the device's hardware profile."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuprofiler.cli.common import add_device, progress


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="run the microbenchmarks and write the device's hardware profile")
    add_device(p, "device id (default: the default device)")
    p.add_argument("--quick", action="store_true", help="fewer points and repeats (about a minute on a CPU)")
    p.add_argument("--only", help="comma-separated sections: launch,memory,bandwidth,latency,instructions,transfer")
    p.add_argument("-o", "--output", help="profile file (default results/<device>/profile.json)")
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
    try:
        profile = calibrate(backend, out, quick=args.quick, only=only, progress=progress)
    except KeyboardInterrupt:
        progress(f"interrupted: the sections already finished are in {out}")
        return 130
    finally:
        backend.close()
    png = plot_latency(profile, out.with_name(out.stem + "_latency.png"))
    print(show(profile))
    progress(f"profile written to {out}" + (f"; latency plot {png}" if png else ""))
    return 0
