"""``gpuprofiler loops``: a kernel's loops counted on the device by source instrumentation."""

from __future__ import annotations

import argparse
import json

from gpuprofiler.cli.common import add_device, progress
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("loops", help="count a kernel's loop entries and iterations on the device (instrumented "
                                     "source; cycles on CUDA)")
    p.add_argument("target", help="kernel spec (.toml) or builtin name")
    p.add_argument("--size", type=int, required=True, help="the spec's size N")
    add_device(p)
    p.add_argument("--no-check", action="store_true", help="do not compare the instrumented kernel's outputs with "
                                                           "the reference")
    p.add_argument("--source", action="store_true", help="print the instrumented source instead of running it")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import load_spec

    if args.size <= 0:
        raise UserError("--size must be positive")
    path = resolve(args.target)
    if path.suffix != ".toml":
        raise UserError(f"{path}: loops profiles one kernel: give a kernel spec (.toml), not an app")
    spec = load_spec(path)
    inst = spec.instantiate(args.size)  # a bad size is a user error before a device is opened
    if args.source:
        from gpuprofiler.workloads.instrument import instrument

        kind = "cuda" if (args.device or "").startswith("cuda") else "opencl"
        src = spec.source_for(kind)
        print(instrument(src.read_text(), spec.kernel, kind, str(src)).source)
        return 0
    from gpuprofiler.device import open_backend
    from gpuprofiler.workloads.bounds import check_instance
    from gpuprofiler.workloads.loops import profile_loops

    check_instance(inst, say=progress)  # the launch against its buffers, before anything is compiled

    backend = open_backend(args.device)
    try:
        progress(f"{spec.name} at {spec.size}={args.size} on {backend.info.id}: instrumenting, running once"
                 + ("" if args.no_check else ", checking"))
        prof = profile_loops(backend, spec, args.size, check=not args.no_check)
    finally:
        backend.close()
    if args.json:
        print(json.dumps(prof.to_dict(), indent=2))
        return 0
    print(f"{prof.kernel} at {spec.size}={prof.size} ({prof.work_items} work-items, {prof.api}"
          f"{', outputs checked' if prof.checked else ''})")
    print(f"{'line':>5} {'loop':<44} {'entries':>14} {'iterations':>16} {'per entry':>10} {'time share':>10}")
    for c in prof.loops:
        share = prof.share(c)
        label = ("  " * c.loop.depth + c.loop.header)[:44]
        print(f"{c.loop.line:>5} {label:<44} {c.entries:>14} {c.iterations:>16} {c.per_entry:>10.4g} "
              f"{'-' if share is None else f'{100 * share:.1f}%':>10}")
    if prof.api != "cuda":
        print("(time shares need a device clock: on CUDA, clock64)")
    return 0
