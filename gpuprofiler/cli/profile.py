"""``gpuprofiler profile show|compare``: read a hardware profile, or two side by side."""

from __future__ import annotations

import argparse

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
