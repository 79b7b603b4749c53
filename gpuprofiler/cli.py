"""The ``gpuprofiler`` command line. Exit codes: 0 ok, 2 user error, 3 device error, 130 interrupted."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from gpuprofiler import __version__
from gpuprofiler.errors import DeviceError, GpuProfilerError, UserError


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _int_list(text: str) -> list[int]:
    try:
        values = [int(float(x)) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    from gpuprofiler.safe_eval import evaluate

    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise UserError(f"--set {item!r}: expected NAME=VALUE")
        out[name] = evaluate(value, out, f"--set {name}")
    return out


def cmd_devices(args) -> int:
    from gpuprofiler.backends import default_device_id, list_devices

    devices = list_devices()
    default = default_device_id(devices) if devices else None
    if args.json:
        print(json.dumps([{**d.to_dict(), "default": d.id == default} for d in devices], indent=2))
        return 0
    if not devices:
        print("no devices found", file=sys.stderr)
        return 3
    for d in devices:
        mark = "*" if d.id == default else " "
        clock = f"{d.clock_mhz:.0f} MHz" if d.clock_mhz else "? MHz"
        print(f"{mark} {d.id:<12} {d.type:<4} {d.name}  [{d.platform}; {d.compute_units} CUs, {clock}, "
              f"{d.global_mem_bytes / 2**30:.1f} GiB, local {d.local_mem_bytes // 1024} KiB, "
              f"max wg {d.max_work_group_size}, warp {d.warp_size or '-'}; {d.driver}]")
    print("(* = default device)")
    return 0


def _policy(args):
    from gpuprofiler.timing import SWEEP_WARMUP_S, TimingPolicy

    return TimingPolicy(warmup=args.warmup, warmup_s=SWEEP_WARMUP_S, min_samples=args.min_samples, budget_s=args.budget,
                        rel_ci=args.rel_ci)


def _print_table(records: list[dict]) -> None:
    print(f"{'kernel':<16} {'phase':<18} {'size':>10} {'median':>12} {'95% interval of median':>26} {'n':>5} "
          f"{'checked':>7} {'share/GB/s':>10}")
    for r in records:
        extra = f"{r['share'] * 100:.1f}%" if "share" in r else (f"{r['gbps']:.2f}" if r.get("gbps") else "")
        print(f"{r['kernel']:<16} {r['phase']:<18} {r['size']:>10} {r['median_s'] * 1e6:>10.1f}us "
              f"[{r['ci_low_s'] * 1e6:>10.1f}, {r['ci_high_s'] * 1e6:>10.1f}]us {r['samples']:>5} "
              f"{str(r['checked']).lower():>7} {extra:>10}")


def cmd_measure(args) -> int:
    from gpuprofiler.apps import load_app, measure_app
    from gpuprofiler.backends import open_backend
    from gpuprofiler.builtin import resolve
    from gpuprofiler.measure import measure_spec
    from gpuprofiler.spec import load_spec
    from gpuprofiler.storage import MeasurementLog, default_path

    path = resolve(args.target)
    is_app = path.suffix == ".py"
    item = load_app(path) if is_app else load_spec(path)
    sizes = args.sizes or item.small
    if not sizes:
        raise UserError(f"{path}: no --sizes given and the spec has no default small sizes")
    overrides = _overrides(args.set)
    backend = open_backend(args.device)
    log = MeasurementLog(Path(args.output) if args.output else default_path(backend.info), backend.info)
    progress(f"device {backend.info.id}: {backend.info.name}; measurements go to {log.path}")
    records: list[dict] = []

    def keep(rec: dict) -> None:
        log.append(rec)
        progress(f"{rec['kernel']}/{rec['phase']} size {rec['size']}: median {rec['median_s'] * 1e6:.1f} us "
                 f"({rec['samples']} samples, {rec['stop_reason']}); saved")

    try:
        if is_app:
            if overrides:
                raise UserError("--set applies to kernel specs, not apps")
            records = measure_app(backend, item, sizes, _policy(args), check=not args.no_check,
                                  on_record=keep, progress=progress)
        else:
            records = measure_spec(backend, item, sizes, _policy(args), check=not args.no_check,
                                   on_record=keep, overrides=overrides, progress=progress)
    except KeyboardInterrupt:
        progress(f"interrupted: {log.written} finished measurement(s) kept in {log.path}")
        return 130
    finally:
        backend.close()
    if args.json:
        from gpuprofiler.storage import json_ready

        print(json.dumps(json_ready(records), indent=1))
    else:
        _print_table(records)
    return 0


def cmd_calibrate(args) -> int:
    from gpuprofiler.backends import open_backend
    from gpuprofiler.calibrate import calibrate, parse_only
    from gpuprofiler.plots import plot_latency
    from gpuprofiler.profile_view import show
    from gpuprofiler.storage import default_path

    only = parse_only(args.only)
    backend = open_backend(args.device)
    out = Path(args.output) if args.output else default_path(backend.info, "profile.json")
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


def cmd_profile_show(args) -> int:
    from gpuprofiler.profile import SCHEMA_DOC, load_profile
    from gpuprofiler.profile_view import show

    if args.schema:
        print(SCHEMA_DOC)
        return 0
    if not args.file:
        raise UserError("profile show needs a FILE (or --schema)")
    print(show(load_profile(args.file)))
    return 0


def cmd_profile_compare(args) -> int:
    from gpuprofiler.profile import load_profile
    from gpuprofiler.profile_view import compare

    table, bad = compare(load_profile(args.a), load_profile(args.b), args.tolerance)
    print(table)
    print(f"{bad} key value(s) disagree (outside both intervals and more than {args.tolerance:.0%} apart)")
    return 0


def cmd_extrapolate(args) -> int:
    from gpuprofiler.backends import open_backend
    from gpuprofiler.builtin import resolve
    from gpuprofiler.extrapolate import analyse, hardware_sizes, size_functions
    from gpuprofiler.profile import load_profile
    from gpuprofiler.storage import MeasurementLog, default_path, json_ready
    from gpuprofiler.sweep import load_target, run_sweep

    path = resolve(args.target)
    item = load_target(path)
    profile = load_profile(args.profile) if args.profile else None
    targets = args.targets or item.target
    if not targets:
        raise UserError(f"{path}: no --target given and no default target sizes")
    notes: list[str] = []
    ws, _ = size_functions(item, targets[0])
    if args.small:
        small = args.small
    elif profile is not None and ws is not None:
        small, notes = hardware_sizes(max(targets), ws, profile)
        progress(f"hardware-aware small sizes from {args.profile}: {small}")
    else:
        small = item.small
    if not small or max(small) >= min(targets):
        raise UserError("the small sizes must all lie below the targets")
    backend = open_backend(args.device)
    log = MeasurementLog(Path(args.output) if args.output else default_path(backend.info), backend.info)
    policy = _policy(args)
    try:
        sweep = run_sweep(backend, item, small, policy, check=not args.no_check, on_record=log.append,
                          progress=progress)
        checks = {}
        if args.check:
            for t in targets:
                progress(f"--check: measuring target {t}")
                checks[t] = run_sweep(backend, item, [t], policy, check=not args.no_check, on_record=log.append,
                                      progress=progress)
    except KeyboardInterrupt:
        progress(f"interrupted: measurements so far are kept in {log.path}")
        return 130
    finally:
        backend.close()
    ex, records = analyse(item, sweep, targets, profile, args.coverage, checks, notes,
                          use_extrap=not args.no_extrap, say=progress)
    for w in ex.warnings:
        progress(f"warning: {w}")
    if args.plot:
        from gpuprofiler.plots import plot_extrapolation

        plot_extrapolation(ex, records, args.plot)
        progress(f"plot written to {args.plot}")
    if args.json:
        print(json.dumps(json_ready(records), indent=1))
    else:
        _print_extrapolation(records)
    return 0


def _print_extrapolation(records: list[dict]) -> None:
    for r in records:
        lo, hi = r["interval_s"]
        line = (f"size {r['size']}: predicted {r['predicted_s'] * 1e3:.4g} ms [{lo * 1e3:.4g}, {hi * 1e3:.4g}] "
                f"({r['model']}); pure fractal {r['fractal_s'] * 1e3:.4g} ms")
        if "measured_s" in r:
            line += f"; measured {r['measured_s'] * 1e3:.4g} ms, error {r['error'] * 100:+.1f}%"
        print(line)
        for ph in r["phases"]:
            print(f"  {ph['name']:<18} m={ph['m']:.3f} d={ph['d']:.3f} R2={ph['r2']:.4f} "
                  f"-> {ph['predicted_s'] * 1e3:.4g} ms ({ph['model']})")
        base = ", ".join(f"{k} {v * 1e3:.4g} ms" for k, v in r["baselines_s"].items() if v is not None)
        print(f"  baselines on the whole run: {base}")
    for w in (records[0]["warnings"] if records else []):
        print(f"warning: {w}")


def cmd_export(args) -> int:
    from gpuprofiler.extrap_io import text_format
    from gpuprofiler.storage import read_records
    from gpuprofiler.sweep import from_records

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuprofiler", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"gpuprofiler {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("devices", help="list the CUDA and OpenCL devices")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("measure", help="time a kernel spec (.toml) or an app (.py) at given sizes")
    p.add_argument("target", metavar="SPEC_OR_APP", help="spec/app path, or a builtin name such as vadd or cg")
    p.add_argument("--sizes", type=_int_list, help="comma-separated sizes (default: the spec's small sizes)")
    p.add_argument("--device", help="device id, e.g. opencl:0:0 or cuda:0 (default: first CUDA GPU, "
                                    "else first OpenCL GPU, else PoCL)")
    p.add_argument("--json", action="store_true", help="print only JSON records on stdout")
    p.add_argument("-o", "--output", help="JSON-lines file to append to (default results/<device>/measurements.jsonl)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a spec parameter")
    p.add_argument("--budget", type=float, default=2.0, help="seconds of sampling per measurement (default 2)")
    p.add_argument("--min-samples", type=int, default=5, help="at least this many samples (default 5)")
    p.add_argument("--rel-ci", type=float, default=0.02, help="stop when the median's 95%% interval is within "
                                                             "this fraction (default 0.02)")
    p.add_argument("--warmup", type=int, default=2, help="untimed warm-up runs (default 2)")
    p.add_argument("--no-check", action="store_true", help="skip the numpy reference check")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("extrapolate", help="predict large sizes from a small-size sweep (fractal model)")
    p.add_argument("target", metavar="SPEC_OR_APP")
    p.add_argument("--small", type=_int_list, help="small sizes (default: hardware-aware with --profile, else the "
                                                   "spec's)")
    p.add_argument("--target", dest="targets", type=_int_list, help="target sizes (default: the spec's)")
    p.add_argument("--profile", help="hardware profile (launch overhead, caches, concurrency)")
    p.add_argument("--check", action="store_true", help="also run the targets and report the error")
    p.add_argument("--json", action="store_true", help="print only JSON on stdout")
    p.add_argument("--plot", help="write a PNG of the sweep, fits and predictions")
    p.add_argument("--coverage", type=float, default=0.7, help="share of the run the major phases cover (0.7)")
    p.add_argument("--device")
    p.add_argument("-o", "--output", help="measurements log (default results/<device>/measurements.jsonl)")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of sampling per measurement (default 1)")
    p.add_argument("--min-samples", type=int, default=5)
    p.add_argument("--rel-ci", type=float, default=0.02)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--no-check", action="store_true", help="skip the numpy reference checks")
    p.add_argument("--no-extrap", action="store_true", help="skip the Extra-P baseline even where installed")
    p.set_defaults(func=cmd_extrapolate)

    p = sub.add_parser("export", help="write stored measurements in Extra-P's input format")
    p.add_argument("--extrap", required=True, metavar="FILE", help="output file (text format; JSON with --json)")
    p.add_argument("--measurements", required=True, metavar="LOG",
                   help="a measurements.jsonl file (e.g. results/<device>/measurements.jsonl)")
    p.add_argument("--kernel", help="only this kernel or app")
    p.add_argument("--json", action="store_true", help="Extra-P's JSON format instead of text")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("calibrate", help="run the microbenchmarks and write the device's hardware profile")
    p.add_argument("--device", help="device id (default: the default device)")
    p.add_argument("--quick", action="store_true", help="fewer points and repeats (about a minute on a CPU)")
    p.add_argument("--only", help="comma-separated sections: launch,memory,bandwidth,latency,instructions,transfer")
    p.add_argument("-o", "--output", help="profile file (default results/<device>/profile.json)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("profile", help="inspect a hardware profile")
    psub = p.add_subparsers(dest="profile_command", required=True)
    q = psub.add_parser("show", help="print a profile as a readable table")
    q.add_argument("file", nargs="?", metavar="FILE")
    q.add_argument("--schema", action="store_true", help="print the profile's schema instead")
    q.set_defaults(func=cmd_profile_show)
    q = psub.add_parser("compare", help="key values of two profiles side by side, with agreement")
    q.add_argument("a", metavar="A")
    q.add_argument("b", metavar="B")
    q.add_argument("--tolerance", type=float, default=0.10, help="relative difference that still agrees (0.10)")
    q.set_defaults(func=cmd_profile_compare)

    from gpuprofiler.maxplus import cli_cmd as _maxplus_cli
    _maxplus_cli.add_parser(sub)
    from gpuprofiler.pipeline import cli_cmd as _pipeline_cli
    _pipeline_cli.add_parser(sub)
    from gpuprofiler import validate_cli as _validate_cli
    _validate_cli.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "min_samples", 5) < 5:
        parser.error("--min-samples must be at least 5")
    try:
        return args.func(args)
    except GpuProfilerError as exc:
        kind = "device error" if isinstance(exc, DeviceError) else "error"
        print(f"gpuprofiler: {kind}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuprofiler: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("gpuprofiler: device error: out of host memory", file=sys.stderr)
        return 3
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
