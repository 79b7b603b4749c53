"""The cache-miss law's memory time: the lines a kernel's predicted last-level misses bring from DRAM.

At size n the kernel's address stream is sampled (:mod:`gpuprofiler.models.cache.analysis`): the last level misses
M(n) lines per launch, which DRAM delivers at the profile's read bandwidth, so memory takes M(n) * line / B seconds.
Misses at scattered lines (a gather's ``x[cols[p]]``, a column walk: each new line in another page than the last;
:meth:`~gpuprofiler.models.cache.analysis.CacheAnalysis.scattered_share`) cost a scattered read each
(:func:`~gpuprofiler.models.costs.scattered`, as in the max-plus model): what the profile measured for a random read
far beyond the caches (``bandwidth.gather_s``), else a GPU's step of concurrent cold reads (``memory.read_step_s``),
else a line at the bandwidth. On this VM's CPU that is twice a line at the stream's bandwidth: the misses a core
keeps in flight, not the bandwidth, bound them.
The law (:class:`~gpuprofiler.models.fractal.laws.CacheMissLaw`) sets that beside the work law: T = c0 + max(k
W(n), memory(n)), c0 and k fitted on the small sizes. Where the target's accesses start missing the last level
while the small sizes' hit (a gathered vector or a working set leaving the cache), the memory time overtakes the
work the small sizes were fitted to.

The private levels' misses are analysed too (:func:`regime_costs` names a level whose miss ratio jumps at the
target: a power-of-two stride crowding its sets, with the set geometry the operating system reports). A load
that misses the L1 and hits the L2 the core hides behind arithmetic and other loads; the loads that miss a later
private level take the cache behind it as long as its bandwidth needs for their lines (:meth:`MissCost.served_s`,
a bound beside the work: matmul_naive's column at n = 512, 768, 1152, 1280 and 1536 on this VM's 8-way L2, 0.84 to
1.35 ns per n^3 against 0.68-0.72 beside them). A store that
misses a line it held before stalls the core, since stores commit in order: those are priced at the next level's
latency, one core's one after another (:meth:`MissCost.stall_s`, added to the law's time; a transpose at 8192^2
against 8000^2 on this VM's PoCL: 6.3e7 such stores x 2.2 ns / 2 cores = 69 ms predicted, 75 ms measured).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.models.cache.analysis import LLC_SPREAD, CacheAnalysis, analyse, cache_levels
from gpuprofiler.models.costs import (
    cache_served,
    level_bandwidths,
    llc_level,
    scattered,
    scattered_served,
    store_stalls,
    tlb_walks,
)
from gpuprofiler.models.maxplus.builder import TooLarge
from gpuprofiler.profile.hardware import view

BUDGET = 1 << 20  # accesses per window: enough for the private levels, a fifth of the time of `gpuprofiler cache`
WINDOWS = 2


def _last_level(a: CacheAnalysis, capacity: float | None):
    """The analysis's last level, or that level at one of the candidate capacities."""
    return a.alternates.get(float(capacity), a.levels[-1]) if capacity is not None else a.levels[-1]


@dataclass
class MissCost:
    """``cost(n)``: seconds of the launch's memory traffic (its levels' misses) from sampled reuse distances at size
    n; every analysis kept (:attr:`analyses`) for the warnings."""

    item: Any
    profile: Any
    bandwidths: list[float]
    gather_s: float | None = None  # seconds per scattered line's miss (None: a line at the bandwidth)
    capacities: tuple[float, ...] = ()  # the last level's candidate capacities, the calibrated one first
    analyses: dict[int, CacheAnalysis] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    # a work-item's accesses counted at one size, its work there, and the windows' mean over it: following a
    # work-item through its loops costs as much as a window (covariance: 72 of 90 s of its nine analyses), so the
    # other sizes take the count in proportion to the spec's work per work-item
    probe: tuple[float, float, float] | None = None
    too_large: list[int] = field(default_factory=list)  # sizes whose graph passed the builder's limit

    def analysis(self, n: int) -> CacheAnalysis | None:
        n = self.item.valid_size(n)
        if n not in self.analyses and n not in self.failed:
            smaller = [m for m in self.too_large if m < n]
            if smaller:  # a graph too large to follow at a smaller size is larger here: not built again to see
                self.failed[n] = self.failed[max(smaller)]
                return None
            try:
                inst = self.item.instantiate(n)
                work = _work_per_item(inst)
                guess = None if self.probe is None or not work else self.probe[0] * work / self.probe[1]
                a = self._analyse(inst, guess)
                if guess is not None and not 1 / 1.5 <= _followed(a, inst) / guess / self.probe[2] <= 1.5:
                    a = self._analyse(inst, None)  # the work did not say how the accesses grow: count them
                if a.probed and work and _followed(a, inst) > 0:
                    self.probe = (a.per_item, work, _followed(a, inst) / a.per_item)
                self.analyses[n] = a
            except TooLarge as exc:
                self.failed[n] = str(exc)
                self.too_large.append(n)
            except (UserError, ValueError) as exc:
                self.failed[n] = str(exc)
        return self.analyses.get(n)

    def _analyse(self, inst, per_item: float | None) -> CacheAnalysis:
        return analyse(inst, self.profile, budget=BUDGET, count=WINDOWS, last_sizes=tuple(self.capacities[1:]),
                       per_item=per_item)

    def memory_s(self, n: float, capacity: float | None = None) -> float:
        """Seconds the launch's last-level misses keep DRAM busy (its lines at the profile's read bandwidth); with
        ``capacity`` (one of :attr:`capacities`), the last level's misses at that capacity."""
        a = self.analysis(n)
        if a is None or not a.levels:
            return math.nan
        last = _last_level(a, capacity)
        line_s = a.order.line_bytes / float(self.bandwidths[-1] or math.nan)
        scattered_share = a.scattered_share(last) if self.gather_s else 0.0
        return last.misses * ((1.0 - scattered_share) * line_s + scattered_share * max(self.gather_s or 0.0, line_s))

    def __call__(self, n: float) -> float:
        return self.memory_s(n)

    def served_s(self, n: float, capacity: float | None = None) -> float:
        """Seconds a later cache level needs to deliver the loads that miss a CPU's private level
        (:func:`~gpuprofiler.models.costs.cache_served`); 0 where the analysis failed. ``capacity``: as in
        :meth:`memory_s`."""
        a = self.analysis(n)
        if a is None or not a.levels:
            return 0.0
        last = _last_level(a, capacity)
        return cache_served(self.profile, a, last, self.bandwidths)[0]

    def scattered_s(self, n: float, capacity: float | None = None) -> float:
        """Seconds the loads that miss a core's last private level at scattered lines add to the work while the
        shared cache serves them (:func:`~gpuprofiler.models.costs.scattered_served`); 0 where the analysis failed.
        ``capacity``: as in :meth:`memory_s`."""
        a = self.analysis(n)
        if a is None or not a.levels:
            return 0.0
        return scattered_served(self.profile, a, _last_level(a, capacity))[0]

    def tlb_s(self, n: float) -> float:
        """Seconds the cores spend on page walks (:func:`~gpuprofiler.models.costs.tlb_walks`: a column walk over
        more pages than the TLB holds); 0 where the analysis failed or the profile has no TLB figures."""
        a = self.analysis(n)
        return tlb_walks(self.profile, a)[0] if a is not None else 0.0

    def stall_s(self, n: float) -> float:
        """Seconds the cores wait on stores re-missing a private level (:func:`~gpuprofiler.models.costs.store_stalls`:
        a transpose's stores crowding one L1 set at a power-of-two side); 0 where the analysis failed."""
        a = self.analysis(n)
        return store_stalls(self.profile, a.levels)[0] if a is not None else 0.0


def _work_per_item(inst) -> float | None:
    """The spec's flops (else bytes) per work-item at an instance; None where it declares neither."""
    items = math.prod(int(g) for g in inst.global_size)
    for work in (inst.flops, inst.bytes):
        if work and work > 0 and items > 0:
            return float(work) / items
    return None


def _followed(a: CacheAnalysis, inst) -> float:
    """The mean global accesses per work-item over the windows an analysis followed."""
    return a.accesses / max(math.prod(int(g) for g in inst.global_size), 1)


def miss_cost(item, profile) -> MissCost | None:
    """The cache-miss law's cost for a kernel spec on the profile's device, or None where it cannot be had (no
    cache levels or bandwidth in the profile, an app)."""
    from gpuprofiler.workloads.spec import KernelSpec

    if not isinstance(item, KernelSpec) or profile is None:
        return None
    bws = level_bandwidths(profile)
    if not bws:
        return None
    gather = scattered(profile, float(bws[-1]))
    return MissCost(item, profile, bws, gather.value if gather.ok and gather.value > 0 else None,
                    last_level_capacities(profile))


def last_level_capacities(profile, steps: int = 3) -> tuple[float, ...]:
    """A CPU's last level is shared with the host's other cores and tenants: the share this device gets moves with
    their load (this VM's L3 knee measured 11-25 MiB of 32 in calibrations minutes apart). Candidates from the
    calibrated capacity to the one the driver reports, geometrically spaced, the calibrated one first: the
    cache-miss law keeps the one that best predicts its small sizes left out (what the sweep saw), the largest where
    they cannot tell. Elsewhere (a GPU's L2 is the device's own) the calibrated one alone."""
    hw = view(profile)
    levels = cache_levels(profile)
    if not levels:
        return ()
    calibrated = float(levels[-1][1])
    reported = float(hw.reported_llc_bytes or 0.0)
    if hw.kind != "cpu" or reported <= LLC_SPREAD * calibrated:
        return (calibrated,)
    return tuple(float(calibrated * (reported / calibrated) ** (k / (steps - 1))) for k in range(steps))


def _signed(seconds: float) -> str:
    return f"{seconds * 1e3:+.3g} ms" if abs(seconds) < 1 else f"{seconds:+.3g} s"


def regime_costs(cost: MissCost, small: list[int], target: int, law_gap_s: float | None) -> list[str]:
    """A warning per level whose miss ratio at the target is well past the small sizes' (what the crossing costs:
    ``law_gap_s``, the cache-miss law's prediction minus the work law's)."""
    at_target = cost.analysis(target)
    seen = [cost.analysis(s) for s in small]
    seen = [a for a in seen if a is not None]
    if at_target is None or not seen:
        return []
    out = []
    for i, lv in enumerate(at_target.levels):
        before = max(a.levels[i].miss_ratio for a in seen if i < len(a.levels))
        if lv.miss_ratio > max(2 * before, before + 0.05):
            arrays = ", ".join(n for n, s in sorted(lv.by_array.items(), key=lambda x: -x[1]) if s > 0.2)
            if i < len(at_target.levels) - 1:
                stall, _ = store_stalls(cost.profile, at_target.levels, only=i)
                served, _ = cache_served(cost.profile, at_target, bandwidths=getattr(cost, "bandwidths", None), only=i)
                costs = [f"{_signed(stall)} of stores waiting for the next level"] if stall > 0 else []
                if i == llc_level(at_target.levels):
                    added, _ = scattered_served(cost.profile, at_target)
                    if added > 0:
                        costs.append(f"{_signed(added)} of loads at scattered lines the shared cache serves")
                if served > 0:
                    costs.append(f"{served * 1e3:.3g} ms for the next level to serve its loads"
                                 + (f", {_signed(law_gap_s)} over the work law" if law_gap_s is not None else ""))
                gap = (": " + ", ".join(costs) if costs else
                       ": not priced (a load's miss the core hides behind other work)")
            else:
                gap = f": {_signed(law_gap_s)} over the work law" if law_gap_s is not None else ""
            out.append(f"target {target}: {lv.name} miss ratio {before:.2f} at the small sizes -> {lv.miss_ratio:.2f} "
                       f"at the target ({arrays or 'several arrays'}){gap}")
    return out


Cost = Callable[[float], float]
