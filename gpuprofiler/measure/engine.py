"""The timing engine: warm up, then sample until the median's 95% interval is tight or the budget is spent.

This is the package's one timing loop; kernel specs, apps, sweeps and every microbenchmark go through
it. Sampling stops on the interval of the policy's ``stop_on`` figure: the modelling figure for kernels and apps. Two figures are kept for every sample and named as such:
``device_s`` -- what ``run_once`` returns: the device's own event time of the operation (kernel only),
or another per-run quantity a benchmark samples (clock cycles, a launch's queue-to-start time);
``host_s`` -- the host round trip of ``run_once``, measured with ``perf_counter``.
Timed launches call the backend's launch hooks (the CUDA backend's hold kernel) around each launch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from gpuprofiler.device.base import LaunchHook
from gpuprofiler.measure import contention
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.stats import Summary, summarize, tight


@dataclass
class Timing:
    """Every raw sample of one measurement, with summaries and why sampling stopped."""

    device_s: list[float] = field(default_factory=list)
    host_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    stop_reason: str = ""
    policy: TimingPolicy = field(default_factory=TimingPolicy)
    placements: int = 1  # blocks of samples, each on buffers allocated afresh
    contention: dict | None = None  # what other processes took of the host's cores while it ran (measure.contention)

    @property
    def device(self) -> Summary:
        return summarize(self.device_s, self.policy.confidence)

    @property
    def host(self) -> Summary:
        return summarize(self.host_s, self.policy.confidence)


class Engine:
    """Samples runs under a :class:`TimingPolicy`; a timed launch runs the backend's launch hooks around it."""

    def __init__(self, policy: TimingPolicy | None = None):
        self.policy = policy or TimingPolicy()

    def sample(self, run_once: Callable[[], float]) -> Timing:
        """Time ``run_once`` (which returns the device seconds of one run, or another per-run value, and
        waits for the run to finish).

        The first ``policy.warmup`` runs, and more until ``policy.warmup_s`` has passed, are kept apart: they
        include compilation/JIT and the device's climb from an idle clock.
        """
        return self.interleave([run_once])[0]

    def interleave(self, runs: Sequence[Callable[[], float]], budget_s: float | None = None) -> list[Timing]:
        """Sample several runs in alternation, one of each per round, so that a shared machine's drifting
        load hits them alike (a comparison of two chain lengths, the sizes of a sweep); warm-up as in
        :meth:`sample`. Sampling stops when every run's interval is tight, or for all at once at the budget
        (``budget_s``, else the policy's) or ``max_samples`` rounds."""
        policy = self.policy
        budget = policy.budget_s if budget_s is None else budget_s
        timings = [Timing(policy=policy) for _ in runs]
        warm_start = time.perf_counter()
        rounds = 0
        while policy.warmup and (rounds < policy.warmup or (
                time.perf_counter() - warm_start < policy.warmup_s and rounds < policy.max_samples)):
            for run, timing in zip(runs, timings):
                timing.warmup_s.append(run())
            rounds += 1
        start = time.perf_counter()
        before = contention.snapshot()
        while True:
            for run, timing in zip(runs, timings):
                t0 = time.perf_counter()
                value = run()
                timing.host_s.append(time.perf_counter() - t0)
                timing.device_s.append(value)
            n = len(timings[0].device_s)
            if n < policy.min_samples:
                continue
            if all(tight(timing.device_s, policy.stop_on, policy.rel_ci, policy.confidence) for timing in timings):
                reason = "interval"
            elif n >= policy.max_samples:
                reason = "max_samples"
            elif time.perf_counter() - start >= budget:
                reason = "budget"
            else:
                continue
            shared = contention.between(before, contention.snapshot())
            for timing in timings:
                timing.stop_reason = reason
                timing.contention = shared
            return timings

    def launch_once(self, backend: Any, kernel: Any, global_size: Sequence[int], local_size: Sequence[int] | None,
                    args: Sequence[Any]) -> Any:
        """One launch with the hooks around it (not waited for); returns its event."""
        hooks: Sequence[LaunchHook] = backend.launch_hooks()
        for hook in hooks:
            hook.before_launch()
        event = backend.launch(kernel, global_size, local_size, args)
        for hook in reversed(hooks):
            hook.after_launch()
        return event

    def time_launch(self, backend: Any, kernel: Any, global_size: Sequence[int], local_size: Sequence[int] | None,
                    args: Sequence[Any] | Callable[[int], Sequence[Any]]) -> Timing:
        """Device event times of repeated launches (warm-up first), each waited for.

        ``args`` may be a function of the launch number, for benchmarks that must touch new data each time.
        """
        count = [0]

        def once() -> float:
            count[0] += 1
            event = self.launch_once(backend, kernel, global_size, local_size,
                                     args(count[0]) if callable(args) else args)
            backend.finish()
            return event.seconds()

        return self.sample(once)


def sample(run_once: Callable[[], float], policy: TimingPolicy | None = None) -> Timing:
    """``Engine(policy).sample(run_once)``."""
    return Engine(policy).sample(run_once)


def time_launch(backend: Any, kernel: Any, global_size: Sequence[int], local_size: Sequence[int] | None,
                args: Sequence[Any] | Callable[[int], Sequence[Any]], policy: TimingPolicy | None = None) -> Timing:
    """``Engine(policy).time_launch(...)``: repeated timed launches of one kernel."""
    return Engine(policy).time_launch(backend, kernel, global_size, local_size, args)
