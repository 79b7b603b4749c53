"""``gpuprofiler maxplus``: predict a kernel's time with the max-plus models from a hardware profile."""

from __future__ import annotations

import argparse
import json
import math
import sys

from gpuprofiler.cli.common import add_device, add_profile, find_profile, warn
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("maxplus", help="predict a kernel's time with the max-plus model of its data graph")
    p.add_argument("target", nargs="?", help="kernel spec (.toml) or builtin name")
    add_profile(p, "hardware profile JSON (from `gpuprofiler calibrate`)")
    add_device(p, "whose stored profile to use without --profile (default: the default device)")
    p.add_argument("--size", type=int, help="the spec's size N")
    p.add_argument("--model", default="overlap",
                   help="naive, ops, serial, cache (the paper's) or overlap (default: the cache model's latencies, "
                        "batches of resident work-items bounded by DRAM, cache, L1 and issue throughput)")
    p.add_argument("--batches", choices=("sequential", "pipelined"),
                   help="the paper's models: batches of n work-items one after another (default for naive and ops) "
                        "or overlapping on the serialized memory (default for serial and cache)")
    p.add_argument("--n", type=int, help="work-items running at once (default: the profile's concurrency for the "
                                         "paper's models, the occupancy for overlap)")
    p.add_argument("--line-bytes", type=int, help="bytes fetched per strided access (default 64 on a CPU, 32 on a GPU)")
    p.add_argument("--backend", choices=("opencl", "cuda"),
                   help="which source of the spec to read (default: the profile's API, else opencl)")
    p.add_argument("--example", choices=("vadd", "fork", "chain"),
                   help="the paper's graphs (vadd's Z1/Z2/Z3 by --model; Table 1's fork and chain), symbolic only")
    p.add_argument("--correction", metavar="FILE", help="also give the prediction times the learned correction in "
                                                      "FILE (written by `validate --fit-correction`; overlap model)")
    p.add_argument("--no-cache", action="store_true", help="overlap model: DRAM and cache traffic from the footprint "
                                                           "and reuse rules, not from the sampled address stream's "
                                                           "predicted misses (`gpuprofiler cache`)")
    p.add_argument("--count-loops", action="store_true",
                   help="first count the kernel's loops on the device (--device, default: the default device) at --size "
                        "(`gpuprofiler loops`) and unroll the ones the builder cannot count (a while loop, a bound "
                        "read from memory) that many times")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")
    p.add_argument("--explain", action="store_true", help="print the graph, its matrix, height and symbolic time")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.models.maxplus.models import MODELS

    if args.model not in MODELS:
        raise UserError(f"unknown --model {args.model!r}: choose from {', '.join(MODELS)}")
    if args.example:
        return _example(args)
    if not args.target:
        raise UserError("give a kernel spec (or --example)")
    if args.size is None:
        raise UserError("--size is required with a kernel spec")
    from gpuprofiler.models.maxplus.builder import TooLarge, build_spec
    from gpuprofiler.models.maxplus.cut import predict_cut
    from gpuprofiler.models.maxplus.explain import explain
    from gpuprofiler.models.maxplus.formula import total_text
    from gpuprofiler.models.maxplus.models import parameters, predict
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import load_spec

    path = resolve(args.target)
    if path.suffix != ".toml":
        raise UserError(f"{path}: maxplus models one kernel: give a kernel spec (.toml), not an app")
    if args.size <= 0:
        raise UserError("--size must be positive")
    spec = load_spec(path)
    inst = spec.instantiate(args.size)
    choice = find_profile(args, required=True)
    from gpuprofiler.profile.hardware import view

    kind = args.backend or view(choice.profile).backend or "opencl"
    trips = _count_loops(args, spec) if args.count_loops else None
    work_items = math.prod(inst.global_size)
    cut = None
    try:
        kernel = build_spec(inst, kind, trips=trips)
    except TooLarge as exc:  # a loop too long to unroll: cut to a few passes, the time linear in its passes
        kernel, cut = predict_cut(
            lambda caps: build_spec(inst, kind, trips=trips, caps=caps),
            lambda k: predict(k, parameters(choice.profile, k, args.n, args.line_bytes), work_items, args.size,
                              args.model, args.batches), exc)
        warn(kernel.notes[-1])
    params = parameters(choice.profile, kernel, args.n, args.line_bytes)
    misses = None
    if cut is None and args.model == "overlap" and not args.no_cache:
        from gpuprofiler.models.cache.analysis import analyse
        from gpuprofiler.models.cache.streams import spec_launch

        try:
            misses = analyse(spec_launch(inst, kind, trips), choice.profile, budget=1 << 21, count=2, backend=kind)
        except (UserError, ValueError) as exc:
            warn(f"no cache analysis ({exc}): DRAM and cache traffic from the footprint and reuse rules")
    pred = cut or predict(kernel, params, work_items, args.size, args.model, args.batches, misses)
    d = pred.details
    if args.explain:
        d["symbolic"] = total_text(kernel, d["model"], d["batches"])
    if args.correction:
        from gpuprofiler.models.correction import apply_file

        if cut is not None:
            raise UserError("--correction: the learned correction's features describe a whole graph, and this "
                            "kernel's loops were cut to a few passes (too long to unroll)")
        if "features" not in d:
            raise UserError(f"--correction: the learned correction applies to the overlap model, not {d['model']}")
        got = apply_file(args.correction, "maxplus", choice.profile, d["features"], pred.seconds)
        d["corrected_s"] = got.pop("corrected_s")
        d["correction"] = got
        if "warning" in got:
            warn(f"--correction: {got['warning']}")
    out = {"kernel": spec.name, **d, "notes": kernel.notes, "profile": str(choice.path)}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    if args.explain:
        print(explain(kernel, args.model))
        print()
    chains = d.get("cpu_chains")
    if chains:
        print(f"{spec.name} at N = {args.size} ({work_items} work-items; a core runs {chains['work_groups_per_core']} "
              f"work-groups of {chains['group']}, their work-items one after another)")
    else:
        print(f"{spec.name} at N = {args.size} ({work_items} work-items, n = {d['n']} at once; {d['batches']} batches)")
    print(f"  model {d['model']}: {pred.seconds:.6g} s [{pred.low:.4g}, {pred.high:.4g}] "
          "(interval: the profile's measurement intervals)")
    if "corrected_s" in d:
        print(f"  corrected: {d['corrected_s']:.6g} s (learned correction in {args.correction})")
    print(f"  launch: {d['launch_fixed_s']:.4g} s fixed, {d['dispatch_s']:.4g} s dispatch; work: {d['work_s']:.4g} s")
    if "bounds_s" in d:
        shown = ", ".join(f"{k} {v:.4g} s" for k, v in d["bounds_s"].items())
        print(f"  bounds: {shown}; limited by {d['limited_by']}")
        if chains:
            for part in chains["fragments"]:
                floor = (f"; {part['floor_s']:.3g} s per work-item, the loop-free curve's least (each work-item's "
                         f"fixed cost)" if part.get("floor_s") else "")
                print(f"  region {part['fragment']}: a work-item's path {part['path_s']:.4g} s, {part['operations']} "
                      f"operations, {part['overlap']:.3g} work-items at once per core ({part['source'].split(':')[0]})"
                      f"{floor}")
            if chains.get("store_stall_s"):
                print(f"  store stalls: {chains['store_stall_s']:.4g} s ({chains['store_stall_source']})")
            print(f"  one work-group on a core: {d['batch_s']:.4g} s; height k = {d['height']}")
        else:
            print(f"  one batch: {d['batch_s']:.4g} s; height k = {d['height']}")
    else:
        print(f"  one batch: {d['batch_s']:.4g} s; memory held per batch: {d['bus_s']:.4g} s; height k = {d['height']}")
    if args.explain:
        print(f"  time: {d['symbolic']}")
    if args.explain:
        print("  parameters:")
        for name in sorted(d["sources"]):
            val = d["parameters"].get(name)
            shown = f"{val:.4g}" if isinstance(val, float) else ""
            print(f"    {name:<12} {shown:>10}  {d['sources'][name]}")
    for note in kernel.notes:
        print(f"  note: {note}", file=sys.stderr)
    return 0


def _example(args: argparse.Namespace) -> int:
    from gpuprofiler.models.maxplus import symbolic
    from gpuprofiler.models.maxplus.examples import EXAMPLES
    from gpuprofiler.models.maxplus.explain import explain, symbolic_matrix
    from gpuprofiler.models.maxplus.formula import bus_symbol

    kernel = EXAMPLES[args.example]()
    model = args.model if args.example == "vadd" else "naive"
    g = kernel.fragments[0]
    z, k = symbolic_matrix(g, kernel, model)
    batch = symbolic.time(z, g.inputs, g.outputs, k)
    if args.example != "vadd":
        text = symbolic.fmt(batch)
    elif (args.batches or "sequential") == "sequential":
        text = symbolic.fmt(symbolic.sympy.ceiling(symbolic.N / symbolic.n) * batch)
    else:
        text = f"(ceil(N/n) - 1)*({symbolic.fmt(bus_symbol(g, model))}) + {symbolic.fmt(batch)}"
    if args.json:
        print(json.dumps({"example": args.example, "model": model, "height": k, "time": text,
                          "matrix": [[symbolic.fmt(v) for v in row] for row in z]}, indent=1))
        return 0
    print(explain(kernel, model))
    print(f"\ntime: {text}")
    return 0


def _count_loops(args: argparse.Namespace, spec) -> dict[int, float]:
    """Iterations per entry of every loop of the kernel, counted on the device at --size, by source line."""
    from gpuprofiler.cli.common import progress
    from gpuprofiler.device import open_backend
    from gpuprofiler.workloads.loops import profile_loops

    backend = open_backend(args.device)
    try:
        progress(f"counting {spec.name}'s loops on {backend.info.id} at {spec.size}={args.size}")
        prof = profile_loops(backend, spec, args.size)
    finally:
        backend.close()
    return {c.loop.line: c.per_entry for c in prof.loops if c.entries}
