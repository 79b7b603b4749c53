"""``gpuprofiler pipeline``: the static PTX pipeline model on a .cu/.ptx launch or on a kernel spec at a size."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

from gpuprofiler.cli.common import add_device, add_profile, find_profile, overrides, parts, warn
from gpuprofiler.errors import UserError
from gpuprofiler.workloads.safe_eval import evaluate


def _dims(text: str) -> tuple[int, int, int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}") from None
    if not 1 <= len(vals) <= 3 or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}")
    if any(v >= 2**31 for v in vals):  # CUDA's own limit on a grid's or block's extent
        raise argparse.ArgumentTypeError(f"{text!r}: each extent must be below 2^31")
    return tuple(vals + [1] * (3 - len(vals)))  # type: ignore[return-value]


def add_parser(sub: Any) -> None:
    """Register the ``pipeline`` subcommand on the CLI's subparsers."""
    p = sub.add_parser("pipeline", help="predict a kernel's time with the static PTX pipeline model (Zhang et al.)",
                       description="Static PTX model: CFG, loop trip counts and the path most threads take, task "
                                   "lists with latencies from the hardware profile (or defaults), a one-SM "
                                   "pipeline simulation, memory divergence and launch overhead.")
    p.add_argument("target", metavar="KERNEL", help="a .cu or .ptx file, or a kernel spec (.toml / builtin name) "
                                                    "with --size")
    p.add_argument("--kernel", help="kernel name (default: the spec's, or the only kernel in the file)")
    p.add_argument("--grid", type=_dims, help="blocks X[,Y,Z] (file form)")
    p.add_argument("--block", type=_dims, help="threads per block X[,Y,Z] (file form)")
    p.add_argument("--args", action="append", default=[], metavar="NAME=VALUE,...",
                   help="scalar kernel arguments by name (.cu names, PTX parameter names or indices)")
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE", help="-D for nvcc (file form)")
    p.add_argument("--size", type=int, help="the spec's size (spec form)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a spec parameter")
    add_profile(p, "hardware profile (gpuprofiler calibrate)")
    add_device(p, "whose stored profile to use without --profile (default: the default device)")
    p.add_argument("--arch", help="compute capability, e.g. sm_90 (default: the profile's, else the PTX target)")
    p.add_argument("--trip", action="append", default=[], metavar="N|LABEL=N",
                   help="trip count for loops not known statically (LABEL or line = N; N alone: every such loop)")
    p.add_argument("--registers", type=int, help="registers per thread (default: ptxas -v, else an estimate)")
    p.add_argument("--working-set", type=float, help="bytes the kernel touches (picks cache latency/bandwidth "
                                                     "from the profile's curves; spec form: its array bytes)")
    p.add_argument("--budget", type=int, default=None, help="most warp-instructions to simulate before "
                                                            "extrapolating (default 250000)")
    p.add_argument("--correction", metavar="FILE", help="also give the prediction times the learned correction in "
                                                      "FILE (written by `validate --fit-correction`)")
    p.add_argument("--json", action="store_true", help="print only JSON")
    p.add_argument("--explain", action="store_true", help="also show hardware sources, path, loops, accesses, "
                                                          "latencies")
    p.add_argument("--trace", action="store_true", help="also show warp 0's task list and its issue / execute / "
                                                        "write-back times")
    p.set_defaults(func=run)


def _parse_trips(items: list[str]) -> tuple[dict[str, int], int]:
    trips: dict[str, int] = {}
    default = 1
    for part in parts(items):
        name, sep, value = part.rpartition("=")
        try:
            n = int(value)
        except ValueError:
            raise UserError(f"--trip {part!r}: expected N or LABEL=N") from None
        if n < 0:
            raise UserError(f"--trip {part!r}: a trip count cannot be negative")
        if n > 2**31:
            raise UserError(f"--trip {part!r}: a trip count above 2^31 is not a loop the model can follow")
        if sep:
            trips[name] = n
        else:
            default = n          # for every loop whose trip count is not known statically
    return trips, default


def _parse_values(items: list[str], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts(items):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{what} {part[:80]!r}: expected NAME=VALUE")
        if what == "--define" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name.strip()):
            # NAME reaches the compiler as -DNAME=VALUE: a C identifier, never an option
            raise UserError(f"--define {part[:80]!r}: NAME must be a C identifier (letters, digits and _)")
        out[name.strip()] = evaluate(value, {}, f"{what} {name.strip()}")
    return out


def _file_args(module: Any, entry: Any, values: dict[str, Any], cu_names: list[tuple[str, bool]] | None) -> dict[int, Any]:
    names: dict[str, int] = {}
    for i, p in enumerate(entry.params):
        names[p.name] = i
        names[str(i)] = i
    if cu_names is not None and len(cu_names) == len(entry.params):
        for i, (n, _) in enumerate(cu_names):
            names[n] = i
    out = {}
    for name, v in values.items():
        if name not in names:
            valid = ", ".join(n for n in names if not n.isdigit())
            raise UserError(f"--args: kernel {entry.name} has no parameter {name!r} (parameters: {valid}, or indices "
                            f"0..{len(entry.params) - 1})")
        out[names[name]] = v
    return out


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.measure.storage import json_ready
    from gpuprofiler.models.pipeline.occupancy import normalise_arch
    from gpuprofiler.models.pipeline.predict import DEFAULT_BUDGET, Options, predict
    from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
    from gpuprofiler.models.pipeline.ptx_source import MAX_SOURCE_BYTES, cu_parameters, cu_source_for_ptx, load_ptx
    from gpuprofiler.models.pipeline.specs import spec_launch
    from gpuprofiler.models.pipeline.values import Launch
    from gpuprofiler.profile.hardware import view
    from gpuprofiler.report.text import render_pipeline
    from gpuprofiler.textfile import read_text
    from gpuprofiler.workloads.builtin import resolve

    choice = find_profile(args, required=True)
    profile = choice.profile
    trips, default_trip = _parse_trips(args.trip)
    arch = normalise_arch(args.arch) if args.arch else None
    compile_arch = normalise_arch(arch or view(profile).arch or "sm_90")
    target = Path(args.target)
    working_set = args.working_set
    if working_set is not None and not (math.isfinite(working_set) and working_set > 0):
        raise UserError(f"--working-set {working_set}: expected a positive number of bytes")
    if args.budget is not None and args.budget <= 0:
        raise UserError(f"--budget {args.budget}: expected a positive number of warp-instructions")
    if target.suffix in (".cu", ".ptx"):
        if args.size is not None or args.set:
            raise UserError("--size and --set apply to kernel specs; a .cu/.ptx takes --grid, --block and --args")
        if args.grid is None or args.block is None:
            raise UserError(f"{target}: give the launch with --grid X[,Y,Z] and --block X[,Y,Z]")
        defines = _parse_values(args.define, "--define")
        src = load_ptx(target, compile_arch, defines)
        module = parse_ptx(src.text, src.origin if target.suffix == ".ptx" else f"{target} (PTX)")
        entry = module.entry(args.kernel)
        cu = target if target.suffix == ".cu" else cu_source_for_ptx(target, src.text)
        cu_names = cu_parameters(read_text(cu, "CUDA source", MAX_SOURCE_BYTES), entry.name) if cu is not None else None
        launch = Launch(args.grid, args.block, _file_args(module, entry, _parse_values(args.args, "--args"), cu_names))
    else:
        path = resolve(args.target)
        if path.suffix != ".toml":
            raise UserError(f"{path}: the pipeline model works on one kernel: give a kernel spec (.toml) or a .cu/.ptx")
        if args.size is None:
            raise UserError(f"{path}: give the size with --size N")
        if args.grid or args.block or args.args or args.define:
            raise UserError("a kernel spec gives the launch itself: --grid, --block, --args and --define apply to "
                            ".cu/.ptx files")
        sl = spec_launch(path, args.size, compile_arch, overrides(args.set), args.kernel)
        module, entry, launch, src = sl.module, sl.entry, sl.launch, sl.source
        if working_set is None:
            working_set = sl.working_set
    result = predict(module, entry.name, launch, profile,
                     Options(arch=arch or view(profile).arch or module.arch, trips=trips, default_trip=default_trip,
                             registers=args.registers, working_set=working_set, budget=args.budget or DEFAULT_BUDGET,
                             trace=args.trace, ptx_text=src.text))
    result["ptx_source"] = src.how
    result["profile"] = str(choice.path)
    if args.correction:
        from gpuprofiler.models.correction import apply_file

        got = apply_file(args.correction, "pipeline", profile, result.get("features"), result["predicted_s"])
        result["corrected_s"] = got.pop("corrected_s")
        result["correction"] = got
        if "warning" in got:
            warn(f"--correction: {got['warning']}")
    if args.json:
        print(json.dumps(json_ready(result), indent=1))
    else:
        print(render_pipeline(result, explain=args.explain, trace=args.trace))
    return 0
