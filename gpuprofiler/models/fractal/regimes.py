"""Where the small sizes and the targets stand against the device's regime boundaries (cache sizes, the
device's concurrency), read from the hardware profile: warnings for targets the fit cannot see past, and
small sizes chosen on the target's side of the last-level cache."""

from __future__ import annotations

import numpy as np

from gpuprofiler.profile.hardware import view


def cache_boundaries(profile) -> list[tuple[str, float]]:
    """Cache sizes that bound a regime: the latency knees, and the streaming knee (the last-level cache as a
    stream sees it, which on CPUs with a large shared cache lies well past the latency knee)."""
    hw = view(profile)
    out = [(f"L{c.level} cache ({_bytes(c.size_bytes)}, latency knee)", float(c.size_bytes)) for c in hw.caches]
    stream = hw.figure("bandwidth.streaming_llc_bytes").value
    if stream:
        out.append((f"the last-level cache as streams see it ({stream / 2**20:.0f} MiB)", float(stream)))
    return out


def regime_warnings(small: list[int], targets: list[int], working_set, work_items, profile) -> list[str]:
    """Warnings for targets on the other side of a cache size or of the device's concurrency than the small sizes."""
    if profile is None:
        return []
    out = []
    bounds = [(name, size, working_set) for name, size in cache_boundaries(profile)]
    conc = view(profile).figure("concurrency.work_items").value
    if conc:
        bounds.append((f"the device's concurrency ({conc:.0f} work-items at once)", float(conc), work_items))
    for name, limit, measure in bounds:
        if measure is None:
            continue
        try:
            small_vals = [measure(s) for s in small]
        except Exception:  # noqa: BLE001 - a size the item cannot evaluate
            continue
        if any(v is None for v in small_vals):
            continue
        small_min, small_max = min(small_vals), max(small_vals)
        what = "working set" if measure is working_set else "work-items"
        for t in targets:
            tv = measure(t)
            if tv is None:
                continue
            if tv > limit >= small_max:
                out.append(f"target {t}: its {what} ({_fmt(tv, what)}) exceeds {name}, which the small sizes "
                           f"(at most {_fmt(small_max, what)}) stay within: expect a regime change the fit cannot see")
            elif tv > limit and small_min <= limit < small_max:
                out.append(f"target {t}: the small sizes' {what} ({_fmt(small_min, what)} .. "
                           f"{_fmt(small_max, what)}) straddles {name}, which the target ({_fmt(tv, what)}) is "
                           "past: the fit mixes two regimes and its slope need not hold past the boundary")
    return out


def _bytes(v: float) -> str:
    return f"{v / 2**20:.1f} MiB" if v >= 2**20 else f"{v / 2**10:.0f} KiB"


def _fmt(v: float, what: str) -> str:
    return _bytes(v) if what == "working set" else f"{v:.0f}"


def hardware_sizes(target: int, working_set, profile, count: int = 6, ratio: float = 8.0,
                   margin: float = 1.5) -> tuple[list[int], list[str]]:
    """Small sizes up to target/ratio whose working sets are on the target's side of the last-level cache."""
    notes = []
    hi = max(2, int(target / ratio))
    bounds = cache_boundaries(profile) if profile is not None else []
    lo = max(1, hi // 16)
    if bounds and working_set is not None:
        llc = max(size for _, size in bounds)
        if working_set(target) > llc:
            n = 1
            while working_set(n) <= margin * llc and n < target:
                n *= 2
            # bisect down to the smallest size past margin * LLC
            a, b = n // 2, n
            while b - a > 1:
                mid = (a + b) // 2
                if working_set(mid) > margin * llc:
                    b = mid
                else:
                    a = mid
            lo = b
            if lo * 2 > hi:
                hi = max(hi, lo * 4)
                notes.append(f"to keep the small sizes past the last-level cache ({llc / 2**20:.1f} MiB) the largest "
                             f"small size is {hi}, only {target / hi:.1f}x below the target")
    grid = np.unique(np.round(np.geomspace(lo, hi, count)).astype(int))
    return [int(g) for g in grid], notes
