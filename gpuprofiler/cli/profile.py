"""``gpuprofiler profile show|compare``: read a hardware profile, or two side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="inspect a hardware profile")
    psub = p.add_subparsers(dest="profile_command", required=True)
    q = psub.add_parser("show", help="print a profile as a readable table")
    q.add_argument("file", nargs="?", metavar="FILE")
    q.add_argument("--schema", action="store_true", help="print the profile's schema instead")
    q.set_defaults(func=show)
    q = psub.add_parser("compare", help="key values of two profiles side by side, with agreement")
    q.add_argument("a", metavar="A")
    q.add_argument("b", metavar="B")
    q.add_argument("--tolerance", type=float, default=0.10, help="relative difference that still agrees (0.10)")
    q.set_defaults(func=compare)
    q = psub.add_parser("fleet", help="compare the profiles of a fleet (a folder `calibrate --all-devices` wrote): "
                                      "each kind's median per key figure, and the devices that stand out")
    q.add_argument("folder", metavar="DIR")
    q.add_argument("--threshold", type=float, default=4.0,
                   help="an outlier lies this many robust spreads from its kind's median, and the median outside "
                        "its own interval (default 4)")
    q.add_argument("--csv", metavar="FILE", help="write every (device, figure) row to FILE")
    q.add_argument("--plot", metavar="FILE.png", help="plot each device's deviation per figure")
    q.add_argument("--json", action="store_true", help="print the outliers and the per-kind table as JSON")
    q.set_defaults(func=fleet)


def show(args: argparse.Namespace) -> int:
    from gpuprofiler.profile.file import SCHEMA_DOC, load_profile
    from gpuprofiler.report import profile_table

    if args.schema:
        print(SCHEMA_DOC)
        return 0
    if not args.file:
        raise UserError("profile show needs a FILE (or --schema)")
    print(profile_table.show(load_profile(args.file)))
    return 0


def compare(args: argparse.Namespace) -> int:
    from gpuprofiler.profile.file import load_profile
    from gpuprofiler.report import profile_table

    table, bad = profile_table.compare(load_profile(args.a), load_profile(args.b), args.tolerance)
    print(table)
    print(f"{bad} key value(s) disagree (outside both intervals and more than {args.tolerance:.0%} apart)")
    return 0


def fleet(args: argparse.Namespace) -> int:
    import json

    from gpuprofiler.measure.storage import json_ready
    from gpuprofiler.profile import fleet as fl
    from gpuprofiler.report import fleet as view
    from gpuprofiler.report.validation import write_csv

    if not args.threshold > 0:
        raise UserError("--threshold must be a positive number of spreads")
    devices = fl.read_fleet(args.folder)
    rows = fl.compare(devices, args.threshold)
    small = sorted({d.kind for d in devices} - {r["kind"] for r in rows})
    table = fl.kind_table(rows)
    flagged = fl.outliers(rows)
    if args.csv:
        write_csv(Path(args.csv), rows, list(rows[0]) if rows else ["kind", "device", "figure"])
    if args.plot and rows:
        view.plot(rows, args.plot)
    if args.json:
        print(json.dumps(json_ready({"devices": len(devices), "outliers": {d: [r["figure"] for r in rs]
                                                                          for d, rs in flagged.items()},
                                     "kinds": table, "too_few": small}), indent=1))
    else:
        print(view.text(table, flagged, len(devices)))
        for kind in small:
            print(f"{kind}: fewer than {fl.MIN_DEVICES} devices, not compared")
    return 0
