"""How many work-items the device runs at once, by Little's law on a fixed per-work-item chain.

Each work-item runs the same long dependent FMA chain, taking T(1) alone. With n
work-items the kernel takes T(n); n * T(1) / T(n) work-items are then in progress on
average. Its maximum over n (the device full) is ``concurrency.work_items``. The knee
-- the largest n whose time stays within 25% of T(1) -- and the resident capacity the
API reports (compute units x threads per unit) are kept beside it.

A CPU runs a work-group's work-items one after another on a core, and its out-of-order window
overlaps the next work-items' chains with the current one only while they fit in it. So on a CPU
the chain is also made short to long (8 .. 4096 dependent operations per work-item, the device
full of work-items): ``overlap_curve`` holds, per chain length, how many work-items' chains a core
keeps in progress at once (the time per operation of the longest chains over this one's). The
max-plus model divides a work-item's critical path by it, at the work-item's operation count.

That chain runs in a loop, and a CPU's OpenCL compiler runs such a kernel one work-item at a time (its loop over
the work-items is the outer one). A kernel without loops, whose work-items touch consecutive addresses, it
vectorises across work-items instead: ``loopfree_curve`` times the same chains written out straight (2 .. 64
dependent operations, groups of 256) against a looped chain of 1024 operations timed in the same rounds (one chain at
a time). On a Zen 4 VM's PoCL they ran 4-20 work-items at once where the looped chains ran 1-6.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuprofiler.measure.engine import Engine, time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.microbench.common import Progress, say, written_buffer
from gpuprofiler.microbench.source import build
from gpuprofiler.profile.file import entry

SOURCE = r"""
KERNEL void busy(GLOBAL float *out, int iters, float a, float b, float never) {
    float x = (float)LID;
    for (int i = 0; i < iters; ++i) {
        x = x * a + b; x = x * a + b; x = x * a + b; x = x * a + b;
        x = x * a + b; x = x * a + b; x = x * a + b; x = x * a + b;
    }
    if (x == never) out[GID] = x;
}
"""

GUARDED_SOURCE = r"""
KERNEL void plain(GLOBAL const float *x, GLOBAL float *y, int n, float a, float b) {
    int i = (int)GID;
    y[i] = x[i] * a + b;
}
KERNEL void guarded(GLOBAL const float *x, GLOBAL float *y, int n, float a, float b) {
    int i = (int)GID;
    if (i < n)
        y[i] = x[i] * a + b;
}
"""

KNEE = 1.25
OVERLAP_ITERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # x 8 operations: chains of 8 .. 4096
OVERLAP_GROUP = 64
OVERLAP_WORK = 1 << 22  # operations per core and launch: about 1 ms of chain on a CPU core
OVERLAP_PASSES = 2  # passes over the curve, each point keeping its fastest: a tenant can slow a whole point
LOOPFREE_OPS = (2, 4, 8, 16, 32, 64)  # straight-line chains of the loop-free curve
LOOPFREE_GROUP = 256
LOOPFREE_REFERENCE_OPS = 1024  # the looped chain timed beside them: one chain at a time (the overlap curve's longest)
# work-items of the guarded and plain streams: 16 MiB a buffer, past a core's private caches, as the streams max-plus
# prices them at (at 2^20, 4 MiB a buffer, the guarded figure moved 1.14..1.71 ns in four rounds on a Zen 3 VM, and
# 0.73 and 1.57 ns in two calibrations; at 2^22 1.36..1.61 ns, and a guarded copy at 2^27 took about 1.4)
GUARDED_ITEMS = 1 << 22
# and past any last-level cache (128 MiB a buffer), as a stream of a large launch runs from DRAM: on a Zen 4 VM the
# guarded stream took 0.67-1.42 ns a work-item at 2^22 and 1.27-1.58 at 2^25, vadd at 2^27 1.33
GUARDED_FAR_ITEMS = 1 << 25
GUARDED_GROUP = 256


def knee(counts: list[int], times: list[float], ratio: float = KNEE) -> int | None:
    """Largest count before the first whose time exceeds ``ratio`` x the time of the smallest count."""
    base = times[0]
    best = None
    for n, t in zip(counts, times):
        if t > base * ratio:
            break
        best = n
    return best


def measure(backend: Any, quick: bool = False, progress: Progress = None) -> dict[str, Any]:
    info = backend.info
    is_cpu = info.type == "cpu"
    resident = info.extra.get("max_threads_per_sm", 0) * info.compute_units if not is_cpu else None
    top = (resident or info.compute_units * info.max_work_group_size) * 4
    counts = [2**k for k in range(0, int(np.log2(max(top, 2))) + 1)]
    # one work-item's chain must outlast the device's start-up of its workers (about a millisecond on a CPU)
    iters = (1 << 16 if quick else 1 << 17) if is_cpu else (1024 if quick else 4096)
    kernel = build(backend, program(), "busy")
    out = backend.alloc(4 * counts[-1])
    policy = bench(quick, 0.2, 0.03)
    group_cap = 256 if not is_cpu else info.max_work_group_size
    # a CPU runs a work-group's items in a loop on one core: also try one item per group, spread over cores
    layouts = {"full groups": lambda n: min(n, group_cap)}
    if is_cpu:
        layouts["one item per group"] = lambda n: 1
    result: dict[str, Any] = {"resident_capacity": resident, "layouts": {}}
    best = None
    for name, local_of in layouts.items():
        times: list[float] = []
        in_flight: list[float] = []
        say(progress, f"concurrency: a fixed chain per work-item, 1 .. {counts[-1]} work-items, {name}")
        for n in counts:
            t = time_launch(backend, kernel, (n,), (local_of(n),), [out, np.int32(iters), np.float32(0.999),
                                                                     np.float32(0.001), np.float32(-1)], policy).device
            times.append(t.median)
            in_flight.append(n * times[0] / t.median)
            # stop once four more doublings added less than 10% (the device is full), or a launch is long
            if (len(in_flight) >= 5 and in_flight[-1] < 1.1 * max(in_flight[:-4])) or t.median > 0.25:
                break
        result["layouts"][name] = {"knee": knee(counts[:len(times)], times),
                                   "points": [{"work_items": n, "seconds": t, "in_flight": f}
                                              for n, t, f in zip(counts, times, in_flight)]}
        peak = max(in_flight)
        if best is None or peak > best[0]:
            best = (peak, name, counts[int(np.argmax(in_flight))])
    method = (f"Little's law: max over n of n * T(1) / T(n), each work-item running {iters * 8} dependent FMAs; "
              f"best of layouts {list(layouts)}: {best[1]}, at n = {best[2]}")
    result["work_items"] = entry(best[0], "work-items", method)
    if is_cpu:
        result["overlap_curve"], result["overlap_method"] = overlap_curve(backend, kernel, quick, progress)
        result["loopfree_curve"], result["loopfree_method"] = loopfree_curve(backend, kernel, quick, progress)
        result.update(guarded_items(backend, quick, progress))
    return result


def overlap_curve(backend: Any, kernel: Any, quick: bool, progress: Progress = None) -> tuple[list[dict], str]:
    """Work-items whose chains a CPU core overlaps, against the chain's length in operations: the time per
    operation per core of the three longest chains (their median) over that of each chain (about 1 where the
    window holds one work-item). Each point keeps its fastest of :data:`OVERLAP_PASSES` passes."""
    cores = max(1, backend.info.compute_units)
    say(progress, f"concurrency: chains of {8 * OVERLAP_ITERS[0]} .. {8 * OVERLAP_ITERS[-1]} operations per "
                  f"work-item, the cores full (a CPU's window over consecutive work-items)")
    policy = bench(quick, 0.2, 0.03)
    counts = [max(4 * cores, cores * OVERLAP_WORK // (8 * i * OVERLAP_GROUP)) * OVERLAP_GROUP for i in OVERLAP_ITERS]
    out = backend.alloc(4 * max(counts))
    fastest = [float("inf")] * len(counts)
    for _ in range(OVERLAP_PASSES):
        for k, (iters, n) in enumerate(zip(OVERLAP_ITERS, counts)):
            t = time_launch(backend, kernel, (n,), (OVERLAP_GROUP,), [out, np.int32(iters), np.float32(0.999),
                                                                      np.float32(0.001), np.float32(-1)], policy)
            fastest[k] = min(fastest[k], t.device.minimum)
    rows = [(8 * iters, n, secs, secs * cores / (n * 8 * iters)) for iters, n, secs in zip(OVERLAP_ITERS, counts,
                                                                                            fastest)]
    # the three longest chains (1024 operations and more) outlast any window: their median is one chain at a time
    reference = _reference_op_s([{"op_s": row[3]} for row in rows])
    points = [{"ops": ops, "work_items": n, "seconds": secs, "op_s": per_op, "overlap": reference / per_op}
              for ops, n, secs, per_op in rows]
    method = (f"per chain length L (operations per work-item), the fastest event time T of n work-items in groups of "
              f"{OVERLAP_GROUP} over {cores} cores (of {OVERLAP_PASSES} passes), op_s = T * cores / (n * L): "
              f"overlap(L) = op_s of one chain at a time (the median of the three longest, {8 * OVERLAP_ITERS[-3]}+ "
              f"operations) / op_s(L)")
    return points, method


def _reference_op_s(points: list[dict]) -> float:
    """Seconds per operation of one chain at a time: the median of the three longest looped chains' (1024
    operations and more outlast any window)."""
    return float(np.median([p["op_s"] for p in points[-3:]]))


def program() -> str:
    """Every kernel of the concurrency benchmarks in one program: one build (~0.15 s each on a fresh PoCL)."""
    return "\n".join([SOURCE, GUARDED_SOURCE, *(loopfree_source(ops) for ops in LOOPFREE_OPS)])


def loopfree_source(ops: int) -> str:
    """A kernel whose work-items each run ``ops`` dependent FMAs written out straight, no loop."""
    body = " ".join(["x = x * a + b;"] * ops)
    return (f"KERNEL void chain{ops}(GLOBAL float *out, float a, float b, float never) {{\n"
            f"    float x = (float)LID;\n    {body}\n    if (x == never) out[0] = x;\n}}\n")


def loopfree_curve(backend: Any, looped: Any, quick: bool, progress: Progress = None) -> tuple[list[dict], str]:
    """Work-items whose straight-line chains of ``ops`` dependent FMAs a CPU core runs at once, vectorised across
    work-items: one chain at a time's time per operation over this chain's. The reference is the ``looped``
    kernel's (the overlap curve's) chain of :data:`LOOPFREE_REFERENCE_OPS` operations, timed in the same rounds:
    the chain lengths and it in alternation, one launch of each per round, each the fastest of its runs. A ratio of
    two launches of the same rounds holds when a tenant takes a core for the whole curve (a Zen 4 VM's quick
    calibration once timed every straight chain 1.9x slower than the calibrations before and after it, while the
    looped curve timed just before was as usual: against that reference the curve halved, and max-plus put a
    stream at +135%)."""
    cores = max(1, backend.info.compute_units)
    say(progress, f"concurrency: straight-line chains of {LOOPFREE_OPS[0]} .. {LOOPFREE_OPS[-1]} operations per "
                  f"work-item, no loop (vectorised across work-items), beside a looped chain of "
                  f"{LOOPFREE_REFERENCE_OPS}")
    engine = Engine(bench(quick, 0.3, 0.05).but(min_samples=3))
    counts = [max(4 * cores, cores * OVERLAP_WORK // (ops * LOOPFREE_GROUP)) * LOOPFREE_GROUP for ops in LOOPFREE_OPS]
    iters = LOOPFREE_REFERENCE_OPS // 8
    ref_n = max(4 * cores, cores * OVERLAP_WORK // (LOOPFREE_REFERENCE_OPS * OVERLAP_GROUP)) * OVERLAP_GROUP
    out = backend.alloc(4 * ref_n)

    def timed(kernel: Any, n: int, group: int, args: list):
        def once() -> float:
            event = engine.launch_once(backend, kernel, (n,), (group,), args)
            backend.finish()
            return event.seconds()
        return once

    chain_args = [out, np.float32(0.999), np.float32(0.001), np.float32(-1)]
    timings = engine.interleave(
        [timed(build(backend, program(), f"chain{ops}"), n, LOOPFREE_GROUP, chain_args)
         for ops, n in zip(LOOPFREE_OPS, counts)]
        + [timed(looped, ref_n, OVERLAP_GROUP, [out, np.int32(iters), *chain_args[1:]])])
    reference_op_s = timings[-1].device.minimum * cores / (ref_n * LOOPFREE_REFERENCE_OPS)
    points = []
    for ops, n, timing in zip(LOOPFREE_OPS, counts, timings):
        secs = timing.device.minimum
        per_op = secs * cores / (n * ops)
        points.append({"ops": ops, "work_items": n, "seconds": secs, "op_s": per_op,
                       "overlap": reference_op_s / per_op})
    method = (f"per chain length L, the fastest event time T of n work-items, each L dependent FMAs written out "
              f"without a loop, in groups of {LOOPFREE_GROUP} over {cores} cores, the lengths in alternation: "
              f"overlap(L) = the looped chain of {LOOPFREE_REFERENCE_OPS} operations' op_s, timed in the same "
              f"rounds ({reference_op_s * 1e12:.4g} ps), / (T * cores / (n * L))")
    return points, method


def guarded_items(backend: Any, quick: bool, progress: Progress = None) -> dict[str, Any]:
    """A CPU core's time per work-item of ``y[i] = x[i] * a + b`` with and without ``if (i < n)`` around it, and
    guarded with every work-item skipping it, in alternation, on buffers past a core's private caches: whether the OpenCL
    compiler still runs a region in vector lanes when its loads and stores run under a condition on the work-item
    (PoCL 3.0 on a Zen 3 VM ran a guarded copy at 2^27 in 76-79 ms, 2.8-3x its unguarded one; the figures max-plus
    prices such a region's work-items with). The buffers are written first, as a kernel's data is
    (:func:`~gpuprofiler.microbench.common.written_buffer`)."""
    cores = max(1, backend.info.compute_units)
    say(progress, f"concurrency: {GUARDED_ITEMS} and {GUARDED_FAR_ITEMS} work-items of a stream with and without a "
                  "bounds guard")
    engine = Engine(bench(quick, 0.3, 0.05).but(min_samples=5))
    plain, guarded = (build(backend, program(), name) for name in ("plain", "guarded"))
    out = {}
    for items, suffix in ((GUARDED_ITEMS, ""), (GUARDED_FAR_ITEMS, "_far")):
        x, y = (written_buffer(backend, 4 * items, np.float32) for _ in range(2))

        def timed(kernel: Any, n: int, x=x, y=y, items=items):
            args = [x, y, np.int32(n), np.float32(0.999), np.float32(0.001)]

            def once() -> float:
                event = engine.launch_once(backend, kernel, (items,), (GUARDED_GROUP,), args)
                backend.finish()
                return event.seconds()
            return once

        cases = [("unguarded", plain, items, "y[i] = x[i] * a + b"),
                 ("guarded", guarded, items, "if (i < n) y[i] = x[i] * a + b")]
        if not suffix:
            cases.append(("guard_skip", guarded, 0, "if (i < n) y[i] = x[i] * a + b with n = 0 (every work-item "
                                                    "skips)"))
        timings = engine.interleave([timed(kernel, n) for _, kernel, n, _ in cases])
        for (key, _, _, what), timing in zip(cases, timings):
            d = timing.device
            out[f"{key}{suffix}_item_s"] = entry(
                d.model * cores / items, "s",
                f"{what} over {items} work-items in groups of {GUARDED_GROUP} ({4 * items >> 20} MiB a buffer), the "
                f"10th percentile of the launch's device time x {cores} cores / work-items, the guarded and "
                "unguarded kernels in alternation",
                (d.model_ci_low * cores / items, d.model_ci_high * cores / items), n=len(timing.device_s))
        del x, y
    return out
