"""``gpuprofiler measure``: time a kernel spec or an app at given sizes, every record stored as it finishes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpuprofiler.cli.common import add_device, add_timing, int_list, overrides, policy, progress
from gpuprofiler.errors import UserError
from gpuprofiler.measure.policy import MEASURE


def add_parser(sub) -> None:
    p = sub.add_parser("measure", help="time a kernel spec (.toml) or an app (.py) at given sizes")
    p.add_argument("target", metavar="SPEC_OR_APP", help="spec/app path, or a builtin name such as vadd or cg")
    p.add_argument("--sizes", type=int_list, help="comma-separated sizes (default: the spec's small sizes)")
    add_device(p)
    p.add_argument("--json", action="store_true", help="print only JSON records on stdout")
    p.add_argument("-o", "--output", help="JSON-lines file to append to (default results/<device>/measurements.jsonl)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a spec parameter")
    add_timing(p, MEASURE)
    p.add_argument("--no-check", action="store_true", help="skip the numpy reference check")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.device import open_backend
    from gpuprofiler.measure.storage import MeasurementLog, default_path, json_ready
    from gpuprofiler.report.text import print_measurements
    from gpuprofiler.workloads.apps import load_app, measure_app
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.kernel import measure_spec
    from gpuprofiler.workloads.spec import load_spec

    path = resolve(args.target)
    is_app = path.suffix == ".py"
    item = load_app(path) if is_app else load_spec(path)
    sizes = args.sizes or item.small
    if not sizes:
        raise UserError(f"{path}: no --sizes given and the spec has no default small sizes")
    sets = overrides(args.set)
    if is_app and sets:
        raise UserError("--set applies to kernel specs, not apps")
    backend = open_backend(args.device)
    log = MeasurementLog(Path(args.output) if args.output else default_path(backend.info), backend.info)
    progress(f"device {backend.info.id}: {backend.info.name}; measurements go to {log.path}")

    def keep(rec: dict) -> None:
        log.append(rec)
        progress(f"{rec['kernel']}/{rec['phase']} size {rec['size']}: median {rec['median_s'] * 1e6:.1f} us "
                 f"({rec['samples']} samples, {rec['stop_reason']}); saved")

    try:
        if is_app:
            records = measure_app(backend, item, sizes, policy(args), check=not args.no_check, on_record=keep,
                                  progress=progress)
        else:
            records = measure_spec(backend, item, sizes, policy(args), check=not args.no_check, on_record=keep,
                                   overrides=sets, progress=progress)
    except KeyboardInterrupt:
        progress(f"interrupted: {log.written} finished measurement(s) kept in {log.path}")
        return 130
    finally:
        backend.close()
    if args.json:
        print(json.dumps(json_ready(records), indent=1))
    else:
        print_measurements(records)
    return 0
