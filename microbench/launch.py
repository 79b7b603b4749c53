"""Launch overhead of an empty kernel, with each metric named.

* ``event_s``: the device event duration of an empty kernel (1 work-item);
* ``round_trip_s``: host time of launch + finish of one empty kernel, from a tight loop of many such pairs
  (arguments marshalled once, outside the timing engine: no hold kernel, no timing events) over their number;
* ``back_to_back_s``: device time per launch of many empty launches queued back to back, measured between
  two device timestamps (CUDA events around them; OpenCL profiling START of the first to END of the last),
  all queued before the device reaches the first, so it is the device's launch-to-launch time;
* ``queue_to_start_s``: profiling start minus queued time (OpenCL; clpeak's "kernel launch latency");
* ``fixed_s`` / ``per_thread_s``: the fit l = a*nt + b of the event duration over total thread counts
  nt from 1 to 2^24 and several work-group sizes (the PTX pipeline paper's l = 3.824e-6*nt + 2.882 us);
* ``per_block_s``: the slope of the same event durations over the work-groups launched, what dispatch
  really depends on (models charge it as the floor under a launch's work, not on top of it).

Profiles written before method version 2 (:data:`gpuprofiler.profile.file.CHANGED_METHODS`) timed
``round_trip_s`` and ``back_to_back_s`` on the host around the package's timed launch (events, argument
packing in Python and, on CUDA, the hold kernel): they measured Python, not launches.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from gpuprofiler.errors import DeviceError
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
                           "ci": [s.ci_low, s.ci_high], "engine_host_s": timing.host.median, "samples": s.n})
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
    # five blocks, each with every per-launch figure: the interval covers drift between blocks too
    events, spans, trips, q2s = [], [], [], []
    span_error = None
    for _ in range(5):
        events.append(time_launch(backend, kernel, (1,), (1,), arg, bench(quick, 0.1, 0.05, warmup=2, min_samples=20)))
        trips.append(round_trip_samples(backend, kernel, arg, TRIP_LAUNCHES[quick], ROUNDS[quick]))
        if span_error is None:
            try:
                spans.append(back_to_back_samples(backend, kernel, arg, SPAN_LAUNCHES[quick], ROUNDS[quick]))
            except (NotImplementedError, DeviceError) as exc:
                span_error = str(exc)
        if backend.kind == "opencl":
            q2s.append(queue_to_start_samples(backend, kernel, arg, 10 if quick else 40))
    out["event_s"] = _blocks([t.device_s for t in events], "device event duration of an empty 1-work-item kernel")
    out["round_trip_s"] = _blocks(
        trips, f"host perf_counter around a loop of {TRIP_LAUNCHES[quick]} (launch + finish) pairs of one empty "
        "1-work-item kernel, arguments marshalled once before the loop, outside the timing engine (no hold "
        "kernel, no timing events of the package); loop time "
        f"/ {TRIP_LAUNCHES[quick]}, {ROUNDS[quick]} rounds per block", per_round=True, method_version=2)
    span_method = (f"{SPAN_METHOD.get(backend.kind, 'device timestamps around the launches')}; "
                   f"{SPAN_LAUNCHES[quick]} empty 1-work-item launches (arguments marshalled once) queued before the "
                   f"device reaches the first; span / {SPAN_LAUNCHES[quick]}, {ROUNDS[quick]} rounds per block")
    out["back_to_back_s"] = (failed("s", span_method, span_error, method_version=2) if span_error is not None
                             else _blocks(spans, span_method, per_round=True, method_version=2))
    if q2s:
        out["queue_to_start_s"] = _blocks(q2s, "OpenCL profiling START - QUEUED of single empty launches, each "
                                          "finished (clpeak's definition)")
    return out


SPAN_METHOD = {
    "cuda": "CUDA events recorded before the first and after the last launch, the launches queued behind the hold "
            "kernel (the GPU never waits for the host in between)",
    "opencl": "OpenCL profiling START of the first launch to END of the last, the first held by a user event until "
              "every launch is queued",
}
TRIP_LAUNCHES = {False: 200, True: 50}   # launch + finish pairs per round-trip round (full, quick)
SPAN_LAUNCHES = {False: 500, True: 100}  # launches per back-to-back span
ROUNDS = {False: 4, True: 2}             # rounds per block (after one warm-up round)


def _blocks(blocks: list[list[float]], what: str, per_round: bool = False, **extra: Any) -> dict[str, Any]:
    """Median of the blocks' medians; the interval spans every block's 95% interval, or (``per_round``: blocks
    of a few rounds each) the lowest to the highest round."""
    sums = [summarize(b) for b in blocks]
    value = float(np.median([s.median for s in sums]))
    if per_round:
        flat = [x for b in blocks for x in b]
        return entry(value, "s", f"{what}: median of {len(sums)} block medians; interval: lowest to highest round",
                     (min(flat), max(flat)), n=len(flat), **extra)
    return entry(value, "s", f"{what}: median of {len(sums)} block medians; interval spans every block's 95% "
                 "interval", (min(s.ci_low for s in sums), max(s.ci_high for s in sums)), n=sum(s.n for s in sums),
                 **extra)


def round_trip_samples(backend: Any, kernel: Any, arg: list, launches: int, rounds: int) -> list[float]:
    """Host seconds per (launch + finish) of ``launches`` pairs in one timed loop, one value per round.

    The launch is prepared first (:meth:`Backend.prepare_launch`), so a sample holds the API's launch and
    wait, not the package's per-launch Python (events, argument packing, the CUDA hold kernel).
    """
    go = backend.prepare_launch(kernel, (1,), (1,), arg)
    finish = backend.finish

    def one_round() -> float:
        finish()
        t0 = time.perf_counter()
        for _ in range(launches):
            go()
            finish()
        return (time.perf_counter() - t0) / launches

    return Engine(fixed(rounds, warmup=1)).sample(one_round).device_s


def back_to_back_samples(backend: Any, kernel: Any, arg: list, launches: int, rounds: int) -> list[float]:
    """Device seconds per launch of ``launches`` launches queued back to back
    (:meth:`Backend.launch_span` / launches), one value per round."""
    return Engine(fixed(rounds, warmup=1)).sample(
        lambda: backend.launch_span(kernel, (1,), (1,), arg, launches) / launches).device_s


def queue_to_start_samples(backend: Any, kernel: Any, arg: list, launches: int) -> list[float]:
    """clpeak's kernel launch latency: profiling START minus QUEUED of single launches, each finished."""

    def once() -> float:
        event = backend.launch(kernel, (1,), (1,), arg)
        backend.finish()
        return event.launch_latency()

    return Engine(fixed(launches, warmup=3)).sample(once).device_s
