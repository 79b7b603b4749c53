"""``gpuprofiler pipeline``: the static PTX pipeline model on a .cu/.ptx launch or on a kernel spec at a size."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError


def _dims(text: str) -> tuple[int, int, int]:
    try:
        vals = [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}") from None
    if not 1 <= len(vals) <= 3 or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected X[,Y[,Z]] positive integers, got {text!r}")
    return tuple(vals + [1] * (3 - len(vals)))  # type: ignore[return-value]


def add_parser(sub: Any) -> None:
    """Register the ``pipeline`` subcommand on the CLI's subparsers."""
    p = sub.add_parser("pipeline", help="predict a kernel's time with the static PTX pipeline model (seed 002)",
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
    p.add_argument("--profile", required=True, help="hardware profile (gpuprofiler calibrate)")
    p.add_argument("--arch", help="compute capability, e.g. sm_90 (default: the profile's, else the PTX target)")
    p.add_argument("--trip", action="append", default=[], metavar="N|LABEL=N",
                   help="trip count for loops not known statically (LABEL or line = N; N alone: every such loop)")
    p.add_argument("--registers", type=int, help="registers per thread (default: ptxas -v, else an estimate)")
    p.add_argument("--working-set", type=float, help="bytes the kernel touches (picks cache latency/bandwidth "
                                                     "from the profile's curves; spec form: its array bytes)")
    p.add_argument("--budget", type=int, default=None, help="most warp-instructions to simulate before "
                                                            "extrapolating (default 2000000)")
    p.add_argument("--correction", help="a learned correction model (JSON) to apply")
    p.add_argument("--json", action="store_true", help="print only JSON")
    p.add_argument("--explain", action="store_true", help="also show hardware sources, path, loops, accesses, "
                                                          "latencies")
    p.add_argument("--trace", action="store_true", help="also show warp 0's task list and its issue / execute / "
                                                        "write-back times")
    p.set_defaults(func=cmd_pipeline)


def _parts(items: list[str]):
    """The non-empty comma-separated parts of repeated options (``--x a=1,b=2 --x c=3``)."""
    for item in items:
        yield from (part.strip() for part in item.split(",") if part.strip())


def _parse_trips(items: list[str]) -> tuple[dict[str, int], int]:
    trips: dict[str, int] = {}
    default = 1
    for part in _parts(items):
        name, sep, value = part.rpartition("=")
        try:
            n = int(value)
        except ValueError:
            raise UserError(f"--trip {part!r}: expected N or LABEL=N") from None
        if n < 0:
            raise UserError(f"--trip {part!r}: a trip count cannot be negative")
        if sep:
            trips[name] = n
        else:
            default = n          # for every loop whose trip count is not known statically
    return trips, default


def _parse_values(items: list[str], what: str) -> dict[str, Any]:
    from gpuprofiler.safe_eval import evaluate

    out: dict[str, Any] = {}
    for part in _parts(items):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{what} {part!r}: expected NAME=VALUE")
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


def _profile_arch(profile: Any) -> str | None:
    cc = (profile.data.get("device") or {}).get("compute_capability")
    return "sm_" + str(cc).replace(".", "") if cc else None


def cmd_pipeline(args: argparse.Namespace) -> int:
    from gpuprofiler.pipeline.occupancy import normalise_arch
    from gpuprofiler.pipeline.predict import DEFAULT_BUDGET, predict
    from gpuprofiler.pipeline.ptx_parser import parse_ptx
    from gpuprofiler.pipeline.ptx_source import (
        cu_parameters,
        cu_source_for_ptx,
        load_ptx,
    )
    from gpuprofiler.pipeline.values import Launch
    from gpuprofiler.profile import load_profile

    profile = load_profile(args.profile)
    trips, default_trip = _parse_trips(args.trip)
    arch = normalise_arch(args.arch) if args.arch else None
    compile_arch = arch or _profile_arch(profile) or "sm_90"
    compile_arch = normalise_arch(compile_arch)
    target = Path(args.target)
    working_set = args.working_set
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
        cu_names = cu_parameters(cu.read_text(), entry.name) if cu is not None else None
        launch = Launch(args.grid, args.block, _file_args(module, entry, _parse_values(args.args, "--args"), cu_names))
    else:
        from gpuprofiler.builtin import resolve
        from gpuprofiler.cli import _overrides
        from gpuprofiler.pipeline.specs import spec_launch

        path = resolve(args.target)
        if path.suffix != ".toml":
            raise UserError(f"{path}: the pipeline model works on one kernel: give a kernel spec (.toml) or a .cu/.ptx")
        if args.size is None:
            raise UserError(f"{path}: give the size with --size N")
        if args.grid or args.block or args.args or args.define:
            raise UserError("a kernel spec gives the launch itself: --grid, --block, --args and --define apply to "
                            ".cu/.ptx files")
        sl = spec_launch(path, args.size, compile_arch, _overrides(args.set), args.kernel)
        module, entry, launch, src = sl.module, sl.entry, sl.launch, sl.source
        if working_set is None:
            working_set = sl.working_set
    correction = None
    if args.correction:
        try:
            correction = json.loads(Path(args.correction).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read correction model {args.correction}: {exc}") from None
    result = predict(module, entry.name, launch, profile, arch=arch or _profile_arch(profile) or module.arch,
                     trips=trips, default_trip=default_trip, registers=args.registers, working_set=working_set,
                     budget=args.budget or DEFAULT_BUDGET, trace=args.trace, correction=correction,
                     ptx_text=src.text)
    result["ptx_source"] = src.how
    result["profile"] = str(args.profile)
    if args.json:
        from gpuprofiler.storage import json_ready

        print(json.dumps(json_ready(result), indent=1))
    else:
        print(render(result, explain=args.explain, trace=args.trace))
    return 0


def _us(s: float) -> str:
    return f"{s * 1e6:.4g} us"


def render(r: dict[str, Any], explain: bool = False, trace: bool = False) -> str:
    """The human-readable report."""
    occ, sim, hw = r["occupancy"], r["simulation"], r["hardware"]
    g, b = r["grid"], r["block"]
    lines = [
        f"pipeline model: {r['kernel']} on {r['arch']}, grid {g[0]}x{g[1]}x{g[2]}, block {b[0]}x{b[1]}x{b[2]} "
        f"({r['threads']} threads); PTX: {r['ptx_source']}",
        f"predicted {_us(r['predicted_s'])} = compute {_us(r['compute_s'])} ({r['cycles']:.0f} cycles of the busiest "
        f"SM at {r['clock_hz'] / 1e9:.3g} GHz) + launch {_us(r['launch_s'])} + memory penalty {_us(r['penalty_s'])}",
    ]
    if "corrected_s" in r:
        lines.append(f"with the learned correction: {_us(r['corrected_s'])}")
    lines.append(f"occupancy: {occ['blocks_per_sm']} blocks/SM ({occ['warps_per_sm']} warps), limited by "
                 f"{occ['limited_by']}; {occ['regs_per_thread']} registers/thread ({occ['registers_source']}), "
                 f"{occ['smem_per_block']} B shared/block; {occ['blocks_on_busiest_sm']} blocks on the busiest of "
                 f"{hw['sms']} SMs = {occ['waves']:.3g} waves")
    rate = sim.get("rate_warp_instructions_per_s")
    lines.append(f"simulation: {sim['method']}; {sim['warp_instructions_simulated']} warp-instructions in "
                 f"{sim['seconds']:.3g} s" + (f" ({rate:.3g}/s)" if rate else ""))
    lines.append(f"uncoalesced global requests per warp: {r['uncoalesced']:.4g} "
                 f"({r['uncoalesced_requests_total']:.4g} in the launch)")
    for a in r["accesses"]:
        if a["space"] != "global":
            continue
        extra = f", stride {a['stride_bytes']} B" if "stride_bytes" in a else ""
        lines.append(f"  line {a['line']:>4} {a['opcode']:<16} {a['pattern']}{extra}: {a['transactions']:.3g} sectors "
                     f"per request (coalesced {a['ideal']:.3g}), x{a['executions_per_warp']:.4g} per warp")
    units = sorted(r["units"].items(), key=lambda kv: -kv[1]["utilization"])
    lines.append("units: " + ", ".join(f"{k} {v['instructions']} instr {v['utilization'] * 100:.3g}%" for k, v in units))
    lat = r["latencies"]
    lines.append(f"latencies from the profile: {', '.join(lat['from_profile']) or 'none'}; "
                 f"defaults ({r['arch']}): {', '.join(lat['defaults']) or 'none'}")
    if explain:
        lines.append("hardware:")
        for key in ("sms", "clock_hz", "read_Bps", "write_Bps", "load_latency_cycles", "store_latency_cycles",
                    "launch_per_thread_s", "launch_fixed_s"):
            skey = {"load_latency_cycles": "load_latency", "store_latency_cycles": "store_latency",
                    "launch_per_thread_s": "launch", "launch_fixed_s": "launch"}.get(key, key)
            lines.append(f"  {key:<22} {hw[key]:<14.6g} {hw['sources'].get(skey, '')}")
        lines.append("latencies used (cycles, source):")
        for u in lat["used"]:
            lines.append(f"  {u['opcode']:<22} {u['unit']:<8} {u['cycles']:<8g} {u['source']}")
        lines.append(f"path ({r['path']['active_fraction'] * 100:.3g}% of the sampled threads follow it all the way): "
                     + " -> ".join(r["path"]["blocks"]))
        for br in r["path"]["branches"]:
            tf = br["taken_fraction"]
            lines.append(f"  branch line {br['line']}: " + ("not known statically" if tf is None else
                         f"taken by {tf * 100:.3g}% of active threads, divergent in {br['divergent_warps'] * 100:.3g}% "
                         "of warps"))
        for lp in r["loops"]:
            desc = ""
            if "induction" in lp:
                desc = (f"; induction {lp['induction']} from {lp.get('start')} step {lp.get('step')} while "
                        f"{lp.get('stay_while')} (bound {lp.get('bound')}), test at line {lp.get('test_line')}")
            lines.append(f"  loop {lp['label']} (line {lp['line']}): {lp['trip']} passes ({lp['trip_source']}){desc}")
        lines.append(f"task list: {r['task_list']['length']} tasks per warp from {r['task_list']['static_instructions']} "
                     f"PTX instructions; " + ", ".join(f"{k} {v}" for k, v in r["task_list"]["unit_counts"].items()))
        for a in r["accesses"]:
            if a["space"] == "global":
                continue
            lines.append(f"  line {a['line']:>4} {a['opcode']:<16} {a['space']} bank conflict "
                         f"{a.get('bank_conflict', 1):.3g}-way, x{a['executions_per_warp']:.4g} per warp")
    if trace and "trace" in r:
        lines.append("task list of warp 0 (id, unit, latency, writes <- reads, block):")
        for tk in r.get("tasks", [])[:200]:
            lines.append(f"  {tk['id']:>5} {tk['unit']:<7} {tk['latency']:>5}  {','.join(tk['writes']) or '-'} <- "
                         f"{','.join(tk['reads']) or '-'}  (block {tk['block']})")
        lines.append("warp 0: issue / execute / write back (cycles):")
        for ev in r["trace"][:200]:
            lines.append(f"  task {ev['task']:>5} line {ev['line']:>4} {ev['opcode']:<20} {ev['issue']:>8} "
                         f"{ev['execute']:>8} {ev['write_back']:>8}")
    for w in r["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: gpuprofiler pipeline ...")
