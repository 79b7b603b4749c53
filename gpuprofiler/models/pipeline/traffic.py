"""Where each global access is served, and the traffic each memory level carries.

From the lane addresses of the sampled blocks (first pass through loops, and the second where the access
is in a loop):

* **L1**: of a block's requests to one buffer (all its load instructions together), the distinct sectors
  reach the last-level cache, the rest are L1 hits: warps of a block reading the same rows, the four
  neighbours of a stencil, the copies of an unrolled loop. In a loop, a lane walking its buffer in steps
  smaller than a sector fetches a new sector on that share of passes. Stores write through.
* **last-level cache -> DRAM**, per buffer: each byte once (the buffer's size, where the launch knows it),
  plus the re-reads that miss. Buffers walked in order re-read what a too-small cache lost
  (:func:`gpuprofiler.models.costs.refetched`); buffers gathered at random hit with the probability of an
  LRU cache that the other buffers' streams also pass through (:func:`~gpuprofiler.models.costs.random_hit_rate`),
  and their misses are scattered sector reads, which DRAM serves far slower than streams. A buffer stored
  with requests spread over many lines (a strided store) is written back sector by sector, scattered too.
  A launch whose buffers together fit the cache finds them there when it is repeated: no DRAM traffic
  (:func:`~gpuprofiler.models.costs.resident`).

The traffic gives the DRAM and cache time bounds of the launch, and each load's expected latency (L1,
cache or DRAM latency in the proportion of its sectors served there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.models.costs import random_hit_rate, refetched, resident
from gpuprofiler.models.pipeline.divergence import SECTOR, Access
from gpuprofiler.models.pipeline.values import POINTER_STRIDE, Launch, ThreadSample


@dataclass
class AccessTraffic:
    """One global access: the bytes its requests ask for, and where they are served."""

    index: int
    kind: str                     # load | store | atomic
    param: int | None             # pointer parameter its addresses fall in
    bytes: int                    # per lane
    gather: bool                  # addresses depend on loaded data (spread over the buffer)
    scattered: bool               # its lanes land in different sectors (strided by a sector or more, gathered)
    requested: float              # sector bytes of all its warp requests in the launch
    l1_miss: float = 1.0          # fraction of them that reach the last-level cache
    dram_share: float = 1.0       # fraction of those that come from DRAM

    @property
    def cache_bytes(self) -> float:
        return self.requested * self.l1_miss


@dataclass
class Traffic:
    accesses: dict[int, AccessTraffic] = field(default_factory=dict)
    dram_read: float = 0.0        # bytes read in streams
    dram_write: float = 0.0
    dram_scattered: float = 0.0   # sectors read one by one (gathers missing the cache)
    dram_scattered_writes: float = 0.0  # sectors written back one by one (strided stores)
    cache_bytes: float = 0.0
    width: float = 4.0            # bytes per lane, weighted by DRAM traffic
    resident: bool = False        # every buffer stays in the last-level cache between launches: no DRAM traffic

    def to_dict(self) -> dict[str, Any]:
        return {"dram_read_bytes": self.dram_read, "dram_write_bytes": self.dram_write,
                "dram_scattered_sectors": self.dram_scattered,
                "dram_scattered_write_sectors": self.dram_scattered_writes, "cache_bytes": self.cache_bytes,
                "access_width_bytes": self.width, "resident_in_cache": self.resident}


def _param_of(addr: np.ndarray | None, mask: np.ndarray, n_params: int) -> int | None:
    """The pointer parameter all active lanes' addresses fall in (fake bases are POINTER_STRIDE apart)."""
    if addr is None or not mask.any():
        return None
    slots = np.unique(np.asarray(addr)[mask] // POINTER_STRIDE)
    if len(slots) != 1 or not 1 <= int(slots[0]) <= n_params:
        return None
    return int(slots[0]) - 1


def _sectors(addr: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(addr, dtype=np.int64)
    return a // SECTOR, (a + size - 1) // SECTOR


def block_sharing(loads: list[tuple[np.ndarray, int, np.ndarray]], sample: ThreadSample) -> float:
    """Over a block's load instructions of one buffer: its distinct sectors over the sum of each warp's distinct
    sectors per instruction (1: no sharing), averaged over the sampled blocks."""
    tpb = sample.launch.threads_per_block
    ratios = []
    for b in range(len(sample.blocks)):
        sl = slice(b * tpb, (b + 1) * tpb)
        union, requests = [], 0
        for addr, size, mask in loads:
            m = mask[sl]
            if not m.any():
                continue
            first, last = _sectors(addr[sl][m], size)
            secs = np.concatenate([first, last])
            warps = np.concatenate([sample.warp[sl][m]] * 2)
            requests += len(np.unique(warps * (1 << 40) + (secs & ((1 << 40) - 1))))
            union.append(secs)
        if requests:
            ratios.append(len(np.unique(np.concatenate(union))) / requests)
    return float(np.mean(ratios)) if ratios else 1.0


def loop_novelty(addr: np.ndarray, addr2: np.ndarray | None, mask: np.ndarray) -> float:
    """Share of passes on which a loop access reaches a new sector: |step| / sector for a lane walking its buffer
    in steps below a sector, 0 for an address that does not move, else 1 (1 outside loops)."""
    if addr2 is None:
        return 1.0
    step = np.abs(np.asarray(addr2, dtype=np.int64) - np.asarray(addr, dtype=np.int64))[mask]
    if step.size == 0:
        return 1.0
    return float(np.median(np.minimum(step, SECTOR)) / SECTOR)


def analyse(accesses: dict[int, Access], records: dict[int, dict[str, Any]], counts: np.ndarray, launch: Launch,
            sample: ThreadSample, n_params: int, capacity: float | None) -> Traffic:
    """The launch's traffic per access and level; ``counts`` are the executions per warp of each instruction;
    ``capacity`` is the last-level cache in bytes."""
    out = Traffic()
    warps = launch.blocks * launch.warps_per_block
    loads: dict[int, list[tuple[np.ndarray, int, np.ndarray]]] = {}
    for i, acc in accesses.items():
        if acc.space != "global":
            continue
        rec = records.get(i, {})
        mask = np.asarray(rec.get("mask", np.ones(sample.size, bool)), dtype=bool)
        addr = rec.get("address")
        param = _param_of(addr, mask, n_params)
        spread = acc.pattern == "uncoalesced" or (acc.pattern == "strided" and abs(acc.stride_bytes or 0) >= SECTOR)
        a = AccessTraffic(i, acc.kind, param, acc.bytes, acc.pattern == "uncoalesced", spread,
                          float(counts[i]) * warps * acc.transactions * SECTOR)
        if addr is not None and acc.kind == "load":
            a.l1_miss = loop_novelty(addr, rec.get("address2"), mask)
            if param is not None:
                loads.setdefault(param, []).append((np.asarray(addr, dtype=np.int64), acc.bytes, mask))
        out.accesses[i] = a
    shared = {p: block_sharing(v, sample) for p, v in loads.items()}
    for a in out.accesses.values():
        if a.kind == "load" and a.param in shared:
            a.l1_miss *= shared[a.param]
    by_param: dict[Any, list[AccessTraffic]] = {}
    for a in out.accesses.values():
        by_param.setdefault(a.param if a.param is not None else ("?", a.index), []).append(a)
    total_sectors = sum(a.cache_bytes for a in out.accesses.values()) / SECTOR
    cap_sectors = capacity / SECTOR if capacity else None
    weight = 0.0
    if resident([launch.buffers.get(k) if isinstance(k, int) else None for k in by_param], capacity):
        out.resident = True
        for accs in by_param.values():
            for a in accs:
                a.dram_share = 0.0
        out.cache_bytes = sum(a.cache_bytes for a in out.accesses.values())
        return out
    for key, accs in by_param.items():
        footprint = launch.buffers.get(key) if isinstance(key, int) else None
        reads = [a for a in accs if a.kind != "store"]
        writes = [a for a in accs if a.kind != "load"]
        cached = sum(a.cache_bytes for a in reads)
        scattered = 0.0
        if footprint and any(a.gather for a in reads) and cached > footprint:
            # spread at random over the buffer: each sector once, then the re-reads an LRU cache misses while
            # the other buffers' traffic streams through it
            own = cached / SECTOR
            other = max(total_sectors - own, 0.0) / own
            hit = random_hit_rate(footprint / SECTOR, cap_sectors, other)
            scattered = (own - footprint / SECTOR) * (1.0 - hit)
            dram = footprint
        else:
            dram = refetched(cached, footprint, capacity) if footprint else cached
        for a in reads:
            a.dram_share = (dram + scattered * SECTOR) / cached if cached > 0 else 1.0
        written = sum(a.cache_bytes for a in writes)
        dram_w = min(written, footprint) if footprint else written
        if writes and any(a.scattered for a in writes):
            out.dram_scattered_writes += dram_w / SECTOR
        else:
            out.dram_write += dram_w
        out.dram_read += dram
        out.dram_scattered += scattered
        out.cache_bytes += cached + written
        share = dram + dram_w
        if share > 0:
            size = float(np.mean([a.bytes for a in accs]))
            out.width = (out.width * weight + size * share) / (weight + share)
            weight += share
    return out
