"""When sampling stops, and every timing default of the package in one place.

The presets are what each command measures with; the command line's options (``--budget``,
``--warmup``, ...) start from them. Microbenchmarks pick their own budgets with :func:`bench`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

# Warm-up time for a measurement that opens a sweep or a run, after which the device may have idled.
SWEEP_WARMUP_S = 0.1


@dataclass
class TimingPolicy:
    """When to stop sampling: at least ``min_samples``, then as soon as the 95% interval of ``stop_on`` (the
    modelling figure, or the median for a benchmark that reads medians) is within ``rel_ci`` of it, or when
    ``budget_s`` of sampling is spent (or ``max_samples`` reached)."""

    warmup: int = 2
    warmup_s: float = 0.0  # and at least this long: a GPU idling at a low clock needs a while to reach boost
    min_samples: int = 5
    max_samples: int = 2000
    rel_ci: float = 0.02
    budget_s: float = 2.0
    confidence: float = 0.95
    stop_on: str = "model"  # "model": the modelling figure (measure.stats.MODEL_STATISTIC); "median"
    # a measurement in the device's worker that sends nothing (no record, no finished size) for this long is
    # stopped as hung: a kernel that never ends; None: wait for ever
    timeout_s: float | None = 600.0
    # a kernel spec's sampling split into this many blocks, each on buffers allocated afresh: where the pages land
    # (which cache sets a column walk crowds) is drawn once per allocation and can move a kernel's time 30%
    placements: int = 1
    # a validate run's sampling of each size split into this many visits, every item visited once before any is
    # visited again, so that an item's visits lie minutes apart: a shared VM's speed moves over minutes (the fast
    # runs of one visit reproduce within 10% about half the time, of three about four times in five; README)
    visits: int = 1

    def per_visit(self, visit: int = 0) -> "TimingPolicy":
        """The policy of visit ``visit`` (0-based) of ``visits``: its share of the budget, of the placements and of
        the minimum samples (5 over 3 visits: 2, 2, 1); a later visit without warm-up (the kernels are built, the
        device busy from the item before)."""
        k = max(1, self.visits)
        if k == 1:
            return self
        return self.but(budget_s=self.budget_s / k, min_samples=max(1, -(-(self.min_samples - visit) // k)),
                        max_samples=max(2, self.max_samples // k), placements=max(1, -(-self.placements // k)),
                        visits=1, **({"warmup": 0, "warmup_s": 0.0} if visit else {}))

    def but(self, **changes) -> "TimingPolicy":
        """A copy with some fields changed."""
        return replace(self, **changes)


# `gpuprofiler measure`
MEASURE = TimingPolicy(warmup=2, warmup_s=SWEEP_WARMUP_S, min_samples=5, budget_s=2.0, rel_ci=0.02, placements=3)
# the small sizes and checked targets of `gpuprofiler extrapolate`
SWEEP = MEASURE.but(budget_s=1.0)
# `gpuprofiler validate` and `validate --quick`
VALIDATE = TimingPolicy(warmup=2, warmup_s=SWEEP_WARMUP_S, min_samples=5, budget_s=1.0, placements=3, visits=3)
VALIDATE_QUICK = TimingPolicy(warmup=1, warmup_s=SWEEP_WARMUP_S, min_samples=5, budget_s=0.25, placements=3,
                              visits=3)


def fixed(n: int, warmup: int = 0) -> TimingPolicy:
    """Exactly ``n`` samples after ``warmup`` runs (for benchmarks that take a minimum or pair their runs)."""
    return TimingPolicy(warmup=warmup, min_samples=n, max_samples=n, rel_ci=0.0, budget_s=float("inf"))


def bench(quick: bool, budget_s: float, quick_budget_s: float | None = None, warmup: int = 1,
          min_samples: int = 5) -> TimingPolicy:
    """A microbenchmark's policy: ``budget_s`` of sampling per point (``quick_budget_s`` with ``--quick``)."""
    budget = quick_budget_s if quick and quick_budget_s is not None else budget_s
    return TimingPolicy(warmup=warmup, min_samples=min_samples, budget_s=budget, stop_on="median")


SHORTEST_S, LONGEST_S = 1e-12, 86_400.0  # a device time outside a picosecond .. a day is no measurement


def device_time(x: Any) -> bool:
    """Whether ``x`` can be a measured device time: a number (not a bool) from :data:`SHORTEST_S` to
    :data:`LONGEST_S` (NaN compares false; a huge integer is compared, never converted)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and SHORTEST_S <= x <= LONGEST_S
