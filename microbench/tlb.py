"""Address translation: what a load costs when its page is not in the TLB, and how many pages the TLB reaches.

One work-item reads P cache lines in a loop of independent loads (their sum; the addresses come from an index
array, read in order), in two layouts over the same number of lines: packed (P consecutive lines, P / 64 pages)
and spread (one line in each of P 4 KiB pages, the pages in random order, a random line of each, so that the
lines fill the caches' sets as the packed ones do). The lines are the same in number, so the caches see the same
footprint; the spread layout's extra time per access is translation. Per access: (T(2r) - T(r)) / (P r) for r
and 2r passes over the lines, which cancels launch and set-up. Swept over P = 64 .. 16384 pages.

The miss cost is the spread layout's extra time per access at the largest P, where every access misses the TLB
(each load a page walk), with the loads independent as in a column walk: what a core overlapping its walks pays
per access, not one walk's latency. The reach is where the extra first reaches half that (log-interpolated, as a
cache's size is where its latency curve crosses half-way): a set-associative TLB of E entries already misses on
some of E random pages. The buffer is written before it is read: pages only ever read may all map one shared zero
page. On a Zen 4 VM's PoCL (`scripts/tlb_written.py`, both buffers in the same rounds, two runs): 0.6 ns packed;
spread loads 3.5-3.9 ns more at 4096 pages and 6.2 at 16384 written, 1.0 and 3.1-3.2 never written.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuprofiler.measure.engine import time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.microbench.common import Progress, say, written_buffer
from gpuprofiler.microbench.source import build
from gpuprofiler.profile.file import entry, failed

PAGE_BYTES = 4096
LINE_BYTES = 64
PAGES = tuple(int(round(2 ** (k / 2))) for k in range(12, 29))  # 64 .. 16384 pages, half-octave steps
ACCESSES = 1 << 20  # loads per pass set: passes r = ACCESSES // P (a millisecond: launch jitter stays small beside it)
ROUNDS = 3  # the four timings of a page count alternate this often; each keeps its fastest (a slow mode spans rounds)

SOURCE = r"""
KERNEL void sweep(GLOBAL const u32 *buf, GLOBAL const u32 *idx, int count, int reps, GLOBAL u32 *out, u32 never) {
    u32 s = 0;
    for (int r = 0; r < reps; ++r)
        for (int k = 0; k < count; ++k) s += buf[idx[k]];
    if (s == never) out[0] = s;
}
"""


def layouts(pages: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Word offsets of ``pages`` lines: packed (consecutive lines, random order) and spread (one line per page, the
    pages in random order, a random line of each)."""
    words_per_line, lines_per_page = LINE_BYTES // 4, PAGE_BYTES // LINE_BYTES
    packed = rng.permutation(pages).astype(np.uint32) * np.uint32(words_per_line)
    spread = (rng.permutation(pages).astype(np.uint32) * np.uint32(lines_per_page)
              + rng.integers(0, lines_per_page, pages).astype(np.uint32)) * np.uint32(words_per_line)
    return {"packed": packed, "spread": spread}


def per_access(backend: Any, kernel: Any, buf: Any, out: Any, offsets: dict[str, np.ndarray], policy: Any,
               rounds: int = ROUNDS) -> dict[str, float]:
    """Seconds per load of each layout (word offsets into ``buf``, the same count each): (T(2r) - T(r)) / (P r) for
    r and 2r passes, which cancels launch and set-up; every layout and pass count in alternation ``rounds`` times,
    each T the fastest modelling figure."""
    pages = len(next(iter(offsets.values())))
    reps = max(1, ACCESSES // pages)
    idx = {name: backend.to_device(np.asarray(words, np.uint32))[0] for name, words in offsets.items()}
    best = {(name, r): math.inf for name in idx for r in (reps, 2 * reps)}
    never = np.uint32(2**32 - 1)
    for k in range(rounds):
        for name, r in best:
            args = [buf, idx[name], np.int32(pages), np.int32(r), out, never]
            # the first round warms the lines and their pages; a later round's first run after the other layout is
            # one slow sample of five, above the 10th percentile
            timed = time_launch(backend, kernel, (1,), (1,), args, policy if k == 0 else policy.but(warmup=0))
            best[name, r] = min(best[name, r], timed.device.model)
    return {name: (best[name, 2 * reps] - best[name, reps]) / (pages * reps) for name in idx}


def reach_and_cost(points: list[dict]) -> tuple[float | None, float | None]:
    """The extra time per access at the largest page count (None where it is not positive), and the page count
    where the spread loads' extra first reaches half of it, log-interpolated (None where it never does short of
    the largest count)."""
    if not points:
        return None, None
    extra = [p["spread_s"] - p["packed_s"] for p in points]
    cost = extra[-1]
    if not cost > 0:
        return None, None
    half = cost / 2
    for i in range(1, len(points) - 1):
        if extra[i] >= half:
            lo, hi = max(extra[i - 1], 0.0), extra[i]
            f = (half - lo) / (hi - lo) if hi > lo else 0.0
            x0, x1 = math.log(points[i - 1]["pages"]), math.log(points[i]["pages"])
            return float(math.exp(x0 + f * (x1 - x0))), cost
    return None, cost


def measure(backend: Any, quick: bool = False, progress: Progress = None,
            rng: np.random.Generator | None = None) -> dict[str, Any]:
    rng = rng or np.random.default_rng(5)
    say(progress, f"tlb: independent loads over {PAGES[0]} .. {PAGES[-1]} lines, packed and one per 4 KiB page")
    kernel = build(backend, SOURCE, "sweep")
    out = backend.alloc(64)
    buf = written_buffer(backend, PAGES[-1] * PAGE_BYTES)
    policy = bench(quick, 0.1, 0.02)
    points = []
    for pages in PAGES:
        per = per_access(backend, kernel, buf, out, layouts(pages, rng), policy)
        points.append({"pages": pages, **{f"{name}_s": value for name, value in per.items()}})
    method = (f"one work-item, independent loads of P lines (P = {PAGES[0]} .. {PAGES[-1]}), packed into P/64 pages or "
              f"one per 4 KiB page; (T(2r) - T(r)) / (P r) for r and 2r passes; each T the fastest modelling figure "
              f"of {ROUNDS} alternating rounds")
    reach, cost = reach_and_cost(points)
    result: dict[str, Any] = {"curve": points, "page_bytes": PAGE_BYTES, "method": method}
    if any(p["packed_s"] <= 0 or p["spread_s"] <= 0 for p in points):
        bad = "a time per access at or below zero (another tenant slowed the shorter run)"
        result["reach_pages"] = failed("pages", method, bad)
        result["miss_s"] = failed("s", method, bad)
        return result
    result["miss_s"] = (entry(cost, "s", f"{method}: spread minus packed per access at {PAGES[-1]} pages, every load "
                              "a TLB miss") if cost and reach else
                        failed("s", method, "no access past the TLB's reach cost more than a packed one"))
    result["reach_pages"] = (entry(reach, "pages", f"{method}: where the spread loads' extra first reaches half of "
                                   "miss_s (log-interpolated)") if reach and cost else
                             failed("pages", method, f"no knee within {PAGES[0]} .. {PAGES[-1]} pages"))
    return result
