"""The timing engine: warm up, then sample until the median's 95% interval is tight or the budget is spent.

Two figures are kept for every sample and named as such:
``device_s`` — the device's own event time of the operation (kernel only);
``host_s`` — the host round trip, enqueue to finish, measured with ``perf_counter``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from gpuprofiler.stats import Summary, summarize


# Warm-up time for a measurement that opens a sweep or a run, after which the device may have idled.
SWEEP_WARMUP_S = 0.1


@dataclass
class TimingPolicy:
    """When to stop sampling. Defaults follow the issue: >= 5 samples, 95% interval within 2%."""

    warmup: int = 2
    warmup_s: float = 0.0  # and at least this long: a GPU idling at a low clock needs a while to reach boost
    min_samples: int = 5
    max_samples: int = 2000
    rel_ci: float = 0.02
    budget_s: float = 2.0
    confidence: float = 0.95


@dataclass
class Timing:
    """Every raw sample of one measurement, with summaries and why sampling stopped."""

    device_s: list[float] = field(default_factory=list)
    host_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    stop_reason: str = ""
    policy: TimingPolicy = field(default_factory=TimingPolicy)

    @property
    def device(self) -> Summary:
        return summarize(self.device_s, self.policy.confidence)

    @property
    def host(self) -> Summary:
        return summarize(self.host_s, self.policy.confidence)

    @property
    def converged(self) -> bool:
        return self.stop_reason == "interval"


def sample(run_once: Callable[[], float], policy: TimingPolicy | None = None) -> Timing:
    """Time ``run_once`` (which returns the device seconds of one run and waits for it to finish).

    The first ``policy.warmup`` runs, and more until ``policy.warmup_s`` has passed, are kept apart: they
    include compilation/JIT and the device's climb from an idle clock.
    """
    policy = policy or TimingPolicy()
    timing = Timing(policy=policy)
    warm_start = time.perf_counter()
    while policy.warmup and len(timing.warmup_s) < policy.max_samples and (
            len(timing.warmup_s) < policy.warmup or time.perf_counter() - warm_start < policy.warmup_s):
        timing.warmup_s.append(run_once())
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        device = run_once()
        timing.host_s.append(time.perf_counter() - t0)
        timing.device_s.append(device)
        n = len(timing.device_s)
        if n < policy.min_samples:
            continue
        summary = summarize(timing.device_s, policy.confidence)
        if summary.ci_coverage >= policy.confidence and summary.rel_halfwidth <= policy.rel_ci:
            timing.stop_reason = "interval"
            break
        if n >= policy.max_samples:
            timing.stop_reason = "max_samples"
            break
        if time.perf_counter() - start >= policy.budget_s:
            timing.stop_reason = "budget"
            break
    return timing


def time_launch(backend: Any, kernel: Any, global_size: Sequence[int], local_size: Sequence[int] | None,
                args: Sequence[Any] | Callable[[int], Sequence[Any]], policy: TimingPolicy) -> Timing:
    """Device event times of repeated launches (warm-up first), each waited for.

    ``args`` may be a function of the launch number, for benchmarks that must touch new data each time.
    """
    count = [0]

    def once() -> float:
        count[0] += 1
        event = backend.launch(kernel, global_size, local_size, args(count[0]) if callable(args) else args)
        backend.finish()
        return event.seconds()

    return sample(once, policy)
