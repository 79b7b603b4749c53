"""``gpuprofiler tune``: search a spec's parameters for the fastest configuration on a device; configurations that
fail are listed (failed.csv too) and the search goes on, ending in exit 4."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from gpuprofiler.cli.common import (
    add_cluster,
    add_device,
    add_timing,
    cluster_device,
    end_with_failures,
    find_profile,
    open_runner,
    policy,
    progress,
)
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    from gpuprofiler.measure.policy import TimingPolicy

    p = sub.add_parser("tune", help="search a spec's [params] for the fastest configuration (checked and timed)")
    p.add_argument("target", metavar="SPEC", help="spec path, or a builtin name such as spmv_sell")
    p.add_argument("--space", required=True, metavar="'NAME=V1,V2;NAME=...'",
                   help="the values of each tuned parameter, e.g. 'S=1,2,4,8,16,32;Nt=64,128,256,512'")
    p.add_argument("--restrict", action="append", default=[], metavar="EXPR",
                   help="a condition every configuration must meet, e.g. 'Nt %% S == 0' (repeatable)")
    p.add_argument("--strategy", default="brute", help="brute (every configuration), random, or model (rank by a "
                   "small-size run of each, measure best-first until the rest are statistically out of reach)")
    p.add_argument("--budget", dest="max_configs", type=int, metavar="N",
                   help="measure at most N configurations at the target size")
    p.add_argument("--size", type=int, help="the size to tune at (default: the spec's first target)")
    p.add_argument("--rank-size", type=int, help="with --strategy model: the ranking size (default size/8)")
    p.add_argument("--matrix", metavar="FAMILY_OR_FILE",
                   help="a spec with a [matrix] table: poisson2d, poisson3d, banded, powerlaw, block or a .mtx file")
    p.add_argument("--rank", default="sweep", metavar="sweep|auto|MODEL",
                   help="with --strategy model: what ranks the configurations: a small-size sweep (default), or a "
                        "static model's prediction (auto: the first that applies, given the device's profile)")
    p.add_argument("--profile", metavar="FILE", help="the hardware profile for a static ranking (default: the "
                                                     "device's stored one, if any)")
    p.add_argument("--seed", type=int, default=0, help="the random strategy's order")
    p.add_argument("--tolerance", type=float, default=0.05, metavar="FRACTION",
                   help="with --strategy model: stop when no unmeasured configuration is likely to be more than this "
                        "much faster than the best measured one (default 0.05)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="folder for the store (tune.jsonl, resumed when rerun), table.csv and space.png "
                        "(default results/<device>/tune/<spec>_<matrix>_<size>)")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    add_device(p)
    add_timing(p, TimingPolicy(warmup=2, warmup_s=0.1, min_samples=5, budget_s=1.0, rel_ci=0.02),
               budget_option="--seconds")
    add_cluster(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.device import open_backend
    from gpuprofiler.measure.storage import default_path, json_ready
    from gpuprofiler.report.plots import plot_tune
    from gpuprofiler.report.validation import write_csv
    from gpuprofiler.tune import strategies
    from gpuprofiler.tune.space import parse_space
    from gpuprofiler.tune.store import TuneStore
    from gpuprofiler.tune.tuner import Tuner, table_columns
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import load_spec

    path = resolve(args.target)
    if path.suffix != ".toml":
        raise UserError(f"{path}: tune takes a kernel spec (.toml); an app's parameters are its own code")
    spec = load_spec(path)
    if args.matrix:
        spec = spec.with_matrix(args.matrix)
    space = parse_space(args.space, args.restrict)
    unknown = [n for n in space.names if n not in spec.params]
    if unknown:
        raise UserError(f"--space: {', '.join(unknown)} not among the spec's [params] "
                        f"({', '.join(spec.params) or 'it has none'})")
    if not 0 <= args.tolerance < 1:
        raise UserError("--tolerance must be a fraction from 0 to below 1")
    strategy = strategies.create(args.strategy, seed=args.seed,
                                 **({"tolerance": args.tolerance} if args.strategy == "model" else {}))
    size = args.size or (spec.target[0] if spec.target else None)
    if not size or size < 1:
        raise UserError(f"{path}: no --size given and the spec has no target size")
    if args.max_configs is not None and args.max_configs < 1:
        raise UserError("--budget must be at least 1 configuration")
    if args.rank_size is not None and not 0 < args.rank_size:
        raise UserError("--rank-size must be at least 1")
    timing = policy(args)
    runner = open_runner(args)
    kind = None
    if runner is not None:  # the kind's description stands for the backend; the runner measures
        kind, backend = cluster_device(runner, args.device)
    else:
        backend = open_backend(args.device)
    matrix = Path(spec.matrix["source"]).stem if spec.matrix else "none"
    out = Path(args.output) if args.output else default_path(backend.info, "tune") / f"{spec.name}_{matrix}_{size}"
    store = TuneStore(out / "tune.jsonl", backend.info)
    profile = None
    if args.strategy == "model" and args.rank != "sweep":
        profile = find_profile(args, backend.info, required=bool(args.profile) or args.rank != "auto").profile
    tuner = Tuner(backend, spec, int(size), space, store, policy=timing, budget=args.max_configs, say=progress,
                  rank_size=args.rank_size, profile=profile, runner=runner, kind=kind)
    if args.strategy == "model":
        tuner.ranker = tuner.choose_ranker(args.rank)
    where = f"{len(runner.kinds()[kind])} device(s) of {runner.describe()}" if runner else backend.info.id
    progress(f"device {where}: {backend.info.name}; {len(tuner.candidates)} of {len(space.configs())} "
             f"configuration(s) allowed; store {store.log.path}" + (f" ({len(store.found)} stored)" if store.found else ""))
    try:
        strategy.search(tuner)
    except KeyboardInterrupt:
        progress(f"interrupted: {store.log.written} finished configuration(s) kept in {store.log.path}")
        return 130
    finally:
        backend.close()
    rows = tuner.table()
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "table.csv", rows, table_columns(space.names))
    title = f"{spec.name} on {matrix} at {size}, {backend.info.name}"
    plot = plot_tune(rows, space.names, out / "space.png", title, space.params)
    best = tuner.best()
    if args.json:
        print(json.dumps(json_ready({"rows": rows, "best": best.config if best else None, "notes": strategy.notes,
                                     "measured": tuner.measured_count, "allowed": len(tuner.candidates)}), indent=1))
    else:
        _print(rows, space.names)
        print()
        for note in strategy.notes:
            print(note)
        measured = sum(1 for r in rows if r["status"] in ("ok", "failed"))
        print(f"measured {measured} of {len(tuner.candidates)} allowed configuration(s) at size {size} "
              f"({tuner.measure_s:.1f} s" + (f", ranking {tuner.rank_s:.1f} s "
                                            + (f"at size {tuner.rank_size}" if tuner.ranker == "sweep"
                                               else f"by {tuner.ranker}") if tuner.rank_s else "") + f"; {store.reused} stored result(s) reused)")
        if best:
            print(f"best: {best.key}: p10 {best.seconds * 1e3:.4g} ms "
                  f"[{best.record['model_ci_low_s'] * 1e3:.4g}, {best.record['model_ci_high_s'] * 1e3:.4g}]")
        else:
            print("no configuration ran")
    progress(f"table {out / 'table.csv'}, plot {plot}")
    failures = tuner.failures(f"kind:{kind}" if runner else backend.info.id)
    code = end_with_failures(failures, out / "failed.csv", tuner.measured_count, "configuration", args.json)
    if failures or best:
        return code
    # nothing ran and nothing failed: the restrictions, the strategy's budget or the stored results left no
    # configuration to time, which the options decide (exit 2, as for any input that gives no work)
    print(f"gpuprofiler: error: no configuration of {len(tuner.candidates)} allowed was measured: widen --space or "
          "--restrict, or raise the strategy's --budget", file=sys.stderr)
    return 2


def _fmt(v) -> str:
    return f"{v * 1e3:.4g}" if isinstance(v, float) and math.isfinite(v) else "-"


def _print(rows: list[dict], names: list[str]) -> None:
    print(f"{'configuration':<24} {'status':<10} {'p10 ms':>9} {'95% interval ms':>19} {'median ms':>9} {'GB/s':>7}  note")
    for r in rows:
        iv = f"[{_fmt(r['ci_low_s'])}, {_fmt(r['ci_high_s'])}]" if r["status"] == "ok" else ""
        gb = f"{r['gbps']:.2f}" if isinstance(r["gbps"], float) and math.isfinite(r["gbps"]) else "-"
        print(f"{r['config']:<24} {r['status']:<10} {_fmt(r['seconds']):>9} {iv:>19} {_fmt(r['median_s']):>9} "
              f"{gb:>7}  {(r['stage'] + ': ' if r['stage'] else '') + ' '.join(r['reason'].split())[:90]}")
