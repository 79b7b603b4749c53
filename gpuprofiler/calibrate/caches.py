"""Cache levels from a latency-versus-working-set curve: the plateaus of the curve.

A plateau is a run of working sets whose latency rises by less than 20% from one size
to the next and by less than 40% over the whole run; transitions between plateaus are
the knees. Each plateau but the last is a cache level; past the last one is memory.
Levels are named by :func:`level_names`: L1, L2, L3 on a CPU; on a GPU, which has no L3,
the plateau after L2 is "L2 far" (the far partition of a partitioned L2, as on the H100).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.profile.file import entry, failed


@dataclass
class Level:
    size_bytes: int
    latency_s: float
    points: int


@dataclass
class Levels:
    caches: list[Level] = field(default_factory=list)
    memory_latency_s: float | None = None
    boundaries: list[int] = field(default_factory=list)


def plateaus(latencies, step_ratio: float = 1.2, span_ratio: float = 1.4, min_points: int = 2) -> list[tuple[int, int]]:
    """Maximal runs [i, j) where each step rises less than ``step_ratio`` and the run less than ``span_ratio``."""
    lat = np.asarray(latencies, dtype=float)
    runs, i = [], 0
    while i < len(lat):
        j = i + 1
        while (j < len(lat) and lat[j] < lat[j - 1] * step_ratio
               and max(lat[i:j + 1]) < min(lat[i:j + 1]) * span_ratio):
            j += 1
        if j - i >= min_points:
            runs.append((i, j))
        i = j
    return runs


def _crossing(sizes: np.ndarray, lat: np.ndarray, i: int, j: int, level: float) -> float:
    """Working-set size (log-interpolated) where the curve first rises through ``level`` in [i, j]."""
    for k in range(i, j):
        if lat[k] <= level < lat[k + 1]:
            f = (np.log(level) - np.log(lat[k])) / (np.log(lat[k + 1]) - np.log(lat[k]))
            return float(np.exp(np.log(sizes[k]) + f * (np.log(sizes[k + 1]) - np.log(sizes[k]))))
    return float(sizes[i])


def merge_close(lat: np.ndarray, runs: list[tuple[int, int]], ratio: float) -> list[tuple[int, int]]:
    """Join neighbouring plateaus whose latencies differ by less than ``ratio`` (one level with a sub-step)."""
    merged: list[list[int]] = []
    for i, j in runs:
        if merged and np.median(lat[i:j]) < np.median(lat[merged[-1][0]:merged[-1][1]]) * ratio:
            merged[-1][1] = j
        else:
            merged.append([i, j])
    return [(i, j) for i, j in merged]


def detect_levels(sizes, latencies, step_ratio: float = 1.2, span_ratio: float = 1.4,
                  min_points: int | None = None, level_ratio: float = 1.5) -> Levels:
    """Cache levels from a latency curve (sizes increasing): every plateau but the last is a cache.

    A cache's size is where the curve crosses half-way (geometric mean) between its plateau's
    latency and the next plateau's; its latency is its plateau's median. A plateau must span at
    least one doubling of the working set; plateaus less than ``level_ratio`` apart are one level. Past the last plateau is memory (the last point when
    the curve is still rising at the end).
    """
    sizes = np.asarray(sizes, dtype=float)
    lat = np.asarray(latencies, dtype=float)
    levels = Levels()
    if len(lat) < 2 or np.any(lat <= 0):
        return levels
    if min_points is None:
        per_octave = (len(sizes) - 1) / max(np.log2(sizes[-1] / sizes[0]), 1e-9)
        min_points = max(2, int(round(per_octave)) + 1)
    runs = merge_close(lat, plateaus(lat, step_ratio, span_ratio, min_points), level_ratio)
    if not runs:
        levels.memory_latency_s = float(lat[-1])
        return levels
    ends_flat = runs[-1][1] == len(lat)
    medians = [float(np.median(lat[i:j])) for i, j in runs]
    memory = medians[-1] if ends_flat else float(lat[-1])
    caches = runs[:-1] if ends_flat else runs
    for k, (i, j) in enumerate(caches):
        upper = medians[k + 1] if k + 1 < len(runs) else memory
        if upper <= medians[k] * step_ratio:
            continue
        end = runs[k + 1][0] if k + 1 < len(runs) else len(lat) - 1
        size = _crossing(sizes, lat, j - 1, end, float(np.sqrt(medians[k] * upper)))
        levels.caches.append(Level(int(size), medians[k], j - i))
        levels.boundaries.append(int(size))
    levels.memory_latency_s = memory
    return levels


DEVICE_TYPES = ("gpu", "cpu", "accelerator", "other")
GPU_NAMES = ("L1", "L2", "L2 far")


def level_names(count: int, device_type: str) -> list[str]:
    """Names of ``count`` cache levels, smallest first: L1, L2, L3, ... except on a GPU, where the plateau
    after L2 is "L2 far" (GPUs have no L3; the H100's second L2 plateau is its far L2 partition) and any
    further one is only numbered ("level 4")."""
    kind = str(device_type).strip().lower()
    if kind not in DEVICE_TYPES:
        raise UserError(f"unknown device type {device_type!r}: expected one of {', '.join(DEVICE_TYPES)}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise UserError(f"the number of cache levels must be a non-negative integer, got {count!r}")
    if kind == "gpu":
        return [GPU_NAMES[i] if i < len(GPU_NAMES) else f"level {i + 1}" for i in range(count)]
    return [f"L{i + 1}" for i in range(count)]


def cache_figures(latency: dict, clock_hz: float | None, *, device_type: str) -> tuple[list[dict], dict]:
    """The profile's ``caches`` and ``memory.dram_latency_s`` from the latency microbenchmark's result: the
    levels of its curve (points that failed, below one cycle, left out), named for ``device_type``."""
    bad = {p["bytes"] for p in latency.get("latency_curve_failed", [])}
    good = [p for p in latency["latency_curve"] if p["bytes"] not in bad]
    levels = detect_levels([p["bytes"] for p in good], [p["latency_s"] for p in good])
    names = level_names(len(levels.caches), device_type)
    caches = [{"level": i + 1, "name": names[i], "size_bytes": lv.size_bytes, "latency_s": lv.latency_s,
               "latency_cycles": lv.latency_s * clock_hz if clock_hz else None, "points": lv.points}
              for i, lv in enumerate(levels.caches)]
    dram = (entry(levels.memory_latency_s, "s", f"latency past the last cache level; {latency['pattern']}")
            if levels.memory_latency_s else failed("s", "pointer chase", "no plateau past the last cache level"))
    return caches, dram
