"""Global-memory read and write times for the max-plus model: t, T and their serialization steps dt, dT.

n work-items run at once, each doing R dependent reads (a pointer chase, each on a new
cache line of an array far beyond the last-level cache) or R writes to scattered cold
lines. The time per round, T(n) / R, is fitted as t + (n - 1)*dt (reads) and
T + (n - 1)*dT (writes). The cached read is the same chase over an array that fits the
first-level cache, after a warm-up pass: a repeated read of an address already read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuprofiler.measure.engine import time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.microbench.common import Progress, Workspace, origin_fit, say
from gpuprofiler.microbench.latency import last_level_cache
from gpuprofiler.microbench.source import build
from gpuprofiler.profile.file import entry, failed

LINE_WORDS = 16  # 64-byte lines of 4-byte words

SOURCE = r"""
KERNEL void chase(GLOBAL const u32 *next, int steps, u32 spacing, GLOBAL u32 *out, u32 never, u32 offset) {
    u32 j = next[((u32)GID * spacing + offset) % SLOTS * LINE];
    for (int k = 0; k < steps; ++k) j = next[j];
    if (j == never) out[0] = j;
}

KERNEL void scatter(GLOBAL u32 *out, int steps, u32 seed) {
    u32 j = (u32)GID * 2654435761u + seed;
    for (int k = 0; k < steps; ++k) {
        j = j * 1664525u + 1013904223u;
        out[(j >> 8) % SLOTS * LINE] = (u32)k;
    }
}
"""


def _fit_entries(points, key, name, step_name, what):
    """t (or T) is the time per round with one work-item; dt (dT) the slope of the excess over n - 1."""
    first = points[0]
    base_ci = first[key + "_ci"]
    rest = points[1:]
    method = (f"{what}; {name} = time per round with 1 work-item (median of 3 blocks: start, middle and end of the "
              f"sweep; interval spans their 95% intervals); {step_name} = least-squares slope through the "
              f"origin of (time per round - {name}) over n - 1, n = 1..{points[-1]['n']} work-items at once")
    out = {name: entry(first[key], "s", method, tuple(base_ci))}
    if rest:
        slope, ci = origin_fit([p["n"] - 1 for p in rest], [p[key] - first[key] for p in rest])
        out[step_name] = (entry(slope, "s", method, ci) if ci[1] > 0 else
                          failed("s", method, f"step {slope:.3g} s is not positive"))
    else:
        out[step_name] = failed("s", method, "only one concurrency level measured")
    return out


def measure(backend: Any, quick: bool = False, progress: Progress = None, clock_hz: float | None = None,
            workspace: Workspace | None = None, array_bytes: int | None = None) -> dict[str, Any]:
    info = backend.info
    workspace = workspace or Workspace(backend)
    limit = int(info.extra.get("max_mem_alloc_bytes") or info.global_mem_bytes // 4)
    array_bytes = array_bytes or min(4 * last_level_cache(info), limit)
    say(progress, f"memory: random cycle over {array_bytes >> 20} MiB of 64-byte lines")
    cycle, slots = workspace.cycle(array_bytes, keep=True)
    defines = {"SLOTS": f"{slots}u", "LINE": LINE_WORDS}
    chase = build(backend, SOURCE, "chase", defines)
    scatter = build(backend, SOURCE, "scatter", defines)
    out = backend.alloc(slots * LINE_WORDS * 4)
    is_cpu = info.type == "cpu"
    if is_cpu:  # a few cores: every n up to 4 per core
        ns = list(range(1, 4 * max(info.compute_units, 1) + 1))
    else:
        top = max(info.compute_units, 1) * 2048
        ns = sorted({1, 2, 4, *np.unique(np.geomspace(8, top, 10 if quick else 20).astype(int)).tolist()})
    steps = (1 << 12 if quick else 1 << 14) if is_cpu else 512
    rng = workspace.rng
    policy = bench(quick, 0.3, 0.05)
    points = []
    say(progress, f"memory: t, dt, T, dT over n = {ns[0]}..{ns[-1]} work-items at once")
    never = np.uint32(2**32 - 1)
    # n = 1 (t and T themselves) is measured at the start, the middle and the end of the sweep
    order = [1] + [n for n in ns[1:len(ns) // 2 + 1]] + [1] + [n for n in ns[len(ns) // 2 + 1:]] + [1]
    for n in order:
        local = (1,) if is_cpu else (min(n, 256),)  # on a CPU one work-item per group spreads them over cores
        spacing = np.uint32(max(1, slots // n))
        # a fresh random start each launch: the lines chased are cold, not left in cache by the last launch
        r = time_launch(backend, chase, (n,), local,
                        lambda i: [cycle, np.int32(steps), spacing, out, never, np.uint32(rng.integers(slots))],
                        policy).device
        w = time_launch(backend, scatter, (n,), local, [out, np.int32(steps), np.uint32(n)], policy).device
        points.append({"n": n, "read_s": r.median / steps, "write_s": w.median / steps,
                       "read_s_ci": [r.ci_low / steps, r.ci_high / steps],
                       "write_s_ci": [w.ci_low / steps, w.ci_high / steps]})
    firsts = [p for p in points if p["n"] == 1]
    base = {"n": 1}
    for key in ("read_s", "write_s"):
        base[key] = float(np.median([p[key] for p in firsts]))
        base[key + "_ci"] = [min(p[key + "_ci"][0] for p in firsts), max(p[key + "_ci"][1] for p in firsts)]
    points = [base] + [p for p in points if p["n"] != 1]
    result: dict[str, Any] = {"points": points, "array_bytes": slots * 64, "steps": steps,
                              "n1_blocks": firsts}
    result.update(_fit_entries(points, "read_s", "read_s", "read_step_s",
                               "dependent reads (pointer chase from a random start) on cold 64-byte lines"))
    result.update(_fit_entries(points, "write_s", "write_s", "write_step_s",
                               "writes to pseudo-random cold 64-byte lines"))
    # cached read: the same chase inside a first-level-cache-sized array, warmed by the warm-up launches
    # (the sweep's kernel: from work-item 0 at offset 0 it starts at line 0 whatever SLOTS is)
    small, _ = workspace.cycle(16 << 10, keep=True)
    many = steps * 16
    t = time_launch(backend, chase, (1,), (1,), [small, np.int32(many), np.uint32(1), out, never, np.uint32(0)],
                    bench(False, 0.2, warmup=2)).device
    cached = t.median / many
    method = "dependent reads of addresses already read (16 KiB chase, warmed); event time / steps"
    floor = 1.0 / clock_hz if clock_hz else 0.0
    result["cached_read_s"] = (entry(cached, "s", method, (t.ci_low / many, t.ci_high / many))
                               if cached > floor else
                               failed("s", method, f"{cached:.3g} s is below one clock cycle ({floor:.3g} s)"))
    return result
