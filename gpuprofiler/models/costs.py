"""What a launch costs besides its own instructions, from the hardware profile: the fixed launch overhead,
the dispatch of its work-groups, and memory time from the kernel's own read/write mix and access width.

Both static models (max-plus and the PTX pipeline) use these, so a kernel's memory and launch terms mean
the same in both:

* **launch**: ``fixed`` -- the device event time of an empty one-work-item kernel (``launch.event_s``, else
  the fit's intercept ``launch.fixed_s``); ``dispatch`` -- what dispatching the work-groups alone costs,
  the time per work-group of empty kernels times the work-groups (an empty kernel of that size). Dispatch
  overlaps the work, so a launch takes ``fixed + max(dispatch, work)``, never their sum.
* **DRAM**: bytes over the bandwidth the profile measured for the same mix of reads and writes (read-only,
  write-only, copy 1:1, triad 2:1, interpolated in time per byte) and the same access width
  (``bandwidth.by_width``: 1, 2, 4 ... floats per access).
* **last-level cache**: reads that hit it, over the peak of the profile's bandwidth-against-working-set
  curve (streams that fit the cache); its capacity as streams see it is ``bandwidth.streaming_llc_bytes``.
  A launch repeated on the same buffers -- as a kernel is measured, and as a program's loop runs it -- finds
  them all in that cache when together they fit it, and moves nothing from DRAM; when they do not, an LRU
  cache keeps nothing of a cyclic stream, and every launch reads them from DRAM again (:func:`resident`).
* The access width matters on a GPU, where each work-item's access is part of a memory request, and on a CPU whose
  profile measured its bandwidths the way CPU kernels run (``bandwidth.layout`` contiguous: one vector per
  work-item, which PoCL vectorises across work-items): there a kernel written per float runs like the float
  figures (the scalar triad and copy 2-15% below float4's on a Zen 4 VM), and reads take the best width, the
  memory's read capability (a float read kernel is held by its guard, not by memory). A CPU writes a line it
  does not hold by reading it first (write-allocate): its DRAM time is what the cores wait to read, the bytes
  they read plus the lines they write without having read them, over the bandwidth of that mix, while the
  write-backs drain behind (:func:`cpu_fills_only`). On that VM, in a slow and a fast memory state alike, loads
  plus fills over one read bandwidth gave vadd, saxpy (which writes the lines it read) and scale's times within
  -4..+16% (``benchmarks/cpu_streams.py``). An older CPU profile (strided bandwidth kernels) keeps the kinds' best
  figure, for kinds that write over the widths whose stores fill less than a 64-byte line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from gpuprofiler.profile.hardware import Figure, HardwareView, view

# Paper defaults where a profile has no launch figures (Zhang, Chen & Ming's fit on Turing)
PAPER_LAUNCH = (3.824e-12, 2.882e-6)
# read fraction of each bandwidth kind the profile measures
MIXES = (("write", 0.0), ("copy", 0.5), ("triad", 2.0 / 3.0), ("read", 1.0))
CPU_LINE_BYTES = 64


@dataclass(frozen=True)
class Launch:
    """A launch's fixed overhead and its work-group dispatch time (seconds), with their sources."""

    fixed_s: float
    dispatch_s: float
    source: str

    def total(self, work_s: float) -> float:
        """The launch's time when its own work takes ``work_s``: dispatch overlaps the work."""
        return self.fixed_s + max(self.dispatch_s, work_s)


def dispatch_per_block(profile) -> Figure:
    """Seconds per work-group of an empty launch: the profile's ``launch.per_block_s``, else the slope of its
    empty-kernel event times over the work-groups launched (``launch.points``, every work-group size),
    which is what dispatch depends on (an empty kernel of 65536 groups takes as long with 64 or 256 threads
    per group)."""
    hw = view(profile)
    fig = hw.figure("launch.per_block_s")
    if fig.ok and fig.value > 0:
        return fig
    points = hw.launch_points
    if len(points) >= 3 and len({b for b, _ in points}) >= 3:
        x = np.array([b for b, _ in points], float)
        y = np.array([s for _, s in points], float)
        fit = stats.linregress(x, y)
        if fit.slope > 0:
            half = stats.t.ppf(0.975, max(len(x) - 2, 1)) * fit.stderr
            return Figure(float(fit.slope), "OLS of profile launch.points (empty-kernel event time) over work-groups",
                          (float(max(fit.slope - half, 0.0)), float(fit.slope + half)), measured=True)
    return Figure(None, "the profile has no launch points to fit a per-work-group time to")


def launch_costs(profile, threads: int, blocks: int | None = None) -> tuple[Launch, tuple[Launch, Launch]]:
    """The launch terms for ``threads`` threads in ``blocks`` work-groups, and at the low and high ends of the
    profile's intervals."""
    hw = view(profile)
    event, fixed = hw.figure("launch.event_s"), hw.figure("launch.fixed_s")
    base = event if event.ok and event.value > 0 else fixed
    if base.ok and base.value > 0:
        lo_f, hi_f = (max(v, 0.0) for v in base.bounds())
        f, f_src = base.value, base.source
    else:
        f, lo_f, hi_f, f_src = PAPER_LAUNCH[1], PAPER_LAUNCH[1], PAPER_LAUNCH[1], "Zhang et al.'s Turing intercept"
    per_block = dispatch_per_block(profile) if blocks else Figure(None, "")
    slope = hw.figure("launch.per_thread_s")
    if per_block.ok:
        count, fig, what = blocks, per_block, "work-groups"
    elif slope.ok and slope.value > 0:
        count, fig, what = threads, slope, "threads"
    else:
        count, fig, what = threads, Figure(PAPER_LAUNCH[0], "Zhang et al.'s Turing slope"), "threads"
    a, (lo_a, hi_a) = fig.value, (max(v, 0.0) for v in fig.bounds())
    source = f"fixed: {f_src}; dispatch: {fig.source} x {what}"
    return (Launch(f, a * count, source),
            (Launch(lo_f, lo_a * count, source), Launch(hi_f, hi_a * count, source)))


def _width_key(keys: list[str], width_bytes: float) -> str | None:
    """The ``by_width`` key (floats per access) nearest ``width_bytes``."""
    keys = [k for k in keys if k.isdigit() and int(k) > 0]
    if not keys:
        return None
    want = max(1.0, width_bytes / 4.0)
    return min(keys, key=lambda k: (abs(np.log2(int(k)) - np.log2(want)), int(k)))


def _allocating(hw: HardwareView, kind: str) -> Figure | None:
    """A CPU's best figure of a kind that writes over the vector widths whose stores fill less than a cache line:
    the stores of kernels compiled from scalar work-items, which read each line for ownership before writing it."""
    best = None
    for key in hw.children(f"bandwidth.by_width.{kind}"):
        if not key.isdigit() or int(key) * 4 >= CPU_LINE_BYTES:
            continue
        fig = hw.figure(f"bandwidth.by_width.{kind}.{key}")
        if fig.ok and fig.value > 0 and (best is None or fig.value > best.value):
            best = fig
    return best


def _kind(hw: HardwareView, kind: str, width_bytes: float | None) -> Figure:
    """The profile's bandwidth of one kind at the access width (``by_width``), else its best over widths (on a CPU
    with an older, strided profile, for a kind that writes, over the widths whose stores fill less than a line).
    A CPU's reads take the best width whatever the access."""
    if hw.kind == "cpu" and kind == "read":
        return hw.figure("bandwidth.read_Bps")
    if width_bytes:
        key = _width_key(hw.children(f"bandwidth.by_width.{kind}"), width_bytes)
        fig = hw.figure(f"bandwidth.by_width.{kind}.{key}") if key is not None else None
        if fig is not None and fig.ok and fig.value > 0:
            return fig
    elif hw.kind == "cpu" and kind != "read":
        fig = _allocating(hw, kind)
        if fig is not None:
            return fig
    return hw.figure(f"bandwidth.{kind}_Bps")


def dram_bandwidth(profile, read_bytes: float, write_bytes: float, width_bytes: float | None = None,
                   default: float | None = None) -> Figure:
    """Bandwidth for this mix of reads and writes at this access width (on a GPU): time per byte interpolated
    over the read fraction between the profile's write, copy, triad and read figures (those it has); ``default``
    (with a reference board's figure) where it has none."""
    hw = view(profile)
    if hw.kind != "gpu" and not (hw.kind == "cpu" and hw.bandwidth_layout == "contiguous"):
        width_bytes = None
    total = read_bytes + write_bytes
    frac = read_bytes / total if total > 0 else 1.0
    points = []
    for kind, f in MIXES:
        fig = _kind(hw, kind, width_bytes)
        if fig.ok and fig.value > 0 and np.isfinite(1.0 / fig.value):  # a denormal bandwidth is no figure
            points.append((f, fig))
    if not points:
        if default is None:
            return Figure(None, "the profile measured no bandwidth")
        return Figure(float(default), "reference board bandwidth (the profile measured none)")
    xs = np.array([p[0] for p in points])
    per_byte = np.array([1.0 / p[1].value for p in points])
    with np.errstate(divide="ignore", over="ignore"):
        lo = np.array([1.0 / p[1].bounds()[1] for p in points])
        hi = np.array([1.0 / p[1].bounds()[0] for p in points])
    lo = np.where(np.isfinite(lo), lo, per_byte)
    hi = np.where(np.isfinite(hi), hi, per_byte)
    value = 1.0 / float(np.interp(frac, xs, per_byte))
    interval = (1.0 / float(np.interp(frac, xs, hi)), 1.0 / float(np.interp(frac, xs, lo)))
    width = f", {width_bytes:g}-byte accesses" if width_bytes else ""
    names = ", ".join(p[1].source.removeprefix("profile ") for p in points)
    return Figure(value, f"profile bandwidth at read fraction {frac:.2f}{width} (from {names})", interval,
                  measured=True)


def cpu_fills_only(hw: HardwareView) -> bool:
    """Whether a launch's DRAM writes count only their fills (write-allocate: lines written without being read,
    ``c[i] = a[i] + b[i]``'s c but not ``y[i] += ...``'s y), the write-backs draining behind: on a CPU whose
    profile measured its bandwidths the same way (contiguous layout). Elsewhere every written byte counts, as the
    older profiles' figures were measured for."""
    return hw.kind == "cpu" and hw.bandwidth_layout == "contiguous"


def cache_bandwidth(profile) -> Figure:
    """Read bandwidth of data resident in the last-level cache: the peak of the working-set curve."""
    curve = view(profile).bandwidth_curve
    if not curve:
        return Figure(None, "the profile has no bandwidth.working_set_curve")
    size, bw = max(curve, key=lambda p: p[1])
    return Figure(bw, f"profile bandwidth.working_set_curve peak ({bw / 1e12:.3g} TB/s at {size / 2**20:.0f} MiB)",
                  measured=True)


def cache_capacity(profile, default: float | None = None) -> Figure:
    """The last-level cache as streams see it: ``bandwidth.streaming_llc_bytes``, else the largest latency
    knee, else the capacity the driver reports, else ``default``."""
    hw = view(profile)
    fig = hw.figure("bandwidth.streaming_llc_bytes")
    if fig.ok and fig.value > 0:
        return fig
    if hw.caches:
        c = hw.caches[-1]
        return Figure(c.size_bytes, f"profile caches: L{c.level} (latency knee)", measured=True)
    reported = hw.reported_llc_bytes
    if reported:
        return Figure(float(reported), "the driver's reported cache size")
    return Figure(None if default is None else float(default), "reference board L2" if default else "unknown")


def resident(footprints: list[float | None], capacity: float | None) -> bool:
    """Whether a launch repeated on the same buffers finds them in the last-level cache: every buffer's size is
    known and together they fit its capacity."""
    return bool(footprints) and capacity is not None and all(f is not None and f > 0 for f in footprints) \
        and sum(footprints) <= capacity


def scattered(profile, bandwidth: float, write: bool = False) -> Figure:
    """Seconds per sector read (or written back) at a scattered address when the device is full of such
    accesses. A read: the profile's ``bandwidth.gather_s`` (independent reads at random addresses, over the same
    reads near) where measured. Else, and for a write, ``memory.read_step_s`` (``write_step_s``), the slope of the
    time of n concurrent work-items each touching cold lines; else a 64-byte line at ``bandwidth``. On a CPU device
    a work-group's work-items run one after another, so the read step (a pointer chase) is one miss's latency, not
    the rate of independent gathers, which an out-of-order core overlaps: there a line at the bandwidth."""
    key = "memory.write_step_s" if write else "memory.read_step_s"
    hw = view(profile)
    gather = hw.figure("bandwidth.gather_s")
    if not write and gather.ok and gather.value > 0:
        return gather
    fig = hw.figure(key)
    if hw.kind == "cpu" and not write:
        return Figure(64.0 / bandwidth, "a 64-byte line at the DRAM bandwidth (a CPU overlaps independent gathers; "
                                        f"{key} is a dependent chain's latency)")
    if fig.ok and fig.value > 0:
        return fig
    return Figure(64.0 / bandwidth, f"a 64-byte line at the DRAM bandwidth (the profile has no {key})")


def random_hit_rate(footprint: float, capacity: float | None, other_per_access: float = 0.0) -> float:
    """Share of accesses spread evenly at random over ``footprint`` sectors that hit an LRU cache of ``capacity``
    sectors while ``other_per_access`` other new sectors (a stream beside the gather) pass through it per access.

    A sector is re-referenced after a geometric number of accesses k (mean ``footprint``); it survives if the
    distinct sectors touched meanwhile, ``footprint * (1 - exp(-k / footprint)) + other_per_access * k``, stay
    within the capacity: the hit rate is P(k < k*) = 1 - exp(-k* / footprint) for the k* where they fill it
    (Hagersten's StatCache reasoning, with the stream's pollution added)."""
    if capacity is None or footprint <= 0:
        return 0.0
    if footprint + other_per_access * footprint * 50.0 <= capacity:
        return 1.0

    def filled(u: float) -> float:
        return footprint * (1.0 - np.exp(-u)) + other_per_access * footprint * u - capacity

    lo, hi = 0.0, 50.0
    if filled(hi) < 0:
        return 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if filled(mid) < 0 else (lo, mid)
    return float(1.0 - np.exp(-lo))


def refetched(requested: float, footprint: float, capacity: float | None) -> float:
    """Bytes a level below a cache moves for ``requested`` bytes of accesses over ``footprint`` distinct bytes:
    each byte once, and for a footprint beyond the capacity the re-reads that miss (a reused byte is still
    there with probability capacity / footprint, the expectation for accesses spread evenly over it)."""
    if requested <= footprint or footprint <= 0:
        return requested
    if capacity is None or capacity >= footprint:
        return footprint
    return footprint + (requested - footprint) * (1.0 - capacity / footprint)


def store_stalls(profile, levels, only: int | None = None) -> tuple[float, str]:
    """Seconds a CPU's cores wait on stores that miss a private cache level for a line their unit touched before
    (a conflict or capacity miss, not a first touch, which prefetch and write-combining hide): a store commits in
    order, so each waits for its line from the next level. One core's such stores wait one after another, the
    cores in parallel: sum over the private levels of store re-misses x the next level's latency (the profile's
    latency curve; DRAM's past the last knee) / compute units. ``levels``: a cache analysis's levels (``only``: the
    one at that index alone). 0 on a GPU, whose L1 does not allocate lines on stores."""
    hw = view(profile)
    units = hw.compute_units
    if hw.kind != "cpu" or not units.ok:
        return 0.0, "no store stalls off a CPU"
    latencies = [c.latency_s for c in hw.caches]
    dram = hw.figure("memory.dram_latency_s")
    total, parts = 0.0, []
    for i, lv in enumerate(levels):
        if (only is not None and i != only) or lv.shared or not getattr(lv, "store_remisses", 0.0) > 0:
            continue
        nxt = latencies[i + 1] if i + 1 < len(latencies) else dram.value
        if not nxt:
            continue
        total += lv.store_remisses * nxt
        parts.append(f"{lv.store_remisses:.3g} stores re-missing {lv.name} x {nxt * 1e9:.3g} ns")
    if not parts:
        return 0.0, "no store misses a private level for a line it held before"
    return total / units.value, f"{'; '.join(parts)}, over {units.value:g} cores"


def tlb_walks(profile, analysis) -> tuple[float, str]:
    """Seconds a CPU's cores spend on page walks: a cache analysis's accesses x translation's mean extra time per
    access (each sampled access at the profile's ``tlb.curve`` for its page reuse distance: what an independent load
    cycling over that many 4 KiB pages costs over a packed one, walks overlapped as a core overlaps them) / compute
    units. What the walks add to loads that hit the caches (gesummv at 3000 on this VM's PoCL: 1.8e7 loads cycling
    over 6000 pages, 6.9 ms of walks on 7.2 ms of cached work, 14.1 ms measured); the cache-miss law adds them to
    the work, the max-plus model to a CPU's chains (:func:`~gpuprofiler.models.maxplus.models._cpu_chains`)."""
    hw = view(profile)
    units = hw.compute_units
    per = getattr(analysis, "tlb_s_per_access", 0.0) if analysis is not None else 0.0
    if hw.kind != "cpu" or not units.ok or not per > 0:
        return 0.0, "no page walks: no TLB curve in the profile, or every access's page within the TLB's reach"
    accesses = float(analysis.accesses)
    return (accesses * per / units.value,
            f"{accesses:.3g} accesses x {per * 1e12:.3g} ps of page walks each (profile tlb.curve at their page "
            f"reuse distances; {analysis.tlb_miss_ratio:.3g} of them past the reach of {analysis.tlb_pages} pages), "
            f"over {units.value:g} cores")


def level_bandwidths(profile) -> list[float | None] | None:
    """Per cache level, the read bandwidth that serves its misses: where the curve spans the geometric mean of this
    level's size and the next one's, the best it measured at a working set that fits the next level, not this one
    (interference from other tenants only slows a point, so the fastest is the least disturbed; this VM's L3 range
    read 46-60 GB/s in one calibration, 66-70 in the next), else the curve at that mean; None where the curve was
    not measured that small (a CPU's L1, whose curve starts at 1 MiB: a calibration whose L2 knee came out at
    2.9 MiB would otherwise price its L1's misses at the L3's bandwidth), DRAM's for the last; None without a
    bandwidth."""
    from gpuprofiler.models.cache.analysis import cache_levels

    hw = view(profile)
    levels = cache_levels(profile)
    dram = hw.figure("bandwidth.read_Bps")
    curve = hw.bandwidth_curve
    if not levels or not dram.ok:
        return None
    out: list[float | None] = []
    for i, (_, size) in enumerate(levels):
        if i + 1 == len(levels) or not curve:
            out.append(dram.value)
            continue
        ws = math.sqrt(size * levels[i + 1][1])  # a working set that fits the next level, not this one
        if not curve[0][0] <= ws <= curve[-1][0]:
            out.append(None)
            continue
        inside = [bw for s, bw in curve if size < s <= levels[i + 1][1]]
        if inside:
            out.append(float(max(inside)))
            continue
        xs, ys = np.log([p[0] for p in curve]), np.log([p[1] for p in curve])
        out.append(float(math.exp(np.interp(math.log(ws), xs, ys))))
    return out


def llc_level(levels) -> int | None:
    """The index of a CPU core's last private level, the one whose misses the shared last-level cache serves."""
    for i in range(len(levels) - 1):
        if not levels[i].shared and levels[i + 1].shared:
            return i
    return None


def _served_loads(lv, last) -> float:
    """Loads per launch that miss private level ``lv`` but not the last level: a later cache serves them."""
    return max(0.0, lv.misses * (1.0 - lv.write_share) - last.misses)


def _scattered_loads(analysis, i: int, last) -> float:
    """Loads per launch that miss private level ``i`` but not the last level, at lines no prefetcher brings."""
    lv = analysis.levels[i]
    return _served_loads(lv, last) * analysis.scattered_share(lv)


def scattered_served(profile, analysis, last=None) -> tuple[float, str]:
    """Seconds the loads that miss a CPU core's last private level at lines no prefetcher brings (a column walk's
    new page each step, a gather's: :meth:`~gpuprofiler.models.cache.analysis.CacheAnalysis.scattered_share`) add to
    the work when the shared last-level cache serves them: each at the profile's ``bandwidth.gather_llc_s``, what
    such a read added to the same reads hitting a private level, the device full of them. Added to the work, not a
    bound beside it, as the microbenchmark measures it (the same summed reads, near and in the cache, one add of a
    work-item's chain per read). On a Zen 4 VM's PoCL, matmul_naive at n = 512, whose column walk of B crowds 64 of
    the L2's 2048 sets: 0.54-1.06 ns each in eight quick draws, 1.1e8 such loads (0.8 per n^3), 1.00-1.04 ns
    per n^3 measured against 0.52 at 496 and 528. A longer chain per load may hide more of it: on the Zen 3 VM the
    crowded lines added 0.17-0.21 ns per n^3 to matmul_naive and 0.88-0.91 to the same loads summed into four
    chains (``results/pocl-pthread-amd-epyc/zen3/matmul_mm4/``). ``last``: as in :func:`cache_served`. 0 off a CPU
    or without the figure."""
    hw = view(profile)
    levels = getattr(analysis, "levels", None) if analysis is not None else None
    fig = hw.figure("bandwidth.gather_llc_s")
    if hw.kind != "cpu" or not levels or not fig.ok or not fig.value > 0:
        return 0.0, "no scattered loads priced: off a CPU, or no bandwidth.gather_llc_s in the profile"
    i = llc_level(levels)
    if i is None:
        return 0.0, "no private level whose misses a shared cache serves"
    loads = _scattered_loads(analysis, i, last if last is not None else levels[-1])
    if not loads > 0:
        return 0.0, f"no load misses {levels[i].name} at a scattered line that a later cache serves"
    return loads * fig.value, (f"{loads:.3g} loads missing {levels[i].name} at scattered lines x "
                               f"{fig.value * 1e9:.3g} ns (profile bandwidth.gather_llc_s)")


def cache_served(profile, analysis, last=None, bandwidths=None, only: int | None = None) -> tuple[float, str]:
    """Seconds a later cache level needs to deliver the loads that miss a CPU's private level: each such line at
    the bandwidth the profile measured for working sets that fit the next level, not this one
    (:func:`level_bandwidths`). A bound beside the cores' work, not added to it: an out-of-order core keeps issuing
    its work while the lines are in transfer (the fully overlapping case of the Execution-Cache-Memory model).
    This VM's PoCL, matmul_naive, whose column walk crowds the L2's sets at 512, 768, 1152, 1280 and 1536: 0.84 to
    1.35 ns per n^3 measured, against 0.68-0.72 at the sides beside them; the cache-miss law fitted on a sweep of
    112..256 predicts 0.84-0.93 with the lines as a bound, 1.18-1.72 with them added to the work (at 1024, where
    the walk also falls into one L1 set, 2.23 measured: 0.90 and 1.59). 0 off a CPU, or where that bandwidth was
    not measured (an L1's misses: the curve starts past it). ``last``: the level whose misses DRAM serves (the
    analysis's last by default); ``bandwidths``: :func:`level_bandwidths`' when already had; ``only``: the level at
    that index alone. The scattered loads :func:`scattered_served` prices are not counted here."""
    hw = view(profile)
    levels = getattr(analysis, "levels", None) if analysis is not None else None
    if hw.kind != "cpu" or not levels:
        return 0.0, "no cache-served misses off a CPU"
    bws = bandwidths if bandwidths is not None else level_bandwidths(profile)
    last = last if last is not None else levels[-1]
    gather = hw.figure("bandwidth.gather_llc_s")
    apart = llc_level(levels) if gather.ok and gather.value > 0 else None
    total, parts = 0.0, []
    for i, lv in enumerate(levels[:-1]):
        bw = bws[i] if bws and i < len(bws) else None
        if lv.shared or not bw or (only is not None and i != only):
            continue
        loads = _served_loads(lv, last)
        if i == apart:
            loads -= _scattered_loads(analysis, i, last)
        if loads > 0:
            total = max(total, loads * analysis.order.line_bytes / bw)
            parts.append(f"{loads:.3g} loads missing {lv.name} x a line at {bw / 1e9:.3g} GB/s")
    return total, ("; ".join(parts) + " (the working-set curve past that level), the longest"
                   if parts else "no load misses a private level that a later cache serves")
