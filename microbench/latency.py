"""Memory latency against working-set size, cache levels as knees, and local-memory latency.

One work-item chases pointers through a random cyclic permutation of 64-byte lines
(one 4-byte index per line) over working sets from 1 KiB up to 4x the last-level
cache (as far as the device's largest allocation allows). Latency per access is
(T(2s) - T(s)) / s for s and 2s steps, which cancels launch and loop set-up.
Every chase covers its whole cycle at least once, after one untimed pass over it, and
the two lengths run in alternation: both start from the same warm cache, so the
difference is steady-state accesses (a shorter chase from a random line found part of the
cycle cold in the short runs only, which read as latencies below zero). The figure is the
modelling one (fastest runs). On a shared host the last-level cache's share left to this
device moves with the neighbours' load, so the sizes near it are measured in several
passes spread in time, their samples pooled: the capacity the fastest kernel runs (the
models' figure) see.
Cache levels are found from this curve by :mod:`gpuprofiler.calibrate.caches`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuprofiler.measure.engine import Engine, time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.measure.stats import summarize
from gpuprofiler.microbench.common import Progress, Workspace, random_cycle, say
from gpuprofiler.microbench.source import build
from gpuprofiler.profile.file import entry, failed

LINE_WORDS = 16
PATTERN = ("one work-item; dependent loads over a random cyclic permutation of 64-byte lines, pages visited "
           "in random order and the lines of each page in random order (TLB misses cut 64-fold)")

SOURCE = r"""
#ifndef LOCAL_WORDS
#define LOCAL_WORDS 16
#endif
KERNEL void chase(GLOBAL const u32 *next, int steps, GLOBAL u32 *out, u32 never, u32 start) {
    u32 j = start;
    for (int k = 0; k < steps; ++k) j = next[j];
    if (j == never) out[0] = j;
}

KERNEL void chase_local(GLOBAL const u32 *next, int count, int steps, GLOBAL u32 *out, u32 never) {
    LOCAL_ARRAY(u32, buf, LOCAL_WORDS);
    for (int i = LID; i < count; i += LSIZE) buf[i] = next[i];
    BARRIER;
    if (LID == 0) {
        u32 j = 0;
        for (int k = 0; k < steps; ++k) j = buf[j];
        if (j == never) out[0] = j;
    }
}
"""


def sizes(max_bytes: int, quick: bool) -> list[int]:
    """Working sets from 1 KiB to ``max_bytes``: doublings, with half-steps unless quick."""
    out, k = [], 10.0
    while 2**k <= max_bytes:
        out.append(int(2**k) // 64 * 64)
        k += 1.0 if quick else 0.5
    return out


KNEE_PASSES = 3  # passes over the working sets from a sixteenth of the last-level cache to half its size
# (a shared L3's other tenants evict a chase's lines in spells: on a Zen 4 VM one day a 4 MiB chase read 8 ns in
# one pass of five and 44-137 ns in the rest, minutes on end; the passes are seconds apart, their fastest pooled).
# A chase of the whole reported size never fits beside the other tenants and was the longest of the passes
# (0.5-0.7 s each): in 28 quick calibrations on that VM the 32 MiB chase of a reported 32 MiB L3 read 28-70 ns a
# line, against the L3's 5-8
KNEE_LOW = 16


def _chase_samples(backend, kernel, buf, lines, out, steps, policy, rng) -> tuple[list[float], list[float]]:
    """Device times of chases of s and 2s steps in alternation, after one untimed pass over the cycle (which is
    the warm-up: the policy's warm-up rounds are not run); each launch starts from a random line of the cycle."""
    never = np.uint32(2**32 - 1)
    engine = Engine(policy.but(warmup=0, warmup_s=0.0))

    def run(s):
        count = [0]

        def once() -> float:
            count[0] += 1
            start = np.uint32(int(rng.integers(lines)) * LINE_WORDS)
            event = engine.launch_once(backend, kernel, (1,), (1,), [buf, np.int32(s), out, never, start])
            backend.finish()
            return event.seconds()
        return once

    run(lines)()
    a, b = engine.interleave([run(steps), run(2 * steps)])
    return a.device_s, b.device_s


def _latency(short: list[float], long: list[float], steps: int, confidence: float) -> tuple[float, float, float]:
    """Per-access latency (T(2s) - T(s)) / s from the modelling figures of the two chases, with its interval."""
    a, b = summarize(short, confidence), summarize(long, confidence)
    return ((b.model - a.model) / steps, (b.model_ci_low - a.model_ci_high) / steps,
            (b.model_ci_high - a.model_ci_low) / steps)


def chase_steps(lines: int, quick: bool) -> int:
    """Steps of the shorter chase: at least one whole pass over the cycle (a partial pass finds part of it
    cold, in the short chase more than in the long one), four over small cycles."""
    return int(max(min(max(4 * lines, 1 << 14), 1 << 16 if quick else 1 << 19), lines))


def measure(backend: Any, quick: bool = False, progress: Progress = None, llc_bytes: int | None = None,
            clock_hz: float | None = None, workspace: Workspace | None = None) -> dict[str, Any]:
    info = backend.info
    workspace = workspace or Workspace(backend)
    limit = int(info.extra.get("max_mem_alloc_bytes") or info.global_mem_bytes // 4)
    llc = llc_bytes or last_level_cache(info)
    top = min((2 if quick else 4) * llc, limit, (1 << 30) if quick else limit)
    ws = sizes(top, quick)
    kernel = build(backend, SOURCE, "chase", {"LOCAL_WORDS": local_words(backend)})
    out = backend.alloc(64)
    policy = bench(quick, 0.2, 0.05)
    say(progress, f"latency: pointer chase over {len(ws)} working sets, 1 KiB .. {top >> 20} MiB")
    knee = [n for n in ws if llc // KNEE_LOW <= n < llc]
    samples: dict[int, tuple[list[float], list[float]]] = {}
    cycle_lines: dict[int, int] = {}
    for nbytes in ws + knee * (KNEE_PASSES - 1):
        buf, lines = workspace.cycle(nbytes, keep=nbytes == ws[-1])
        short, long = _chase_samples(backend, kernel, buf, lines, out, chase_steps(lines, quick),
                                     policy.but(stop_on="model"), workspace.rng)
        pooled = samples.setdefault(nbytes, ([], []))
        pooled[0].extend(short)
        pooled[1].extend(long)
        cycle_lines[nbytes] = lines
    curve = []
    for nbytes in ws:
        lines = cycle_lines[nbytes]
        steps = chase_steps(lines, quick)
        lat, lo, hi = _latency(*samples[nbytes], steps, policy.confidence)
        curve.append({"bytes": int(lines * 64), "latency_s": lat, "interval": [lo, hi], "steps": steps,
                      "passes": KNEE_PASSES if nbytes in knee else 1})
    floor = 1.0 / clock_hz if clock_hz else 0.0
    good = [p for p in curve if p["latency_s"] > floor]
    result: dict[str, Any] = {
        "latency_curve": curve,
        "pattern": PATTERN,
        "llc_bytes_assumed": llc,
        "max_working_set_bytes": curve[-1]["bytes"] if curve else 0,
    }
    if len(good) < len(curve):
        result["latency_curve_failed"] = [{"bytes": p["bytes"], "reason": f"{p['latency_s']:.3g} s is below one "
                                           "cycle"} for p in curve if p not in good]
    result["local_memory"] = _local(backend, workspace.rng, out, policy, clock_hz)
    return result


def last_level_cache(info: Any) -> int:
    """The device's last-level cache size as the API reports it (for sizing the sweep only)."""
    return int(info.extra.get("l2_cache_bytes") or info.extra.get("global_mem_cache_bytes") or 8 << 20)


def local_words(backend: Any) -> int:
    """Words of the local-memory chase: half the local memory, at most 4096, a multiple of 16 (one define of the
    chase program, so that both chases build as one program: a build costs ~0.15 s on a fresh PoCL)."""
    words = min(4096, backend.info.local_mem_bytes // 4 // 2)
    return words - words % 16


def _local(backend, rng, out, policy, clock_hz) -> dict[str, Any]:
    words = local_words(backend)
    kernel = build(backend, SOURCE, "chase_local", {"LOCAL_WORDS": words})
    buf, _ = backend.to_device(random_cycle(words, rng, 1))
    never = np.uint32(2**32 - 1)
    steps = 1 << 16
    args = lambda s: [buf, np.int32(words), np.int32(s), out, never]  # noqa: E731
    a = time_launch(backend, kernel, (64,), (64,), args(steps), policy).device
    b = time_launch(backend, kernel, (64,), (64,), args(2 * steps), policy).device
    lat = (b.median - a.median) / steps
    method = f"one work-item chases a random cycle of {words} words in local memory; (T(2s) - T(s)) / s"
    floor = 1.0 / clock_hz if clock_hz else 0.0
    if lat <= floor:
        return {"latency_s": failed("s", method, f"{lat:.3g} s is below one cycle")}
    return {"latency_s": entry(lat, "s", method, ((b.ci_low - a.ci_high) / steps, (b.ci_high - a.ci_low) / steps)),
            "latency_cycles": entry(lat * clock_hz, "cycles", method) if clock_hz else None}
