"""Address translation: what a load costs when its page is not in the TLB, and how many pages the TLB reaches.

One work-item reads P cache lines in a loop of independent loads (their sum; the addresses come from an index
array, read in order), in two layouts over the same number of lines: packed (P consecutive lines, P / 64 pages)
and spread (one line in each of P 4 KiB pages, the pages in random order, a random line of each, so that the
lines fill the caches' sets as the packed ones do). The lines are the same in number, so the caches see the same
footprint; the spread layout's extra time per access is translation. Per access: (T(2r) - T(r)) / (P r) for r
and 2r passes over the lines, which cancels launch and set-up. Swept over P = 64 .. 16384 pages.

The reach is the largest P whose spread loads cost at most :data:`REACH_RATIO` x the packed ones (and at most
:data:`REACH_FLOOR_S` more); the miss cost is the spread layout's extra time per access at the largest P, where
every access misses the TLB (each load a page walk), with the loads independent as in a column walk: what a core
overlapping its walks pays per access, not one walk's latency. On this VM's Zen 5 (PoCL): 0.33 ns packed,
0.37 ns spread at 2048 pages, 0.52 at 4096, 1.8-2.6 ns at 8192-16384 pages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuprofiler.measure.engine import time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.microbench.common import Progress, say
from gpuprofiler.microbench.source import build
from gpuprofiler.profile.file import entry, failed

PAGE_BYTES = 4096
LINE_BYTES = 64
PAGES = tuple(1 << k for k in range(6, 15))  # 64 .. 16384 pages
ACCESSES = 1 << 17  # loads per pass set: passes r = ACCESSES // P
REACH_RATIO = 1.25
REACH_FLOOR_S = 0.1e-9

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


def reach_and_cost(points: list[dict]) -> tuple[int | None, float | None]:
    """The largest page count whose spread access costs at most REACH_RATIO x (and REACH_FLOOR_S over) the packed
    one, every smaller count too; and the extra per access at the largest count (None where it is not positive)."""
    reach = None
    for p in points:
        if p["spread_s"] > max(REACH_RATIO * p["packed_s"], p["packed_s"] + REACH_FLOOR_S):
            break
        reach = p["pages"]
    extra = points[-1]["spread_s"] - points[-1]["packed_s"] if points else 0.0
    return reach, (extra if extra > 0 else None)


def measure(backend: Any, quick: bool = False, progress: Progress = None,
            rng: np.random.Generator | None = None) -> dict[str, Any]:
    rng = rng or np.random.default_rng(5)
    say(progress, f"tlb: independent loads over {PAGES[0]} .. {PAGES[-1]} lines, packed and one per 4 KiB page")
    kernel = build(backend, SOURCE, "sweep")
    out = backend.alloc(64)
    buf = backend.alloc(PAGES[-1] * PAGE_BYTES)
    policy = bench(quick, 0.1, 0.02)
    never = np.uint32(2**32 - 1)
    points = []
    for pages in PAGES:
        reps = max(1, ACCESSES // pages)
        row: dict[str, Any] = {"pages": pages}
        for name, words in layouts(pages, rng).items():
            idx, _ = backend.to_device(words)

            def timed(r: int) -> float:
                args = [buf, idx, np.int32(pages), np.int32(r), out, never]
                return time_launch(backend, kernel, (1,), (1,), args, policy).device.model

            row[f"{name}_s"] = (timed(2 * reps) - timed(reps)) / (pages * reps)
        points.append(row)
    method = (f"one work-item, independent loads of P lines (P = {PAGES[0]} .. {PAGES[-1]}), packed into P/64 pages or "
              f"one per 4 KiB page; (T(2r) - T(r)) / (P r) for r and 2r passes; the modelling figure of each")
    reach, cost = reach_and_cost(points)
    result: dict[str, Any] = {"curve": points, "page_bytes": PAGE_BYTES, "method": method}
    if any(p["packed_s"] <= 0 or p["spread_s"] <= 0 for p in points):
        bad = "a time per access at or below zero (another tenant slowed the shorter run)"
        result["reach_pages"] = failed("pages", method, bad)
        result["miss_s"] = failed("s", method, bad)
        return result
    result["reach_pages"] = (entry(reach, "pages", f"{method}: the largest P whose spread loads cost at most "
                                   f"{REACH_RATIO}x the packed ones") if reach and reach < PAGES[-1] else
                             failed("pages", method, f"no knee within {PAGES[0]} .. {PAGES[-1]} pages"))
    result["miss_s"] = (entry(cost, "s", f"{method}: spread minus packed per access at {PAGES[-1]} pages, every load "
                              "a TLB miss") if cost and result["reach_pages"]["status"] == "ok" else
                        failed("s", method, "no access past the TLB's reach cost more than a packed one"))
    return result
