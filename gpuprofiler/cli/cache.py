"""``gpuprofiler cache``: a kernel's miss ratios at the device's cache levels, from sampled reuse distances."""

from __future__ import annotations

import argparse
import json
import math

from gpuprofiler.cli.common import add_device, add_profile, find_profile, plot_path
from gpuprofiler.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="miss ratios of a kernel at the device's cache levels (StatCache / StatStack "
                                     "from sampled reuse distances)")
    p.add_argument("target", help="kernel spec (.toml) or builtin name")
    p.add_argument("--size", type=int, required=True, help="the spec's size N")
    add_profile(p, "hardware profile (cache sizes, compute units)")
    add_device(p, "whose stored profile to use without --profile (default: the default device)")
    p.add_argument("--rate", type=float, default=1e-3, help="share of accesses whose reuse distance is sampled "
                                                            "(default 1e-3; raised for small launches)")
    p.add_argument("--backend", choices=("opencl", "cuda"), help="which source of the spec to read")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("--plot", metavar="FILE", help="write the miss-ratio curve with the device's caches marked (PNG)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plot_path(args.plot)
    from gpuprofiler.models.cache.analysis import analyse
    from gpuprofiler.models.maxplus.builder import BuildError
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import load_spec

    if args.size <= 0:
        raise UserError("--size must be positive")
    if not 0 < args.rate <= 1:
        raise UserError("--rate must be in (0, 1]")
    path = resolve(args.target)
    if path.suffix != ".toml":
        raise UserError(f"{path}: cache analyses one kernel: give a kernel spec (.toml), not an app")
    spec = load_spec(path)
    inst = spec.instantiate(args.size)
    choice = find_profile(args, required=True)
    try:
        res = analyse(inst, choice.profile, rate=args.rate, backend=args.backend)
    except (BuildError, ValueError) as exc:
        raise UserError(f"{path}: {exc}") from None
    if args.plot:
        from gpuprofiler.report.plots import plot_miss_ratio

        plot_miss_ratio(res, args.plot, f"{spec.name} at {spec.size}={args.size}")
    if args.json:
        print(json.dumps({"kernel": spec.name, "size": args.size, **res.to_dict(),
                          "histogram": histogram(res.private_distances)}, indent=2))
        return 0
    print(f"{spec.name} at {spec.size}={args.size}: {res.order.describe()}")
    print(f"{res.accesses:.4g} global accesses per launch; {res.samples} reuse distances sampled (rate {res.rate:.2g}) "
          f"in {res.windows} window(s) of up to {res.window_accesses} accesses")
    print(f"{'level':<6} {'size':>10} {'lines':>9} {'ways':>6} {'shared':>7} {'LRU miss':>9} {'fully as.':>9} "
          f"{'random':>7} {'misses/launch':>14}  arrays (share of the misses)")
    for lv in res.levels:
        arrays = ", ".join(f"{n} {100 * s:.0f}%" for n, s in sorted(lv.by_array.items(), key=lambda x: -x[1]))
        ways = "full" if lv.sets <= 1 else str(lv.ways)
        print(f"{lv.name:<6} {_bytes(lv.size_bytes):>10} {lv.lines:>9} {ways:>6} {'yes' if lv.shared else 'no':>7} "
              f"{lv.miss_ratio:>9.3f} {lv.miss_ratio_full:>9.3f} {lv.miss_ratio_random:>7.3f} {lv.misses:>14.4g}  "
              f"{arrays}")
    print("(LRU miss: an LRU cache of that many ways whose sets fill as this stream fills them; fully as.: fully "
          "associative LRU; random: fully associative, random replacement, Hagersten's StatCache)")
    print(f"coherence: {res.coherence_misses:.3g} misses per launch on written lines that several units touch "
          f"({100 * res.shared_written_lines:.1f}% of written lines)")
    print("reuse distances (accesses between an access and the next to its line), private streams:")
    for label, share in histogram(res.private_distances):
        print(f"  {label:>16} {'#' * int(round(40 * share)):<40} {100 * share:5.1f}%")
    for note in res.notes:
        print(f"note: {note}")
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def histogram(distances) -> list[tuple[str, float]]:
    """Shares of the sampled reuse distances in power-of-two buckets, and of the never reused."""
    import numpy as np

    d = np.asarray(distances, float)
    if not len(d):
        return []
    out = []
    finite = d[np.isfinite(d)]
    edges = [0, 1] + [2**k for k in range(1, 1 + max(1, int(math.log2(max(finite.max(), 2))) + 1))] if len(finite) \
        else [0, 1]
    for lo, hi in zip(edges[:-1], edges[1:]):
        share = float(np.mean((d >= lo) & (d < hi)))
        if share:
            out.append((f"{lo}" if hi == lo + 1 else f"{lo}..{hi - 1}", share))
    never = float(np.mean(~np.isfinite(d)))
    if never:
        out.append(("not reused", never))
    return out


def _bytes(v: float) -> str:
    return f"{v / 2**20:.1f} MiB" if v >= 2**20 else f"{v / 2**10:.0f} KiB"
