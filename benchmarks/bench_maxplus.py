"""Benchmark (not a test): max-plus times at scale on this machine.

* a kernel graph of 10^5 nodes with a few arcs per node, computed to its height on the sparse path:
  (a) 10^5 / 9 work-items of the builder's stencil5 graph side by side (I_n (x) K, height 4),
  (b) a random layered graph of 10^5 nodes, 3 arcs into each node, height 999,
  (c) the builder's own matmul_naive graph at n = 25000 (the k-loop unrolled: 10^5 nodes, height ~5*10^4);
* a dense 512 x 512 max-plus matrix (half epsilon) raised to the 16th power.

    python benchmarks/bench_maxplus.py
"""

from __future__ import annotations

import time

import numpy as np

from gpuprofiler.models.maxplus import algebra as mp
from gpuprofiler.models.maxplus.builder import build_spec
from gpuprofiler.models.maxplus.graph import levels, longest
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.spec import load_spec


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


def main() -> None:
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


if __name__ == "__main__":
    main()
