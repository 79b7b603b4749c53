"""What bounds a launch besides one work-item's critical path: the device-wide throughputs the overlap model
puts beside its batches of resident work-items.

From the built graph (each access's request figures, :mod:`~gpuprofiler.models.maxplus.requests`) and the
hardware profile, for the whole launch:

* **DRAM**: each array's bytes once (its footprint, where the spec gives it), plus the re-reads a too-small
  last-level cache loses; gathered arrays whose re-reads spread at random hit with an LRU cache's probability
  and miss as scattered sectors; stores whose requests spread over many sectors are written back sector by
  sector. Time from the profile's bandwidth for this read/write mix and access width, and its scattered
  read/write steps (:mod:`gpuprofiler.models.costs`, shared with the PTX pipeline model). A launch whose
  buffers together fit the last-level cache reads nothing from DRAM when repeated.
* **last-level cache**: the sectors that miss the work-groups' L1, at the profile's cache bandwidth.
* **L1 / shared-memory data path** (GPUs): one request takes as many cycles as the 128-byte lines it touches
  (at least its sectors over 4), a shared-memory request as many as its bank-conflict passes; each SM serves one
  per cycle.
* **issue**: every operation of every work-item at the profile's device-wide throughput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.models.costs import (
    cache_bandwidth,
    cache_capacity,
    cpu_fills_only,
    dram_bandwidth,
    random_hit_rate,
    refetched,
    resident,
    scattered,
    tlb_walks,
)
from gpuprofiler.models.maxplus.graph import Kernel
from gpuprofiler.models.maxplus.requests import SECTOR, WARP
from gpuprofiler.profile.hardware import HardwareView

L1_SECTORS_PER_CYCLE = 4.0  # the L1 data path moves 128 bytes per cycle per SM (Volta and later)


@dataclass
class Resources:
    """Seconds each device-wide resource needs for the launch, and the traffic behind them."""

    dram_s: float = 0.0
    cache_s: float = 0.0
    lsu_s: float = 0.0
    ops_s: float = 0.0
    tlb_s: float = 0.0  # a CPU's page walks, from the predicted misses' TLB misses
    traffic: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def bounds(self) -> dict[str, float]:
        return {"dram": self.dram_s, "cache": self.cache_s, "lsu": self.lsu_s, "issue": self.ops_s, "tlb": self.tlb_s}


def launch_shape(kernel: Kernel, work_items: int) -> tuple[int, int]:
    """(work-groups, warps) of the launch."""
    group = max(1, math.prod(kernel.local_size))
    if kernel.global_size:
        groups = math.prod(-(-g // lsz) for g, lsz in zip(kernel.global_size, kernel.local_size))
    else:
        groups = -(-work_items // group)
    return groups, groups * -(-group // WARP)


def _rate(fig, end: str | None) -> float:
    """A rate (bytes/s, Hz) at the end of its interval that makes times ``end`` (low: the fastest)."""
    return fig.value if end is None else fig.bounds()[1 if end == "low" else 0]


def _step(fig, end: str | None) -> float:
    """A time figure at the ``end`` of its interval."""
    return fig.value if end is None else fig.bounds()[0 if end == "low" else 1]


def resources(kernel: Kernel, hw: HardwareView, work_items: int, op_seconds: float,
              end: str | None = None, misses: Any = None) -> Resources:
    """The launch's DRAM, cache, L1 and issue times; ``op_seconds`` is one work-item's operations' issue time
    (sum of 1 / device-wide throughput); ``end`` (low, high) takes every measured figure at that end of its
    interval."""
    out = Resources(ops_s=work_items * op_seconds)
    _, warps = launch_shape(kernel, work_items)
    arcs = [a for g in kernel.fragments for a in g.arcs]
    capacity = cache_capacity(hw)
    cap = capacity.value if capacity.ok else None
    reads: dict[str, float] = {}
    writes: dict[str, float] = {}
    gathered: set[str] = set()
    spread_stores: set[str] = set()
    width_num = width_den = 0.0
    lsu_cycles = 0.0
    for a in arcs:
        info = a.info
        if a.kind in ("read", "write"):
            requests = warps * info.get("warps", 1.0)
            sectors = requests * info.get("sectors", WARP)
            lines = info.get("lines", WARP)
            lsu_cycles += requests * max(1.0, lines, info.get("sectors", WARP) / L1_SECTORS_PER_CYCLE)
            name = info.get("array", "?")
            elem = info.get("elem_bytes", 4)
            if a.kind == "read":
                reads[name] = reads.get(name, 0.0) + sectors * SECTOR
                if info.get("pattern") == "gather":
                    gathered.add(name)
            else:
                writes[name] = writes.get(name, 0.0) + sectors * SECTOR
                lanes = min(WARP, max(1, math.prod(kernel.local_size)))
                if info.get("sectors", 0.0) * SECTOR > 2 * lanes * elem:
                    spread_stores.add(name)
            width_num += elem * sectors
            width_den += sectors
        elif a.kind in ("local_read", "local_write"):
            lsu_cycles += warps * info.get("warps", 1.0) * info.get("wavefronts", 1.0)
    cached_total = sum(reads[n] * kernel.l1_miss.get(n, 1.0) for n in reads)
    dram_read = dram_write = scattered_reads = scattered_writes = 0.0
    in_cache = resident([kernel.buffers.get(n) for n in set(reads) | set(writes)], cap)
    gather_rule: dict[str, tuple[float, float]] = {}  # gathered array: (bytes streamed, sectors refetched)
    for name, requested in ({} if in_cache else reads).items():
        cached = requested * kernel.l1_miss.get(name, 1.0)
        footprint = kernel.buffers.get(name)
        if footprint and name in gathered and cached > footprint:
            own = cached / SECTOR
            other = max(cached_total / SECTOR - own, 0.0) / own
            hit = random_hit_rate(footprint / SECTOR, cap / SECTOR if cap else None, other)
            gather_rule[name] = (footprint, (own - footprint / SECTOR) * (1.0 - hit))
            scattered_reads += gather_rule[name][1]
            dram_read += footprint
        else:
            dram_read += refetched(cached, footprint, cap) if footprint else cached
    # a CPU profile measured the way CPU kernels run: its DRAM time is the bytes the cores wait to read, the
    # writes' fills (lines written without being read) among them, the write-backs draining behind
    fills_only = cpu_fills_only(hw)
    for name, written in ({} if in_cache else writes).items():
        footprint = kernel.buffers.get(name)
        dram_w = min(written, footprint) if footprint else written
        if fills_only and reads.get(name):
            continue
        if name in spread_stores:
            scattered_writes += dram_w / SECTOR
        else:
            dram_write += dram_w
    width = width_num / width_den if width_den else 4.0
    predicted = misses is not None and misses.levels and not in_cache
    if predicted:
        # the sampled address stream's misses replace the footprint and reuse rules for what is read: each line
        # (a GPU: each sector) the last level misses on a load comes from DRAM, the first level's from the cache
        # behind it. What is written back stays the rules': every dirty line once, whether its stores missed or
        # hit, strided stores at the profile's scattered-write rate. On a CPU with a contiguous profile the
        # writes' DRAM traffic is their fills instead: the stores that miss the last level.
        last, first = misses.levels[-1], misses.levels[0]
        unit = misses.order.line_bytes
        fetched = 1.0 - last.write_share
        dram_read = last.misses * fetched * unit
        scattered_reads = 0.0
        spread = 0.0  # the share of the last level's missed lines that no prefetcher brings (fills_only)
        if fills_only:
            # a store that misses the last level reads its line first: the stream's fills. A line first touched in
            # another page than the unit's last (a column walk, a 2-D work-group's rows) is no stream's next line:
            # no prefetch, a new DRAM row; it costs a scattered read, fill or load alike (the cache-miss law's
            # charge, :meth:`~gpuprofiler.models.fractal.misses.MissCost.memory_s`)
            rest = [n for n in last.by_array if n not in gather_rule]
            share = sum(last.by_array[n] for n in rest)
            spread = (sum(last.by_array[n] * misses.scattered.get(n, 0.0) for n in rest) / share) if share else 0.0
            dram_read *= 1.0 - spread
            dram_write = last.misses * last.write_share * unit * (1.0 - spread)
            scattered_reads = last.misses * share * spread
            scattered_writes = 0.0
        for name, (streamed, refetched_sectors) in gather_rule.items():
            # a gather's reuses lie as far apart as its array is large, past the sampled windows, which would count
            # them as misses: its traffic stays the rules' (the footprint streamed once, the refetches at the
            # profile's cost of a random sector, their hit rate Hagersten's for uniform reuse over the footprint)
            dram_read += streamed - last.by_array.get(name, 0.0) * last.misses * fetched * unit * (1.0 - spread)
            scattered_reads += refetched_sectors
        dram_read = max(dram_read, 0.0)
        cached_total = first.misses * (1.0 - first.write_share) * unit
    bw = dram_bandwidth(hw, dram_read, dram_write, width)
    if bw.ok:
        out.dram_s = (dram_read + dram_write) / _rate(bw, end)
        out.sources["dram"] = bw.source
    else:
        out.sources["dram"] = bw.source + ": no DRAM bound"
    if scattered_reads or scattered_writes:
        step_r = scattered(hw, bw.value or 1e12)
        step_w = scattered(hw, bw.value or 1e12, write=True)
        out.dram_s += scattered_reads * _step(step_r, end) + scattered_writes * _step(step_w, end)
        out.sources["scattered"] = f"{step_r.source}; {step_w.source}"
    cache = cache_bandwidth(hw)
    written = sum(writes.values())
    if cache.ok:
        out.cache_s = (cached_total + written) / _rate(cache, end)
        out.sources["cache"] = cache.source
    if predicted:
        out.tlb_s, tlb_source = tlb_walks(hw.profile, misses)
        if out.tlb_s:
            out.sources["tlb"] = tlb_source
        out.sources["misses"] = (f"DRAM and cache traffic from the sampled address stream's misses ({last.name} "
                                 f"{last.miss_ratio:.3g}, {first.name} {first.miss_ratio:.3g} of "
                                 f"{misses.accesses:.3g} accesses)")
    sms, clock = hw.compute_units, hw.clock_hz
    if hw.kind == "gpu" and sms.ok and clock.ok:
        out.lsu_s = lsu_cycles / (sms.value * _rate(clock, end))
        out.sources["lsu"] = (f"one L1 / shared-memory request per cycle per SM: lines (at least sectors / "
                              f"{L1_SECTORS_PER_CYCLE:g}) or bank passes, over {sms.source} x {clock.source}")
    out.traffic = {"dram_read_bytes": dram_read, "dram_write_bytes": dram_write,
                   "dram_scattered_sectors": scattered_reads, "dram_scattered_write_sectors": scattered_writes,
                   "cache_bytes": cached_total + written, "l1_request_cycles": lsu_cycles,
                   "access_width_bytes": width, "resident_in_cache": in_cache}
    return out


def resident_work_items(kernel: Kernel, hw: HardwareView) -> tuple[int, str]:
    """Work-items resident at once (occupancy): per SM, as many whole work-groups as its threads and shared
    memory allow, times the SMs (GPUs); one work-group per compute unit elsewhere (a CPU runs a group's
    work-items as a loop on one core)."""
    group = max(1, math.prod(kernel.local_size))
    units = hw.compute_units
    cus = int(units.value) if units.ok else 1
    per_sm = hw.device_extra("max_threads_per_sm")
    cap = hw.figure("concurrency.resident_capacity")
    if hw.kind == "gpu" and (per_sm or cap.ok):
        threads = int(per_sm) if per_sm else int(cap.value) // max(cus, 1)
        blocks = max(1, threads // group)
        why = [f"{threads} threads per SM"]
        smem = hw.device_extra("shared_memory_per_sm")
        if kernel.local_bytes and smem:
            by_smem = int(smem // kernel.local_bytes)
            if by_smem < blocks:
                blocks, why = max(1, by_smem), why + [f"{kernel.local_bytes} B of shared memory per group"]
        return blocks * group * cus, (f"{blocks} work-groups of {group} per SM ({', '.join(why)}) x {cus} SMs")
    return group * cus, f"one work-group of {group} per compute unit x {cus} ({units.source})"


def cpu_overlap(hw: HardwareView, ops: float, lanes: bool = False) -> tuple[float, str] | None:
    """Work-items whose chains a CPU core runs at once when each has ``ops`` operations: the profile's
    ``concurrency.overlap_curve`` interpolated in log-log (its ends held beyond its range); None without it. With
    ``lanes`` (a fragment the compiler vectorises across work-items), its ``loopfree_curve`` where measured.

    Both curves are read as their upper envelope from the long end: a chain cannot keep fewer work-items in
    progress than a longer one. On the looped curve a point below a longer chain's is a measurement another tenant
    slowed (this VM's PoCL once gave 0.77 at 1024 operations between 1.14 at 512 and 1.03 at 2048). The loop-free
    curve rises with the chain up to 16 operations because its short chains are held by each work-item's fixed
    cost, not by their latency (:attr:`~gpuprofiler.profile.hardware.HardwareView.loopfree_floor_s`, which
    :func:`~gpuprofiler.models.maxplus.models._cpu_chains` applies as a floor)."""
    if hw.kind != "cpu":
        return None
    if lanes and len(hw.loopfree_curve) >= 2:
        curve, name = hw.loopfree_curve, "loopfree_curve"
    else:
        curve, name = hw.overlap_curve, "overlap_curve"
        if len(curve) < 2:
            return None
    ys = np.log(np.maximum.accumulate([max(y, 1e-3) for _, y in curve][::-1])[::-1])
    xs = np.log([x for x, _ in curve])
    value = float(np.exp(np.interp(math.log(max(ops, 1.0)), xs, ys)))
    return value, (f"concurrency.{name} at {ops:.4g} operations per work-item: {value:.3g} work-items at "
                   f"once per core")
