"""``gpuprofiler export``: stored sweep measurements in Extra-P's text (or JSON) input format."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpuprofiler.cli.common import progress
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write stored measurements in Extra-P's input format")
    p.add_argument("--extrap", required=True, metavar="FILE", help="output file (text format; JSON with --json)")
    p.add_argument("--measurements", required=True, metavar="LOG",
                   help="a measurements.jsonl file (e.g. results/<device>/measurements.jsonl)")
    p.add_argument("--kernel", help="only this kernel or app")
    p.add_argument("--json", action="store_true", help="Extra-P's JSON format instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.measure.storage import read_records
    from gpuprofiler.models.fractal.extrap import text_format
    from gpuprofiler.workloads.sweep import from_records

    source = Path(args.measurements)
    if not source.is_file():
        raise UserError(f"measurements file not found: {source}")
    records = [r for r in read_records(source) if not args.kernel or r["kernel"] == args.kernel]
    if not records:
        raise UserError(f"{source}: no measurements" + (f" of {args.kernel}" if args.kernel else ""))
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["kernel"], []).append(r)
    sweeps = [from_records(v) for v in groups.values()]
    common = sorted(set.intersection(*(set(s.sizes) for s in sweeps)))
    if not common:
        raise UserError("the kernels share no sizes; choose one with --kernel")
    sweeps = [s.subset([s.sizes.index(n) for n in common]) for s in sweeps]
    if args.json:
        data = {"parameters": ["n"], "measurements": {
            f"{s.name}/{p}": [{"point": [n], "values": list(map(float, v[i]))} for i, n in enumerate(s.sizes)]
            for s in sweeps for p, v in s.phases.items()}}
        Path(args.extrap).write_text(json.dumps(data, indent=1))
    else:
        Path(args.extrap).write_text(text_format(sweeps))
    progress(f"wrote {len(sweeps)} kernel(s) at {len(common)} sizes to {args.extrap}")
    return 0
