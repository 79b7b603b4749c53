"""Global-memory bandwidth: read, write, copy and triad over float vector widths, on random data; and the cost of
a gathered read.

Arrays are far beyond the last-level cache; consecutive work-items touch consecutive vectors. On a GPU every
work-item handles PER vectors strided by the global size (each step of its loop one coalesced sweep of the
device); on a CPU each work-item handles one vector (:data:`LAYOUTS`), which is how a kernel written per element
runs there: PoCL vectorises a work-group's work-items into one contiguous stream per array. Sixteen streams per
work-item, each far from the next, are not what CPU kernels do, and they cost the prefetchers: on a 2-vCPU Zen 4
VM the strided float4 read ran at 9.6 GB/s against 33-47 GB/s contiguous, and its working-set curve saw no cache
below 128 MiB. The figure is bytes moved / the minimum event time over repeats after warm-up. A value above the
device's theoretical peak (where the API gives the memory clock and bus width) is recorded as failed.

A gather (``x[cols[p]]``, a histogram's bins) reads one element per line (a GPU: per 32-byte sector) at random
addresses. What DRAM delivers then is not the stream's bandwidth: a line per access, the row buffers and page
tables missed, and on a CPU as many misses in flight as a core's fill buffers allow. ``gather_s`` measures it:
reads at random indices (streamed from an index array) over the whole array and the same reads masked to a 16 KiB
prefix (same instructions, only the locality differs), each work-item's reads independent; the difference per read
is a random miss's cost with the device full of them. ``gather_llc_s`` is the same reads masked to a span that fits
the last-level cache but not a core's private levels (4 MiB between a 1 MiB L2 and a 14 MiB L3): what a line the
prefetchers cannot bring (a column walk's, a gather's) adds to the work when the shared cache serves it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpuprofiler.measure.engine import Engine, time_launch
from gpuprofiler.measure.policy import bench
from gpuprofiler.measure.stats import MODEL_STATISTIC
from gpuprofiler.microbench.common import Progress, say
from gpuprofiler.microbench.source import VECTOR_WIDTHS, build, components, vec_type
from gpuprofiler.profile.file import entry, failed

PER = 16
KINDS = {"read": 1, "write": 1, "copy": 2, "triad": 3}  # arrays touched
ROUNDS = 10  # rounds of the kinds and widths at least: the 10th percentile of 10 runs is not the fastest alone
# vectors per work-item: a GPU's loop of PER sweeps, a CPU's one vector per work-item
LAYOUTS = {"strided": PER, "contiguous": 1}


def layout(device_type: str) -> str:
    """The bandwidth kernels' layout for a device type: contiguous on a CPU, strided sweeps elsewhere."""
    return "contiguous" if device_type == "cpu" else "strided"


def kernel_source(kind: str, api: str, width: int, layout: str = "strided") -> str:
    """Source of one bandwidth kernel ``bw_<kind>`` for ``width``-wide float vectors in ``layout``
    (:data:`LAYOUTS`)."""
    vt = vec_type(api, width)
    comps = components(api, width)
    if layout == "contiguous":
        idx = "g"
        head = "idx_t g = GID;\n    {\n"
    else:
        idx = "g + (idx_t)k * n"
        head = "idx_t g = GID, n = GSIZE;\n    for (int k = 0; k < PER; ++k) {\n"
    vector_ops = api == "opencl" or width == 1

    def make(exprs: list[str]) -> str:
        if width == 1:
            return exprs[0]
        if api == "opencl":
            return f"({vt})({', '.join(exprs)})"
        return f"make_{vt}({', '.join(exprs)})"

    if kind == "read":
        if vector_ops:
            zero = "0.0f" if width == 1 else f"({vt})(0.0f)"
            body = f"{vt} acc = {zero};\n    {head}        acc += a[{idx}];\n    }}\n" + _tree_sum(api, width)
        else:
            body = (f"float {', '.join(f'acc{i} = 0.0f' for i in range(width))};\n    {head}"
                    f"        {vt} v = a[{idx}];\n"
                    + "".join(f"        acc{i} += v{c};\n" for i, c in enumerate(comps))
                    + f"    }}\n    float s = {' + '.join(f'acc{i}' for i in range(width))};\n")
        # a CPU's guard stores to one word: PoCL 3.1 runs a data-dependent store to out[g] at 0.7 GB/s
        guard = "out[0]" if layout == "contiguous" else "out[g]"
        return (f"KERNEL void bw_read(GLOBAL const {vt} *a, GLOBAL float *out, float never) {{\n    {body}"
                f"    if (s == never) {guard} = s;\n}}\n")
    if kind == "write":
        value = make(["value"] * width)
        return (f"KERNEL void bw_write(GLOBAL {vt} *a, float value) {{\n    {head}"
                f"        a[{idx}] = {value};\n    }}\n}}\n")
    if kind == "copy":
        return (f"KERNEL void bw_copy(GLOBAL const {vt} *a, GLOBAL {vt} *b) {{\n    {head}"
                f"        b[{idx}] = a[{idx}];\n    }}\n}}\n")
    if vector_ops:
        line = f"        idx_t i = {idx};\n        a[i] = b[i] + s * c[i];\n"
    else:
        line = (f"        idx_t i = {idx};\n        {vt} bv = b[i], cv = c[i];\n"
                f"        a[i] = {make([f'bv{c} + s * cv{c}' for c in comps])};\n")
    return (f"KERNEL void bw_triad(GLOBAL {vt} *a, GLOBAL const {vt} *b, GLOBAL const {vt} *c, float s) {{\n"
            f"    {head}{line}    }}\n}}\n")


GATHER_SOURCE = r"""
KERNEL void gather(GLOBAL const float *a, GLOBAL const u32 *index, GLOBAL float *out, u32 mask, float never) {
    idx_t g = GID;
    float s = 0.0f;
    for (int k = 0; k < PER; ++k)
        s += a[index[g * PER + k] & mask];
    if (s == never) out[g] = s;
}
"""


def _tree_sum(api: str, width: int) -> str:
    """``float s``, the sum of ``acc``'s components, in halves (OpenCL's ``.lo``/``.hi``): a CPU vectorises
    work-items, and a chain of 15 adds per float16 held its contiguous read to 30 GB/s in and out of the caches
    alike (halves: 110-123 GB/s in the L3 of a Zen 4 VM, 35 GB/s from DRAM)."""
    if width == 1:
        return "    float s = acc;\n"
    if api != "opencl":
        return f"    float s = {' + '.join('acc' + c for c in components(api, width))};\n"
    lines, name, w = [], "acc", width
    while w > 1:
        w //= 2
        vt = vec_type(api, w)
        lines.append(f"    {vt} h{w} = {name}.lo + {name}.hi;\n")
        name = f"h{w}"
    return "".join(lines) + f"    float s = {name};\n"


def all_kernels_source(api: str, layout: str = "strided") -> str:
    """Every kind and width as ``bw_<kind>_f<width>``, and ``gather``, in one program: one compile instead of
    twenty-one (a compile costs ~0.1-0.2 s on PoCL on a fresh machine)."""
    return "\n".join(kernel_source(kind, api, width, layout).replace(f"void bw_{kind}(", f"void bw_{kind}_f{width}(")
                      for kind in KINDS for width in VECTOR_WIDTHS[api]) + GATHER_SOURCE


def _program(backend: Any) -> str:
    """The bandwidth section's program: every kind and width, the gather and, on a CPU's OpenCL, the streams'
    ``rows`` (one build)."""
    lay = layout(backend.info.type)
    source = all_kernels_source(backend.kind, lay)
    return source + STREAMS_SOURCE if backend.kind == "opencl" and lay == "contiguous" else source


def _kernel(backend: Any, kind: str, width: int):
    return build(backend, _program(backend), f"bw_{kind}_f{width}", {"PER": PER})


GATHER_NEAR = 4096  # floats of the prefix the comparison reads: 16 KiB, inside any first-level cache


def llc_span(private_bytes: float | None, llc_bytes: float | None, count: int) -> int | None:
    """Floats of a gather span that fits the last-level cache but not a core's private levels: of the powers of two
    of bytes from twice the private level to half the last, the nearest the geometric mean of the two sizes; None
    where there is none, or either size is unknown."""
    if not private_bytes or not llc_bytes or private_bytes <= 0 or llc_bytes <= 0:
        return None
    lo, hi = math.ceil(math.log2(2 * private_bytes)), math.floor(math.log2(llc_bytes / 2))
    if lo > hi:
        return None
    mean = 0.5 * (math.log2(private_bytes) + math.log2(llc_bytes))
    span = (1 << min(range(lo, hi + 1), key=lambda e: (abs(e - mean), e))) // 4
    return span if 0 < span < count else None


def gather_setup(backend: Any, count: int, quick: bool) -> tuple:
    """What every block of the gather runs: (kernel, index buffer, work-items, local size, reads, span), the
    random indices uploaded once."""
    span = 1 << (int(count).bit_length() - 1)  # the largest power of two of floats within the array
    reads = min(span, 1 << (22 if quick else 24))
    local = (min(256, backend.info.max_work_group_size),)
    items = reads // PER
    items -= items % local[0]
    n = items * PER
    index, _ = backend.to_device(np.random.default_rng(5).integers(0, span, n, dtype=np.uint32))
    return build(backend, _program(backend), "gather", {"PER": PER}), index, items, local, n, span


def gather_times(backend: Any, buf: Any, out: Any, count: int, quick: bool, setup: tuple | None = None,
                 cached: int | None = None) -> tuple:
    """One block of the gather's runs: (far, near, reads, span, in the cache) with far and near the device-time
    summaries of the reads over the whole array and over the same reads masked to ``GATHER_NEAR`` floats, and the
    last the same reads masked to ``cached`` floats (:func:`llc_span`; None without it). ``setup``:
    :func:`gather_setup`'s, when already had."""
    kernel, index, items, local, n, span = setup if setup is not None else gather_setup(backend, count, quick)
    policy = bench(quick, 0.5, 0.1)
    masks = (span - 1, GATHER_NEAR - 1) + ((cached - 1,) if cached else ())
    times = [time_launch(backend, kernel, (items,), local, [buf, index, out, np.uint32(mask), np.float32(-1.0)],
                         policy).device for mask in masks]
    return times[0], times[1], n, span, times[2] if cached else None


def gather_cost(blocks: list[tuple], llc_bytes: int | None, progress: Progress) -> dict:
    """Seconds per read at a random address of an array far beyond the last-level cache (``a[index[i]]``, the
    indices streamed from an array as a sparse matrix's columns are) over the same reads near (the indices masked
    to ``GATHER_NEAR`` floats), with the device full of independent reads: the cost of one random line's miss.
    ``blocks``: :func:`gather_times` taken at moments seconds apart, the fastest run of each kind over all of them
    (a shared VM's memory slows for seconds at a time: the far reads of one quick calibration's block ran 46 ms
    where eight others' ran 29-37)."""
    _, _, n, span, _ = blocks[0]
    far_min = min(b[0].minimum for b in blocks)
    near_min = min(b[1].minimum for b in blocks)
    far_max = max(b[0].maximum for b in blocks)
    near_max = max(b[1].maximum for b in blocks)
    # a read that finds its line in the last-level cache is no miss: count only the misses
    miss_share = 1.0 - min(1.0, (llc_bytes or 0) / (span * 4))
    per = (far_min - near_min) / (n * miss_share)
    hi = (far_max - near_min) / (n * miss_share)
    lo = max((far_min - near_max) / (n * miss_share), 0.0)
    runs = f"{sum(b[0].n for b in blocks)} and {sum(b[1].n for b in blocks)} runs in {len(blocks)} blocks"
    method = (f"{n} reads of floats at random indices (streamed from an index array) over {span * 4 >> 20} MiB "
              f"minus the same reads masked to {GATHER_NEAR * 4 >> 10} KiB (minimum event times of {runs}, "
              f"at the start and the end of the bandwidth section), per read, over the share {miss_share:.3f} that "
              f"misses a last-level cache of {(llc_bytes or 0) / 2**20:.0f} MiB; {PER} independent reads per "
              "work-item")
    if not per > 0:
        return {"gather_s": failed("s", method, f"the far reads were not slower than the near ones ({per:.3g} s)")}
    say(progress, f"bandwidth: a gathered read misses for {per * 1e9:.3g} ns "
                  f"({far_min * 1e3:.3g} ms far, {near_min * 1e3:.3g} ms near)")
    return {"gather_s": entry(per, "s", method, (lo, hi), far_s=far_min, near_s=near_min, reads=n,
                              span_bytes=span * 4, far_blocks_s=[b[0].minimum for b in blocks])}


def gather_llc_cost(blocks: list[tuple], cached: int, private_bytes: float, progress: Progress) -> dict:
    """Seconds a random read whose line a core's private levels do not hold but the last-level cache does adds to
    the same reads near (:func:`gather_cost`'s, the indices masked to ``cached`` floats: :func:`llc_span`), per read
    that misses a private level of ``private_bytes``, the device full of them: fastest runs over the blocks."""
    n = blocks[0][2]
    miss_share = 1.0 - private_bytes / (cached * 4)
    near_min = min(b[1].minimum for b in blocks)
    near_max = max(b[1].maximum for b in blocks)
    at_min = min(b[4].minimum for b in blocks)
    at_max = max(b[4].maximum for b in blocks)
    per = (at_min - near_min) / (n * miss_share)
    lo, hi = max((at_min - near_max) / (n * miss_share), 0.0), (at_max - near_min) / (n * miss_share)
    method = (f"{n} reads of floats at random indices (streamed from an index array) over {cached * 4 >> 10} KiB "
              f"minus the same reads masked to {GATHER_NEAR * 4 >> 10} KiB (minimum event times of "
              f"{sum(b[4].n for b in blocks)} and {sum(b[1].n for b in blocks)} runs in {len(blocks)} blocks), per "
              f"read, over the share {miss_share:.3f} that misses a private level of {private_bytes / 2**10:.0f} KiB; "
              f"{PER} independent reads per work-item, summed")
    if not per > 0:
        return {"gather_llc_s": failed("s", method, f"the reads in the cache were not slower than the near ones "
                                                    f"({per:.3g} s)")}
    say(progress, f"bandwidth: a gathered read the last-level cache serves adds {per * 1e9:.3g} ns "
                  f"({at_min * 1e3:.3g} ms at {cached * 4 >> 10} KiB, {near_min * 1e3:.3g} ms near)")
    return {"gather_llc_s": entry(per, "s", method, (lo, hi), cached_s=at_min, near_s=near_min, reads=n,
                                  span_bytes=cached * 4, private_bytes=private_bytes)}


KNEE_SPREAD = 1.25  # the reported cache plus the private levels a CPU's cores add beside a shared last level


def streaming_knee(curve: list[dict], ratio: float = 1.2, reported: float | None = None) -> int | None:
    """Largest working set whose read bandwidth is still ``ratio`` x that of the largest one: past it the
    stream comes from memory, not from a cache. With ``reported`` (the cache size the driver reports), sets over
    ``KNEE_SPREAD`` times it are no candidates: no cache holds them, and a fast point there is a shared memory's
    fast state (a Zen 4 VM reporting 32 MiB gave 42.5 GB/s at 64 MiB against 32.2 at 512 MiB)."""
    if len(curve) < 3:
        return None
    floor = curve[-1]["Bps"]
    limit = KNEE_SPREAD * reported if reported else math.inf
    above = [p["bytes"] for p in curve[:-1] if p["Bps"] > ratio * floor and p["bytes"] <= limit]
    return max(above) if above else None


def working_set_curve(backend: Any, buf: Any, out: Any, count: int, quick: bool, progress: Progress) -> dict:
    """Read bandwidth against working-set size (1 MiB .. the bandwidth arrays), each size read repeatedly:
    where it falls to the memory's is the last-level cache as a stream sees it. A GPU reads float4 in strided
    sweeps, a CPU float16 contiguously (its fastest read: the caches' bandwidth must show above the memory's)."""
    cpu = layout(backend.info.type) == "contiguous"
    width = 16 if cpu else 4
    per = LAYOUTS[layout(backend.info.type)]
    kernel = _kernel(backend, "read", width)
    policy = bench(quick, 0.2, 0.05, warmup=2)
    local = (min(256, backend.info.max_work_group_size),)
    sizes = []
    nbytes = 1 << 20
    while nbytes <= count * 4:
        items = max(1, nbytes // (4 * width * per))
        items -= items % local[0] or 0
        if items > 0:
            sizes.append(items)
        nbytes = int(nbytes * (2 if quick else 2**0.5))
    # each size in a block of its own (a larger size run in between would evict the prefix it re-reads), in two
    # passes, up and down, each size keeping its fastest: a shared machine's memory moves between states that
    # last seconds, and one pass would draw the knee from them
    fastest = dict.fromkeys(sizes, float("inf"))
    for order in (sizes, sizes[::-1]):
        for items in order:
            t = time_launch(backend, kernel, (items,), local, [buf, out, np.float32(-1.0)], policy).device
            fastest[items] = min(fastest[items], t.minimum)
    curve = [{"bytes": items * per * width * 4, "Bps": items * per * width * 4 / fastest[items]} for items in sizes]
    reported = backend.info.extra.get("l2_cache_bytes") or backend.info.extra.get("global_mem_cache_bytes")
    knee = streaming_knee(curve, reported=reported)
    say(progress, f"bandwidth: streaming reads fall to memory speed past {knee / 2**20 if knee else 0:.0f} MiB")
    method = (f"largest working set whose float{width} read bandwidth ({'contiguous' if cpu else 'strided sweeps'}, "
              "repeated reads of the same array prefix) is still 1.2x that of the largest working set"
              + (f", of those at most {KNEE_SPREAD}x the {reported / 2**20:.0f} MiB cache the driver reports"
                 if reported else ""))
    return {"working_set_curve": curve,
            "streaming_llc_bytes": entry(knee, "B", method) if knee else failed("B", method, "no cache regime seen")}


STREAMS_SOURCE = r"""
KERNEL void rows(GLOBAL const float *a, GLOBAL float *out, long row, float never) {
    float v = a[(long)get_global_id(1) * row + (long)get_global_id(0)];
    if (v == never) out[0] = v;
}
"""
STREAM_COUNTS = (4, 8, 16, 24, 32, 48, 64)
STREAM_RATIO = 1.2  # a count of streams costs at most this much more per line than one stream: the core follows them
STREAM_ROW = 17408  # floats between the rows: 68 KiB, 17 pages, a multiple of every group's width (16 x 64)


def stream_capacity(backend: Any, buf: Any, out: Any, count: int, quick: bool, progress: Progress) -> dict:
    """How many sequential streams a CPU core follows at the speed of one: a 2-D work-group of 16 x K work-items
    reads one 64-byte line of each of K rows 68 KiB apart, and the groups walk along the rows, so each core streams
    through K pages at once (a 2-D stencil's tile: K rows); against groups of 16K x 1, the same work-items and
    lines from one row (which prices the groups themselves). Prefetchers follow a limited number of streams: past
    them each line is a demand miss, a scattered read (a 5-point stencil in 16 x 16 groups, 34 rows at once, ran
    1.5-2x its 256 x 1 time on a Zen 4 VM, whose curve doubles from 16 to 24 streams). ``bandwidth.streams`` is the
    largest K whose tile-over-row ratio stays within ``STREAM_RATIO`` of the fewest streams'."""
    local_max = backend.info.max_work_group_size
    counts = [k for k in STREAM_COUNTS if 16 * k <= local_max]
    rows = count // STREAM_ROW
    rows -= rows % max(counts)
    if not counts or rows < max(counts):
        return {}
    say(progress, f"bandwidth: {counts[0]} .. {counts[-1]} streams at once per work-group (a 2-D tile's rows)")
    kernel = build(backend, _program(backend), "rows", {"PER": PER})
    # no warm-up round: the kinds and widths have just read the whole array, and a shape's first launch compiles
    # its work-group function before the event starts (PoCL), so a warm-up would only cost a round (0.6-0.75 s)
    engine = Engine(bench(quick, 0.3, 0.05, warmup=0).but(min_samples=5))
    args = [buf, out, np.int64(STREAM_ROW), np.float32(-1.0)]

    def run(local: tuple[int, int]):
        def once() -> float:
            event = engine.launch_once(backend, kernel, (STREAM_ROW, rows), local, args)
            backend.finish()
            return event.seconds()
        return once

    shapes = [shape for k in counts for shape in ((16, k), (16 * k, 1))]
    timings = engine.interleave([run(shape) for shape in shapes])
    curve, capacity = [], None
    base = timings[0].device.model / timings[1].device.model
    for i, k in enumerate(counts):
        tile, row = timings[2 * i].device.model, timings[2 * i + 1].device.model
        ratio = tile / row / base
        curve.append({"streams": k, "tile_s": tile, "row_s": row, "ratio": ratio})
        if ratio <= STREAM_RATIO and (capacity is None or capacity == counts[i - 1]):
            capacity = k
    method = (f"the largest K whose read of {rows} rows 68 KiB apart in 16 x K work-groups (K streams per core), "
              f"over the same in 16K x 1 groups (one row: the groups' own cost), is at most {STREAM_RATIO}x that "
              f"ratio at {counts[0]} streams; 10th percentiles, the shapes in alternation")
    if capacity is None:
        return {"stream_curve": curve, "streams": failed("streams", method, "no count of streams kept the speed "
                                                                            f"of {counts[0]}")}
    say(progress, f"bandwidth: a core follows {capacity} streams at the speed of one")
    return {"stream_curve": curve, "streams": entry(float(capacity), "streams", method)}


def peak_bps(info: Any) -> float | None:
    """Theoretical DRAM bandwidth from the memory clock and bus width (double data rate), where known."""
    mhz = info.extra.get("memory_clock_mhz")
    bits = info.extra.get("memory_bus_width_bits")
    if mhz and bits:
        return 2.0 * mhz * 1e6 * bits / 8
    return None


def measure(backend: Any, quick: bool = False, progress: Progress = None,
            llc_bytes: int | None = None, private_bytes: int | None = None,
            shared_bytes: int | None = None) -> dict[str, Any]:
    info = backend.info
    limit = int(min(info.extra.get("max_mem_alloc_bytes") or info.global_mem_bytes // 4, info.global_mem_bytes // 4))
    llc = llc_bytes or 8 << 20
    array_bytes = int(min(max(8 * llc, 512 << 20), limit, 1 << 30))
    count = array_bytes // 4
    count -= count % (PER * 16 * 1024)  # whole vectors for every width and work-group
    array_bytes = count * 4
    say(progress, f"bandwidth: 3 arrays of {array_bytes >> 20} MiB of random floats")
    # a random block repeated (count is a whole number of blocks): every page holds data, drawn in a fraction of
    # the time of the whole array
    host = np.empty(count, np.float32)
    host.reshape(-1, 1 << 16)[:] = np.random.default_rng(3).random(1 << 16, dtype=np.float32)
    bufs = [backend.to_device(host)[0] for _ in range(3)]
    del host
    out = backend.alloc(4 * 1024 * 1024)
    peak = peak_bps(info)
    policy = bench(quick, 0.5, 0.1)
    local = (min(256, info.max_work_group_size),)
    by_width: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    widths = VECTOR_WIDTHS[backend.kind]
    lay = layout(info.type)
    cases = [(kind, width) for kind in KINDS for width in widths]
    if quick and lay == "contiguous":
        # the writing kinds at a scalar float (the width of a kernel written per element, which the compiler
        # vectorises across work-items) and float4; reads at float4 and a whole 64-byte line per work-item (a float
        # read kernel is held by its guard, 16 GB/s on a Zen 4 VM, and never the memory's read capability)
        cases = [(kind, width) for kind, width in cases if width in ((4, 16) if kind == "read" else (1, 4))]
    args = {"read": [bufs[0], out, np.float32(-1.0)], "write": [bufs[0], np.float32(1.5)],
            "copy": [bufs[0], bufs[1]], "triad": [bufs[0], bufs[1], bufs[2], np.float32(3.0)]}
    # every kind and width in alternation, one launch of each per round, at least ROUNDS rounds: all figures see
    # the same states of a shared memory (on a 2-vCPU Zen 4 VM 33-36 GB/s with bursts of 50-59 lasting seconds),
    # and each is the modelling figure of its runs, the statistic the kernels' own times are modelled with: one
    # run in a burst does not set it, as the minimum of a short calibration did
    engine = Engine(policy.but(budget_s=policy.budget_s * len(cases), min_samples=max(policy.min_samples, ROUNDS)))

    def run(kind: str, width: int):
        kernel = _kernel(backend, kind, width)
        items = count // width // LAYOUTS[lay]

        def once() -> float:
            event = engine.launch_once(backend, kernel, (items,), local, args[kind])
            backend.finish()
            return event.seconds()
        return once

    gather = gather_setup(backend, count, quick)
    cached = llc_span(private_bytes, shared_bytes or llc_bytes, count) if lay == "contiguous" else None
    gathers = [gather_times(backend, bufs[0], out, count, quick, gather, cached)]
    timings = engine.interleave([run(kind, width) for kind, width in cases])
    for (kind, width), timing in zip(cases, timings):
        t = timing.device
        moved = KINDS[kind] * array_bytes
        bps = moved / t.model
        method = (f"{kind}, float{width if width > 1 else ''}, {KINDS[kind]} x {array_bytes >> 20} MiB, "
                  f"{'one vector per work-item' if lay == 'contiguous' else f'{PER} strided sweeps'}, bytes / "
                  f"the {MODEL_STATISTIC} of {t.n} event times in alternation with the other kinds and widths, "
                  "after warm-up")
        if peak and bps > peak:
            by_width[kind][str(width)] = failed("B/s", method, f"{bps:.3g} B/s exceeds the device's peak "
                                                f"{peak:.3g} B/s", measured_Bps=bps)
        else:
            by_width[kind][str(width)] = entry(bps, "B/s", method, (moved / t.model_ci_high, moved / t.model_ci_low),
                                               median_Bps=moved / t.median, minimum_Bps=moved / t.minimum, n=t.n)
        say(progress, f"bandwidth: {kind} float{width}: {bps / 1e9:.2f} GB/s")
    result: dict[str, Any] = {"by_width": by_width, "array_bytes": array_bytes, "peak_Bps": peak, "layout": lay}
    result.update(working_set_curve(backend, bufs[0], out, count, quick, progress))
    if lay == "contiguous":
        result.update(stream_capacity(backend, bufs[0], out, count, quick, progress))
    gathers.append(gather_times(backend, bufs[0], out, count, quick, gather, cached))
    result.update(gather_cost(gathers, llc_bytes, progress))
    if cached:
        result.update(gather_llc_cost(gathers, cached, float(private_bytes), progress))
    for kind in KINDS:
        ok = {w: e for w, e in by_width[kind].items() if e["status"] == "ok"}
        if ok:
            best_w = max(ok, key=lambda w: ok[w]["value"])
            result[f"{kind}_Bps"] = {**ok[best_w], "width": int(best_w)}
        else:
            result[f"{kind}_Bps"] = failed("B/s", f"{kind} bandwidth", "every vector width failed")
    return result
