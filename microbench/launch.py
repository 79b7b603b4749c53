"""Launch overhead of an empty kernel, with each metric named.

* ``event_s``: the device event duration of an empty kernel (1 work-item);
* ``round_trip_s``: host time of enqueue + finish of one empty kernel;
* ``back_to_back_s``: host time per launch of many launches enqueued in a row, one finish at the end;
* ``queue_to_start_s``: profiling start minus queued time (OpenCL; clpeak's "kernel launch latency");
* ``fixed_s`` / ``per_thread_s``: the fit l = a*nt + b of the event duration over total thread counts
  nt from 1 to 2^24 and several work-group sizes (the PTX pipeline paper's l = 3.824e-6*nt + 2.882 us);
* ``per_block_s``: the slope of the same event durations over the work-groups launched, what dispatch
  really depends on (models charge it as the floor under a launch's work, not on top of it).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from gpuprofiler.measure.engine import Engine, time_launch
from gpuprofiler.measure.policy import bench, fixed
from gpuprofiler.measure.stats import summarize
from gpuprofiler.microbench.common import Progress, linear_fit, say
from gpuprofiler.microbench.source import build
from gpuprofiler.profile.file import entry, failed

EMPTY = "KERNEL void empty(int n) { }\n"


def measure(backend: Any, quick: bool = False, progress: Progress = None) -> dict[str, Any]:
    kernel = build(backend, EMPTY, "empty")
    arg = [np.int32(0)]
    b2b: list[float] = []
    policy = bench(quick, 0.4, 0.1, warmup=2)
    maxwg = backend.info.max_work_group_size
    groups = sorted({min(w, maxwg) for w in ((256,) if quick else (64, 256, 1024))})
    exponents = range(0, 25, 4 if quick else 2)
    points = []
    say(progress, f"launch: empty kernel over {len(exponents)} thread counts x work-groups {groups}")
    for wg in groups:
        for e in exponents:
            nt = 2**e
            local = min(wg, nt)
            timing = time_launch(backend, kernel, (nt,), (local,), arg, policy)
            s = timing.device
            points.append({"threads": -(-nt // local) * local, "local": local, "event_s": s.median,
                           "ci": [s.ci_low, s.ci_high], "round_trip_s": timing.host.median, "samples": s.n})
    fit = linear_fit([p["threads"] for p in points], [p["event_s"] for p in points])
    method = "OLS of empty-kernel event time over total threads (1..2^24) and work-group sizes " + str(groups)
    out: dict[str, Any] = {
        "fixed_s": entry(fit.intercept, "s", method, fit.intercept_ci, r2=fit.r2, n=fit.n)
        if fit.intercept > 0 else failed("s", method, f"intercept {fit.intercept:.3g} s is not positive"),
        "per_thread_s": entry(fit.slope, "s/thread", method, fit.slope_ci, r2=fit.r2, n=fit.n)
        if fit.slope_ci[1] >= 0 else failed("s/thread", method, f"slope {fit.slope:.3g} is negative"),
        "points": points,
    }
    # dispatch depends on the work-groups, not the threads: the same thread count in bigger groups is faster
    blocks = linear_fit([-(-p["threads"] // p["local"]) for p in points], [p["event_s"] for p in points])
    block_method = "OLS of empty-kernel event time over work-groups launched (same launches)"
    out["per_block_s"] = (entry(blocks.slope, "s/work-group", block_method, blocks.slope_ci, r2=blocks.r2,
                                n=blocks.n) if blocks.slope > 0 else
                          failed("s/work-group", block_method, f"slope {blocks.slope:.3g} is not positive"))
    # five blocks, interleaved with the back-to-back rounds: the interval covers drift between blocks too
    blocks = []
    q2s: list[list[float]] = []
    for _ in range(5):
        blocks.append(time_launch(backend, kernel, (1,), (1,), arg, bench(quick, 0.1, 0.05, warmup=2, min_samples=20)))
        back_to_back(backend, kernel, arg, 50, rounds=1, keep=b2b)
        if backend.kind == "opencl":
            q2s.append(queue_to_start_samples(backend, kernel, arg, 10 if quick else 40))
    for name, pick, what in (("event_s", lambda t: t.device, "device event duration of an empty 1-work-item kernel"),
                             ("round_trip_s", lambda t: t.host, "host enqueue + finish of one empty kernel")):
        meds = [pick(t).median for t in blocks]
        lo = min(pick(t).ci_low for t in blocks)
        hi = max(pick(t).ci_high for t in blocks)
        out[name] = entry(float(np.median(meds)), "s", f"{what}: median of 5 block medians; interval spans every "
                          "block's 95% interval", (lo, hi), n=sum(pick(t).n for t in blocks))
    out["back_to_back_s"] = back_to_back(backend, kernel, arg, 200 if quick else 1000, keep=b2b)
    if q2s:
        meds = [summarize(b) for b in q2s]
        out["queue_to_start_s"] = entry(
            float(np.median([m.median for m in meds])), "s",
            "OpenCL profiling START - QUEUED of single empty launches, each finished (clpeak's definition); median "
            "of 5 block medians, interval spans every block's 95% interval",
            (min(m.ci_low for m in meds), max(m.ci_high for m in meds)), n=sum(m.n for m in meds))
    return out


def back_to_back(backend: Any, kernel: Any, arg: list, launches: int, rounds: int = 5,
                 keep: list | None = None) -> dict[str, Any]:
    """Host seconds per launch with ``launches`` enqueued back to back in one queue, one finish.

    Rounds are added to ``keep`` (rounds run earlier count too); the figure is the median round. A host
    figure of many launches, not one launch's time: the engine samples whole rounds.
    """
    per = keep if keep is not None else []

    def one_round() -> float:
        backend.finish()
        t0 = time.perf_counter()
        for _ in range(launches):
            backend.launch(kernel, (1,), (1,), arg)
        backend.finish()
        return (time.perf_counter() - t0) / launches

    per.extend(Engine(fixed(rounds)).sample(one_round).device_s)
    s = summarize(per)
    return entry(s.median, "s", f"empty launches in one queue, then finish; wall time / launches "
                 f"(median of {s.n} rounds)", (s.minimum, s.maximum), n=s.n)


def queue_to_start_samples(backend: Any, kernel: Any, arg: list, launches: int) -> list[float]:
    """clpeak's kernel launch latency: profiling START minus QUEUED of single launches, each finished."""

    def once() -> float:
        event = backend.launch(kernel, (1,), (1,), arg)
        backend.finish()
        return event.launch_latency()

    return Engine(fixed(launches, warmup=3)).sample(once).device_s
