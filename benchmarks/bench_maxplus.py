"""Benchmark (not a test): max-plus times at scale on this machine.

* a kernel graph of 10^5 nodes with a few arcs per node, computed to its height on the sparse path:
  (a) 10^5 / 9 work-items of the builder's stencil5 graph side by side (I_n (x) K, height 4),
  (b) a random layered graph of 10^5 nodes, 3 arcs into each node, height 999,
  (c) the builder's own matmul_naive graph at n = 25000 (the k-loop unrolled: 10^5 nodes, height ~5*10^4);
* a dense 512 x 512 max-plus matrix (half epsilon) raised to the 16th power;
* every builtin kernel spec's prediction (the default overlap model, CUDA sources) at every size of its
  ``small`` and ``target`` lists with the H100 profile: ``MaxPlusPredictor(backend="cuda").fit(spec,
  profile).predict([size])``, the graph built from scratch each time. A table sorted by time, the slowest, and
  exit status 1 if any takes more than ``--limit`` seconds (1 s).

    python benchmarks/bench_maxplus.py [--only graphs|predictions] [--profile PATH] [--limit 1.0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.models.maxplus import algebra as mp  # noqa: E402
from gpuprofiler.models.maxplus.builder import build_spec  # noqa: E402
from gpuprofiler.models.maxplus.graph import levels, longest  # noqa: E402
from gpuprofiler.models.maxplus.predictor import MaxPlusPredictor  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predictions import H100_PROFILE, time_all  # noqa: E402


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def replicated(name: str, nodes: int):
    spec = load_spec(resolve(name))
    g = build_spec(spec.instantiate(spec.small[0])).fragments[0]
    copies = nodes // g.size
    src = np.array([a.src for a in g.arcs])
    dst = np.array([a.dst for a in g.arcs])
    w = np.random.default_rng(0).random(len(g.arcs))
    off = (np.arange(copies) * g.size)[:, None]
    loops = np.full(g.size, -np.inf)
    loops[list(g.loops)] = 1e-9
    return (copies * g.size, (dst + off).ravel(), (src + off).ravel(), np.tile(w, copies),
            (np.array(g.inputs) + off).ravel(), (np.array(g.outputs) + off).ravel(), np.tile(loops, copies))


def layered(nodes: int, width: int, fan_in: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    layers = nodes // width
    dst = np.repeat(np.arange(width, layers * width), fan_in)
    src = (dst // width - 1) * width + rng.integers(0, width, dst.size)
    return layers * width, dst, src, rng.random(dst.size), np.arange(width), np.arange((layers - 1) * width, layers * width), None


def unrolled_matmul(n: int):
    spec = load_spec(resolve("matmul_naive"))
    inst = spec.instantiate(n)
    g = build_spec(inst).fragments[0]
    loops = np.full(g.size, -np.inf)
    loops[list(g.loops)] = 1e-9
    return (g.size, np.array([a.dst for a in g.arcs]), np.array([a.src for a in g.arcs]),
            np.full(len(g.arcs), 1e-8), g.inputs, g.outputs, loops)


def graphs() -> None:
    cases = [("stencil5 x 11111 work-items (I_n (x) K)", replicated("stencil5", 100_000)),
             ("random layered, 100 wide, 3 arcs in", layered(100_000, 100, 3))]
    t0 = time.perf_counter()
    mm = unrolled_matmul(25_000)
    print(f"(building the matmul_naive graph at n = 25000 took {time.perf_counter() - t0:.1f} s)")
    cases.append(("matmul_naive n=25000, k-loop unrolled", mm))
    for label, (n, dst, src, w, ins, outs, lw) in cases:
        secs, value = best_of(lambda n=n, dst=dst, src=src, w=w, ins=ins, outs=outs, lw=lw:
                              longest(n, dst, src, w, ins, outs, lw))
        _, k = levels(n, dst, src, None if lw is None else np.isfinite(lw))
        print(f"{label}: {n} nodes, {len(dst)} arcs, height {k}: {secs:.3f} s (time {value:.4g})")
    rng = np.random.default_rng(1)
    a = rng.random((512, 512))
    a[rng.random(a.shape) < 0.5] = -np.inf
    secs, _ = best_of(lambda: mp.power(a, 16))
    print(f"dense 512 x 512, 16th power (4 squarings): {secs:.3f} s")


def predictions(profile_path: Path, limit: float, repeats: int) -> bool:
    """Times every builtin spec's overlap prediction at each of its sizes; True when all are within ``limit``."""
    return time_all("max-plus predictions (overlap model, CUDA sources)", lambda: MaxPlusPredictor(backend="cuda"),
                    profile_path, limit, repeats)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("graphs", "predictions"), help="run one part (default: both)")
    ap.add_argument("--profile", type=Path, default=H100_PROFILE, help="hardware profile for the predictions")
    ap.add_argument("--limit", type=float, default=1.0, help="seconds one prediction may take (exit 1 beyond)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per prediction; the fastest is reported")
    args = ap.parse_args()
    if args.only != "predictions":
        graphs()
    if args.only != "graphs":
        return 0 if predictions(args.profile, args.limit, args.repeat) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
