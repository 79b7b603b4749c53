"""A kernel's cache behaviour at one size: miss ratios at the device's cache levels from sampled reuse distances.

Windows of the launch are laid out in the device's execution order (:mod:`.streams`); in each, the forward reuse
distance of a sparse random sample of accesses (rate 1e-3 by default) is read off the window (a sample is taken
only from the first half of a window, so at least half a window lies ahead of it; a reuse further away counts as
none). The samples of the units' own streams give the private levels' miss ratios, those of the interleaved
stream the shared levels'; StatStack gives LRU miss ratios, StatCache random-replacement ones. Misses per launch
are the ratio times the launch's accesses (the window's accesses per work-group times the work-groups).
Written lines touched by more than one unit in a window are counted as shared (false or true sharing):
each change of unit on such a line, with a store on either side, is a coherence miss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpuprofiler.models.cache.reuse import next_and_first_use, next_use, previous_from_next, stack_distances
from gpuprofiler.models.cache.statcache import stack_distance_of, statcache, statstack
from gpuprofiler.models.cache.streams import Order, device_order, probe_per_item, windows
from gpuprofiler.profile.hardware import view

RATE = 1e-3
_GOLDEN = np.int64(0x9E3779B97F4A7C15 - (1 << 64))  # Fibonacci hashing's multiplier, as a wrapping int64
PAGE_BYTES = 4096  # the TLB's unit: a 4 KiB page (Linux gives a kernel's buffers those unless asked otherwise)
MIN_SAMPLES = 4000  # below this many the rate is raised (a small launch is sampled densely)
LLC_SPREAD = 1.25  # a calibrated and a reported last-level cache further apart than this disagree
FEW_REUSES = 8.0  # expected far reuses in the windows below which a buffer's kind of reuse is not judged


@dataclass
class Level:
    """One cache level and what the kernel does to it."""

    name: str
    size_bytes: float
    lines: int
    shared: bool
    miss_ratio: float          # LRU (StatStack), its sets filled as the stream fills them
    miss_ratio_random: float   # random replacement, fully associative (StatCache)
    misses: float              # per launch
    by_array: dict[str, float] = field(default_factory=dict)  # share of the level's misses from each array
    miss_ratio_full: float = 0.0  # LRU, fully associative (StatStack)
    ways: int = 0
    sets: int = 1
    write_share: float = 0.0   # share of the misses that are stores
    store_remisses: float = 0.0  # per launch: stores missing a line the unit touched before (not a first touch)


@dataclass
class CacheAnalysis:
    """Miss ratios at each level, the reuse-distance sample behind them and where it came from."""

    order: Order
    levels: list[Level]
    accesses: float                 # global accesses per launch
    samples: int
    rate: float
    private_distances: np.ndarray   # sampled reuse distances (inf: not reused within reach)
    shared_distances: np.ndarray
    private_arrays: np.ndarray      # the buffer of each private sample
    shared_arrays: np.ndarray
    names: list[str]
    windows: int
    window_accesses: int
    coherence_misses: float         # per launch
    shared_written_lines: float     # share of written lines that several units touch
    unknown: list[str]
    notes: list[str] = field(default_factory=list)
    private_cold: float | None = None  # exact share of the private / shared streams' accesses never reused
    shared_cold: float | None = None
    scattered: dict[str, float] = field(default_factory=dict)  # per buffer, its new lines' share in a new page
    tlb_pages: int | None = None     # the profile's TLB reach in 4 KiB pages (None: not measured)
    tlb_miss_ratio: float = 0.0      # of the accesses, those whose page the unit's TLB no longer holds (LRU)
    tlb_misses: float = 0.0          # per launch
    tlb_s_per_access: float = 0.0    # translation's mean extra time per access, one unit (the profile's tlb curve)
    alternates: dict[float, Level] = field(default_factory=dict)  # the last level at other capacities (bytes)
    per_item: float = 0.0            # the global accesses per work-item the windows were sized by
    probed: bool = True              # per_item counted by following a work-item (else the caller's estimate)

    def scattered_share(self, level: Level) -> float:
        """The share of ``level``'s misses at scattered lines: each buffer's share of the misses times the share of
        its lines that a unit first touches in another 4 KiB page than the line it touched before (a gather's, a
        column walk's: no prefetch, a new DRAM row and TLB entry each), not the next line of a stream."""
        return min(1.0, sum(share * self.scattered.get(name, 0.0) for name, share in level.by_array.items()))

    def level(self, name: str) -> Level | None:
        return next((lv for lv in self.levels if lv.name == name), None)

    def to_dict(self) -> dict:
        return {"order": self.order.describe(), "accesses": self.accesses, "samples": self.samples,
                "rate": self.rate, "windows": self.windows, "window_accesses": self.window_accesses,
                "levels": [{"name": lv.name, "size_bytes": lv.size_bytes, "lines": lv.lines, "shared": lv.shared,
                            "ways": lv.ways, "sets": lv.sets, "miss_ratio": lv.miss_ratio,
                            "miss_ratio_fully_associative": lv.miss_ratio_full,
                            "miss_ratio_random": lv.miss_ratio_random, "misses": lv.misses, "by_array": lv.by_array,
                            "write_share": lv.write_share, "store_remisses": lv.store_remisses}
                           for lv in self.levels],
                "tlb": {"reach_pages": self.tlb_pages, "miss_ratio": self.tlb_miss_ratio, "misses": self.tlb_misses,
                        "seconds_per_access": self.tlb_s_per_access},
                "coherence_misses": self.coherence_misses, "shared_written_lines": self.shared_written_lines,
                "scattered_lines": self.scattered,
                "unknown_arrays": self.unknown, "notes": self.notes}


def cache_levels(profile) -> list[tuple[str, float]]:
    """The device's cache levels, smallest first: the latency curve's knees, and the last level as streams see it
    where that is larger than every knee."""
    hw = view(profile)
    levels = [(f"L{c.level}", float(c.size_bytes)) for c in hw.caches]
    reported = hw.reported_llc_bytes
    if reported:
        # a knee well past the largest cache the driver reports is no cache: the TLB's reach or the memory's own
        # (the H100 profile's 106 MB "L3" beside its 50 MB L2, this VM's 47-53 MB beside its 32 MiB L3)
        levels = [lv for lv in levels if lv[1] <= LLC_SPREAD * reported]
    stream = hw.figure("bandwidth.streaming_llc_bytes").value
    if stream and (not levels or stream > 1.5 * max(s for _, s in levels)):
        levels.append((f"L{len(levels) + 1}", float(stream)))
    levels.sort(key=lambda x: x[1])
    return [(f"L{i + 1}", size) for i, (_, size) in enumerate(levels)]


NEAR = 4096  # reuses at most this many accesses away have their same-set distinct lines counted exactly


def sample_distances(lines: np.ndarray, rate: float, rng: np.random.Generator):
    """Forward reuse distances (inf: not reused in the rest of the window) and positions of a random sample of the
    first half of the stream; the positions of every access of that half that is not reused (counted exactly, not
    sampled: the cold share needs no estimate); whose miss each sample is (a reuse's, the next access to the line;
    a line never reused, its first access); and, for the whole stream, each access's next use and its line's first
    access (:func:`~.reuse.next_and_first_use`)."""
    half = len(lines) // 2
    nxt, first = next_and_first_use(lines)
    if half == 0:
        empty = np.zeros(0, np.int64)
        return np.zeros(0), empty, empty, empty, nxt, first
    pick = np.flatnonzero(rng.random(half) < rate)
    n = len(lines)
    d = (nxt[pick] - pick - 1).astype(float)
    d[nxt[pick] >= n] = np.inf
    cold = np.flatnonzero(nxt[:half] >= n)
    missing = np.where(nxt[pick] < n, nxt[pick], first[pick])
    return d, pick, cold, missing, nxt, first


@dataclass
class Samples:
    """Sampled reuse distances of several streams, with each sample's buffer, line and stream, and each stream's
    distinct lines (how they fill a cache's sets)."""

    distances: list[np.ndarray] = field(default_factory=list)
    arrays: list[np.ndarray] = field(default_factory=list)
    lines: list[np.ndarray] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    streams: list[np.ndarray] = field(default_factory=list)
    distinct: list[np.ndarray] = field(default_factory=list)
    writes: list[np.ndarray] = field(default_factory=list)
    population: int = 0                      # accesses the samples were drawn from
    cold_arrays: list[np.ndarray] = field(default_factory=list)  # buffer of each of them not reused
    cold_writes: list[np.ndarray] = field(default_factory=list)
    touches: list[np.ndarray] = field(default_factory=list)  # per stream: its first half's accesses of each buffer
    lengths: list[int] = field(default_factory=list)          # per stream: its accesses
    first_lines: list[np.ndarray] = field(default_factory=list)    # per stream: its new lines, in time order
    first_arrays: list[np.ndarray] = field(default_factory=list)   # and their buffers
    line_bytes: int = 64  # the streams' line size (for the page of a line)
    page_run: int = 1     # pages the operating system hands out physically contiguous, one colour offset per run

    def add(self, lines: np.ndarray, arrays: np.ndarray, rate: float, rng: np.random.Generator,
            writes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Samples a stream; returns each access's next use and its line's first access."""
        d, pos, cold, missing, nxt, first = sample_distances(lines, rate, rng)
        a, ln, cold_first, new = arrays[pos], lines[pos], first[cold], first == np.arange(len(lines))
        self.touches.append(np.bincount(arrays[:len(arrays) // 2]))
        self.lengths.append(len(arrays))
        self.first_lines.append(lines[new])
        self.first_arrays.append(arrays[new])
        self.writes.append(writes[missing] if writes is not None else np.zeros(len(d), bool))
        self.population += len(lines) // 2
        self.cold_arrays.append(arrays[cold])
        self.cold_writes.append(writes[cold_first] if writes is not None else np.zeros(len(cold), bool))
        self.distances.append(d)
        self.arrays.append(a)
        self.lines.append(ln)
        self.positions.append(pos)
        self.streams.append(lines)
        self.distinct.append(np.sort(lines[new]))
        return nxt, first

    def all(self) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.distances), np.concatenate(self.arrays)

    @property
    def cold(self) -> float:
        """The exact share of the sampled population that is not reused within its window."""
        return sum(len(c) for c in self.cold_arrays) / max(self.population, 1)

    def misses(self, miss: np.ndarray, names: list[str],
               later: np.ndarray | None = None) -> tuple[float, dict[str, float], float, float]:
        """Miss ratio, each buffer's share of the misses, the stores' share, and the share of the accesses that are
        stores missing a line touched before in the window (a conflict's or capacity's, not a first touch's), from
        the samples' verdicts ``miss``:
        the reused accesses' misses estimated from the sample, the never reused in the window counted exactly
        (stratified: the cold share, which decides a streaming kernel's traffic, carries no sampling error). Those
        miss, but for the share ``later[i]`` of buffer i's that the cache still holds when the launch comes back
        to their line after the window (:func:`later_hits`)."""
        d = np.concatenate(self.distances)
        a = np.concatenate(self.arrays)
        w = np.concatenate(self.writes)
        reused = np.isfinite(d)
        cold = self.cold
        per_reused = (1.0 - cold) / max(int(reused.sum()), 1)  # each reused sample's share of the accesses
        hot = miss & reused
        ca, cw = np.concatenate(self.cold_arrays), np.concatenate(self.cold_writes)
        pop = max(self.population, 1)
        keep = np.ones(len(names)) if later is None else 1.0 - np.asarray(later, dtype=float)
        cold_by = np.bincount(ca, minlength=len(names))[:len(names)] * keep
        cold_w = float((np.bincount(ca[cw], minlength=len(names))[:len(names)] * keep).sum())
        ratio = float(cold_by.sum()) / pop + per_reused * int(hot.sum())
        if ratio <= 0:
            return 0.0, {}, 0.0, 0.0
        by_array = {}
        for i, n in enumerate(names):
            share = (cold_by[i] / pop + per_reused * np.count_nonzero(hot & (a == i))) / ratio
            if share > 0:
                by_array[n] = float(share)
        write_share = (cold_w / pop + per_reused * np.count_nonzero(hot & w)) / ratio
        return float(ratio), by_array, float(write_share), float(per_reused * np.count_nonzero(hot & w))

    def set_of(self, lines: np.ndarray, sets: int) -> np.ndarray:
        """The set each line falls in: a cache whose sets span at most a 4 KiB page (a CPU's L1, virtually indexed)
        takes the line number's low bits; a larger one is physically indexed, and the bits above the page offset
        come from the physical page. The operating system hands pages out in runs of :attr:`page_run` physically
        contiguous ones (Linux's per-CPU batch, 63 pages): within a run the colours follow the virtual pages, each
        run starts at a colour of its own (a fixed hash). A column walk with a 2 KiB stride then crowds some sets of
        a 1 MiB L2 and leaves others empty; one with a 3 KiB stride spreads over its sets within each run."""
        per_page = max(1, PAGE_BYTES // self.line_bytes)
        if sets <= per_page:
            return lines % sets
        shift = per_page.bit_length() - 1  # lines and pages are powers of two: shifts and masks, not divisions
        pages = np.asarray(lines, dtype=np.int64) >> shift
        run = max(self.page_run, 1)
        colour = ((pages % run) + (((pages // run) * _GOLDEN) >> 40)) & (sets // per_page - 1)
        return (lines & (per_page - 1)) | (colour << shift)

    def set_misses(self, ways: int, sets: int, sd: np.ndarray) -> np.ndarray:
        """Per sample, whether a cache of ``sets`` sets of ``ways`` lines (LRU in each set) misses its next use: the
        distinct lines of its set touched in between (``ways`` of them or more), counted in the stream for near
        reuses, else its expected stack distance ``sd`` times the share of the stream's distinct lines in its set."""
        out, at = [], 0
        for d, lines, pos, stream, distinct in zip(self.distances, self.lines, self.positions, self.streams,
                                                   self.distinct):
            counts = np.bincount(self.set_of(distinct, sets), minlength=sets)
            line_sets = self.set_of(lines, sets)
            part = sd[at: at + len(d)] * counts[line_sets] / max(len(distinct), 1) >= ways
            near = np.flatnonzero(np.isfinite(d) & (d <= NEAR))
            if len(near):
                part[near] = _crowded(stream, lambda x: self.set_of(x, sets), pos[near] + 1,
                                      pos[near] + 1 + d[near].astype(np.int64), line_sets[near], ways)
            out.append(part)
            at += len(d)
        return np.concatenate(out)


def _covered(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The positions in the union of the ranges ``lo:hi``, ascending."""
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if not len(lo):
        return np.zeros(0, np.int64)
    by = np.argsort(lo, kind="stable")
    lo, hi = lo[by], np.maximum.accumulate(hi[by])
    start = np.ones(len(lo), dtype=bool)
    start[1:] = lo[1:] > hi[:-1]
    first = lo[start]
    last = hi[np.append(np.flatnonzero(start)[1:] - 1, len(lo) - 1)]
    m = last - first
    return np.repeat(first - np.cumsum(m) + m, m) + np.arange(int(m.sum()), dtype=np.int64)


def _crowded(stream: np.ndarray, set_of: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray,
             in_set: np.ndarray, ways: int, chunk: int = 1 << 22) -> np.ndarray:
    """Per query, whether accesses ``lo:hi`` of a stream of lines touch ``ways`` or more distinct lines of set
    ``in_set`` (``set_of``: the set of each line). Only the positions some query covers are looked at (a few
    percent of a window): ordered by set, then time, a query's accesses of its set are one slice of them, and a
    line counts once, at its first access in the query: where its previous access lies before ``lo``, which the
    covered positions alone tell, as ``lo:hi`` is covered whole."""
    covered = _covered(lo, hi)
    n = len(covered)
    out = np.zeros(len(lo), dtype=bool)
    if not n:
        return out
    sub = stream[covered]
    previous = previous_from_next(next_and_first_use(sub)[0])  # among the covered positions
    previous = np.where(previous >= 0, covered[previous], -1)
    stream_sets = np.asarray(set_of(sub))
    sets = stream_sets.astype(np.uint16) if stream_sets.max() < 1 << 16 else stream_sets  # a radix sort
    order = np.argsort(sets, kind="stable")
    key = stream_sets[order].astype(np.int64) * n + order
    lo_c, hi_c = np.searchsorted(covered, lo), np.searchsorted(covered, hi)
    a = np.searchsorted(key, in_set.astype(np.int64) * n + lo_c)
    b = np.searchsorted(key, in_set.astype(np.int64) * n + hi_c)
    todo = np.flatnonzero(b - a >= ways)  # fewer accesses of the set than ways: fewer distinct lines too
    k = 0
    while k < len(todo):
        sizes = (b - a)[todo[k:]]
        take = max(1, int(np.searchsorted(np.cumsum(sizes), chunk, side="right")))
        q = todo[k:k + take]
        m = (b - a)[q]
        at = order[np.repeat(a[q], m) + (np.arange(int(m.sum()), dtype=np.int64) - np.repeat(np.cumsum(m) - m, m))]
        first_here = (previous[at] < np.repeat(lo[q], m)).astype(np.int64)
        out[q] = np.add.reduceat(first_here, np.concatenate([[0], np.cumsum(m)[:-1]])) >= ways
        k += take
    return out


def later_hits(samples: Samples, names: list[str], footprints: dict[str, int], accesses: float,
               capacity: int) -> np.ndarray:
    """Per buffer, the share of its accesses not reused within their window that a shared cache of ``capacity``
    lines still holds when the launch comes back to their line after the window (a window is a slice of the launch).

    For buffer i of F_i lines touched N_i times a launch: of its accesses not reused in the window, a share
    1 - (window accesses of i / those not reused) * F_i / N_i is not the line's last touch; the next comes a mean
    gap of M_i = ``accesses * F_i / N_i`` accesses later. Where the launch comes back to a line evenly (a matrix
    every work-group row reads) the gap is M_i, a hit where the distinct lines between, sum_j min(F_j, M_i r_j)
    (r_j: buffer j's new lines per access in the window), are under ``capacity``. Where it comes back at random
    (a gather: ``x[cols[p]]``) the gap is exponential with mean M_i, so a hit is a gap shorter than the one whose
    distinct lines fill the cache, given that it outlasted the rest of the window: for a uniform gather over F
    lines the LRU hit ratio C/F, which the even rule, all or nothing, cannot give. Each buffer's share of the
    second kind is :func:`random_gaps`' (what its reuses inside the window say). ``samples``: the shared level's
    (the units' streams interleaved). Buffers of unknown size: 0."""
    k = len(names)
    touched = np.zeros(k)
    new_lines = np.zeros(k)
    length = 0
    for counts, first, n in zip(samples.touches, samples.first_arrays, samples.lengths):
        touched[:min(k, len(counts))] += counts[:k]
        new_lines += np.bincount(first, minlength=k)[:k]
        length += n
    cold = np.bincount(np.concatenate(samples.cold_arrays), minlength=k)[:k] if samples.cold_arrays else np.zeros(k)
    foot = np.array([float(footprints.get(n, 0)) for n in names])
    rate = new_lines / max(length, 1)
    touch = touched / max(samples.population, 1)  # each buffer's accesses per access
    per_launch = touch * accesses  # N_i
    with np.errstate(over="ignore"):  # a buffer touched once in a huge stream: its gap is as good as infinite
        gaps = np.where((foot > 0) & (per_launch > 0), accesses * foot / np.maximum(per_launch, 1e-300), np.inf)
    sized = foot > 0
    known = np.where(sized, foot, np.inf)
    rnd, rest = random_gaps(samples, k, gaps)

    def between(g: float) -> float:
        # distinct lines the launch touches in g accesses: a random buffer's as draws with replacement fill its
        # lines, the others' at their new-line rate in the window up to their footprint
        linear = np.minimum(known, g * rate)
        drawn = np.where(sized, known * -np.expm1(-g * touch / np.where(sized, known, 1.0)), g * rate)
        return float(((1.0 - rnd) * linear + rnd * drawn).sum())

    reach = _fill(between, capacity, hi=float(accesses))
    out = np.zeros(k)
    for i in range(k):
        if foot[i] <= 0 or per_launch[i] <= foot[i] or cold[i] == 0:
            continue  # unknown size, or each line touched once a launch: its last touch
        again = 1.0 - touched[i] / cold[i] * foot[i] / per_launch[i]
        if again <= 0:
            continue
        even = 1.0 if between(gaps[i]) < capacity else 0.0
        # (the next touch is within the launch: where everything the launch touches fits, a hit)
        drawn = 1.0 if reach >= accesses else -math.expm1(-max(reach - rest[i], 0.0) / gaps[i])
        out[i] = min(again, 1.0) * ((1.0 - rnd[i]) * even + rnd[i] * drawn)
    return out


def random_gaps(samples: Samples, k: int, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per buffer, the share of its reuses that come at random (exponential gaps of mean ``gaps[i]``, a gather's)
    rather than evenly, and the mean rest of the window after its samples. Random reuses of mean gap M put a share
    exp(-s / M) - exp(-rest / M) of a sample's next uses between ``s`` (an eighth of the window, past a line's
    and a loop's near reuses) and the window's end; the share is the reuses seen there over those expected, at
    most 1; 0 where fewer than :data:`FEW_REUSES` are expected (the window cannot tell)."""
    seen, expected, rest_sum, count = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
    for d, a, pos, stream in zip(samples.distances, samples.arrays, samples.positions, samples.streams):
        if not len(d):
            continue
        rest = (len(stream) - 1 - pos).astype(float)
        s = len(stream) / 8.0
        m = gaps[a]
        finite = np.isfinite(m)
        e = np.where(finite, np.exp(-s / np.where(finite, m, 1.0)) - np.exp(-rest / np.where(finite, m, 1.0)), 0.0)
        expected += np.bincount(a, weights=np.maximum(e, 0.0), minlength=k)[:k]
        seen += np.bincount(a[np.isfinite(d) & (d >= s)], minlength=k)[:k]
        rest_sum += np.bincount(a, weights=rest, minlength=k)[:k]
        count += np.bincount(a, minlength=k)[:k]
    share = np.where(expected >= FEW_REUSES, np.minimum(seen / np.maximum(expected, 1e-300), 1.0), 0.0)
    return share, rest_sum / np.maximum(count, 1)


def _fill(between: Callable[[float], float], capacity: float, hi: float) -> float:
    """The accesses after which ``between`` (distinct lines touched, non-decreasing) reaches ``capacity``; ``hi``
    where it never does."""
    if between(hi) < capacity:
        return hi
    lo = 0.0
    for _ in range(200):  # to a part in 1e12 of the answer, however far below ``hi`` it lies
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if between(mid) < capacity:
            lo = mid
        else:
            hi = mid
    return hi


PAGE = 4096


def scattered_lines(samples: Samples, names: list[str], line_bytes: int,
                    streams: int | None = None) -> dict[str, float]:
    """Per buffer, the share of the new lines each unit touches (in the order it first touches them) that no
    prefetcher brings: ~0 for a stream (a page change every 4096 / line lines), ~1 for a gather or a walk with a
    stride of a page or more. ``samples``: the private levels' (one stream per unit).

    With ``streams`` (the profile's ``bandwidth.streams``: how many sequential streams a CPU core follows), a new
    line is streamed when its 4 KiB page is among the last ``streams`` distinct pages the unit touched, over all its
    buffers (a 2-D tile's rows are as many streams as rows: 34 for a 5-point stencil in 16 x 16 groups, past the
    16-24 a Zen 4 core follows). A new page starts a stream when the unit's next new line in it is the next line
    or the one after, taken while the core still follows the page (a copy whose pages the cores split at 1, 4 or
    16 KiB measured the same); every line of a page no stream starts in (walked with a larger stride: a column
    walk's two lines a page at a 2 KiB stride, matmul_naive's B at n = 512) is scattered, and so is a stream's page
    touched again past the reach. Without ``streams``, a new line in another page than the
    unit's previous new line of that buffer is scattered."""
    far = _beyond_streams(line_bytes, int(streams)) if streams else _page_jumps(line_bytes)
    jumps = np.zeros(len(names))
    total = np.zeros(len(names))
    for lines, owner in zip(samples.first_lines, samples.first_arrays):
        jumped, counted = far(lines, owner)
        jumps += np.bincount(jumped, minlength=len(names))[:len(names)]
        total += np.bincount(counted, minlength=len(names))[:len(names)]
    return {n: float(jumps[i] / total[i]) for i, n in enumerate(names) if total[i] > 0}


def _page_jumps(line_bytes: int):
    """Per unit: the buffers of its new lines in another page than its previous new line of the same buffer, and
    of every new line that has such a previous one."""
    def far(lines: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(lines) < 2:
            return owner[:0], owner[:0]
        by = np.argsort(owner, kind="stable")  # per buffer, in first-touch order
        lines, owner = lines[by], owner[by]
        pages = lines * line_bytes // PAGE
        same = owner[1:] == owner[:-1]
        return owner[1:][same & (pages[1:] != pages[:-1])], owner[1:][same]
    return far


def _beyond_streams(line_bytes: int, streams: int):
    """Per unit, with a core that follows ``streams`` pages at once: the buffers of its new lines whose page's LRU
    stack distance among the unit's pages is at least ``streams``, or which is new and no stream's start, or in a
    page where no stream starts; and of every new line."""
    def far(lines: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(lines) == 0:
            return owner, owner
        pages = lines * line_bytes // PAGE
        # runs of the same page are one touch of it (distance 0)
        start = np.concatenate([[True], pages[1:] != pages[:-1]])
        touched = pages[start]
        dist = stack_distances(touched)
        # a new page starts a stream when the unit's next new line in it is the next line or the one after, taken
        # while the core still follows the page
        at = np.cumsum(start) - 1
        page_dist = np.where(start, dist[at], 0)
        after = next_use(pages)
        has = after < len(lines)
        started = np.zeros(len(lines), bool)
        step = np.abs(lines[after[has]] - lines[has])
        started[has] = (step <= 2) & (page_dist[after[has]] >= 0) & (page_dist[after[has]] < streams)
        first = start & (((page_dist < 0) & ~started) | (page_dist >= streams))
        # a page no stream ever started in is a stride's: every new line of it is scattered, not only its first
        _, page_of = np.unique(pages, return_inverse=True)
        followed = np.bincount(page_of, weights=started, minlength=int(page_of.max()) + 1) > 0
        first |= ~followed[page_of]
        return owner[first], owner
    return far


def geometry(name: str, size: float, order: Order, reported: tuple[int, int] | None = None) -> tuple[int, int]:
    """(ways, sets) of a cache level; sets are a power of two, indexed by the line number's low bits. A GPU's caches
    hash their set index: fully associative here. A CPU's L1 is virtually indexed and physically tagged, so its
    sets span one 4 KiB page (64 sets of 64-byte lines, ways = size / 4 KiB, as on every current x86 and Arm core);
    its other private levels have the geometry the operating system ``reported`` for them (Zen 4's L2: 8 ways of
    2048 sets); a shared level, whose share this device gets moves with the neighbours' load, keeps its calibrated
    capacity and is taken as 16-way, as is any level nothing reports."""
    lines = max(1, int(size // order.line_bytes))
    if order.lanes > 1:
        return lines, 1
    if name == "L1":
        sets = max(1, 4096 // order.line_bytes)
    elif reported is not None:
        return reported
    else:
        sets = 1 << max(0, round(np.log2(max(lines / 16, 1))))
    return max(1, round(lines / sets)), sets


def coherence(units: np.ndarray, writes: np.ndarray, nxt: np.ndarray, first: np.ndarray) -> tuple[float, float]:
    """Coherence misses in a window (a unit touching a line another unit touched last, a store on either side) and
    the share of written lines that several units touch, from the merged stream's units and stores and each
    access's next use and line's first access (:func:`~.reuse.next_and_first_use`: no sort of its own)."""
    n = len(nxt)
    i = np.flatnonzero(nxt < n)  # each access and the next one to its line
    j = nxt[i]
    other = units[i] != units[j]
    switch = other & (writes[i] | writes[j])
    if not writes.any():
        return float(switch.sum()), 0.0
    # a written line is shared when another unit's access to it comes next to one of its own
    return float(switch.sum()), float(np.isin(np.unique(first[writes]), first[j[other]]).mean())


def analyse(launch, profile, rate: float = RATE, budget: int = 1 << 22, count: int = 3, backend: str | None = None,
            seed: int = 0, per_item: float | None = None, last_sizes: tuple[float, ...] = ()) -> CacheAnalysis:
    """Miss ratios of a launch (:class:`~.streams.Launch`, or a spec instance) at the profile's cache levels (see
    the module's docstring); with ``last_sizes``, the last level's also at those capacities (``alternates``)."""
    hw = view(profile)
    order = device_order(profile)
    kind = backend or hw.backend or "opencl"
    probed = per_item is None
    if probed:
        per_item = probe_per_item(launch, order, kind)
    streams = windows(launch, order, budget, count, kind, per_item)
    rng = np.random.default_rng(seed)
    window_len = max((sum(len(x) for x in s.lines) for s in streams), default=0)
    eff_rate = rate
    if window_len and window_len * len(streams) * rate / 2 < MIN_SAMPLES:
        eff_rate = min(1.0, MIN_SAMPLES * 2 / (window_len * len(streams)))
    run = hw.page_run
    private, shared_s, pages = (Samples(line_bytes=order.line_bytes, page_run=run),
                                Samples(line_bytes=order.line_bytes, page_run=run), Samples())
    reach = tlb_reach(profile)
    walks = tlb_curve(profile) if hw.kind == "cpu" else None
    page_lines = max(1, PAGE_BYTES // order.line_bytes)
    coh, shared_lines = [], []
    for s in streams:
        for lines, arrays, writes in zip(s.lines, s.arrays, s.writes):
            private.add(lines, arrays, eff_rate, rng, writes)
            if walks is not None:
                pages.add(lines // page_lines, arrays, eff_rate, rng)
        merged = s.merged(with_units=True)
        nxt, first = shared_s.add(*merged[:2], eff_rate, rng, merged[2])
        c, sh = coherence(merged[3], merged[2], nxt, first) if len(s.lines) > 1 else (0.0, 0.0)
        coh.append(c / max(sum(len(x) for x in s.lines), 1))
        shared_lines.append(sh)
    priv_d, priv_a = private.all()
    shared_d, shared_a = shared_s.all()
    names = streams[0].names
    accesses = streams[0].accesses_per_group * streams[0].total_groups
    notes = []
    if not len(priv_d):
        raise ValueError("the kernel makes no global access that could be followed")
    def level(name: str, size: float) -> Level | None:
        lines_n = max(1, int(size // order.line_bytes))
        shared = name not in order.private
        samples = shared_s if shared else private
        d = shared_d if shared else priv_d
        if not len(d):
            return None
        reported = None if shared else hw.reported_cache(int(name[1:]), size)
        ways, sets = geometry(name, size, order, reported)
        sd = stack_distance_of(d)
        # a set holds `ways` lines: a line whose set the accesses in between crowd (a power-of-two stride) is
        # evicted long before the cache is full. A set that a cyclic walk fills exactly thrashes in a real core's
        # cache (its other lines, stack and loop state, and a pseudo-LRU replacement evict one each pass): a
        # physically indexed private level keeps one way for them (matmul_naive on this VM's Zen 4 L2 of 8 ways:
        # at n = 512, 8 column lines a set, 2.1x the time per n^3 of 496 and 528; at 768, 6 a set, no change)
        usable = ways - 1 if reported is not None and ways > 1 else ways
        miss = samples.set_misses(usable, sets, sd) if sets > 1 else sd >= lines_n
        later = later_hits(samples, names, streams[0].footprints, accesses, lines_n) if shared else None
        ratio, by_array, write_share, remissed = samples.misses(miss, names, later)
        full = float(statstack(d, [lines_n], cold=samples.cold)[0])
        rnd = float(statcache(d, [lines_n], cold=samples.cold)[0])
        return Level(name, size, lines_n, shared, ratio, rnd, ratio * accesses, by_array, full, ways, sets,
                     write_share, remissed * accesses)

    named = cache_levels(profile)
    levels = [lv for lv in (level(name, size) for name, size in named) if lv is not None]
    alternates = {}
    if levels and levels[-1].name == named[-1][0]:
        for size in last_sizes:
            alt = level(named[-1][0], float(size))
            if alt is not None:
                alternates[float(size)] = alt
    if not levels:
        notes.append("the profile names no cache level: miss ratios are not computed")
    unknown = sorted({u for s in streams for u in s.unknown})
    if unknown:
        notes.append(f"addresses of {', '.join(unknown)} depend on data the spec does not give: left out")
    tlb_ratio = tlb_cost = 0.0
    if walks is not None and pages.distances:
        page_d, _ = pages.all()
        if reach:
            tlb_ratio = float(statstack(page_d, [reach], cold=pages.cold)[0]) if len(page_d) else pages.cold
        tlb_cost = page_cost(page_d, pages.cold, walks)
    return CacheAnalysis(order, levels, accesses, int(len(priv_d) + len(shared_d)), eff_rate, priv_d, shared_d,
                         priv_a, shared_a, names, len(streams), window_len, float(np.mean(coh)) * accesses,
                         float(np.mean(shared_lines)), unknown, notes, private.cold, shared_s.cold,
                         scattered_lines(private, names, order.line_bytes, prefetched_streams(profile)), reach,
                         tlb_ratio, tlb_ratio * accesses,
                         tlb_cost, alternates, float(per_item), probed)


def prefetched_streams(profile) -> int | None:
    """How many sequential streams a CPU core follows (``bandwidth.streams``); None off a CPU or unmeasured."""
    hw = view(profile)
    fig = hw.figure("bandwidth.streams")
    return int(fig.value) if hw.kind == "cpu" and fig.ok and fig.value >= 1 else None


def tlb_curve(profile) -> tuple[np.ndarray, np.ndarray] | None:
    """The profile's TLB curve (:attr:`~gpuprofiler.profile.hardware.HardwareView.tlb_curve`) as arrays of pages
    and extra seconds per access; None with fewer than two points."""
    rows = view(profile).tlb_curve
    if len(rows) < 2:
        return None
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def page_cost(page_distances: np.ndarray, cold: float, curve: tuple[np.ndarray, np.ndarray] | None) -> float:
    """Translation's mean extra time per access from sampled page reuse distances: each reused sample costs the
    curve at its expected stack distance in pages (a cycle over that many pages; nothing below the curve's first
    count, its last value past its end), an access not reused in its window (a first touch) the curve's last."""
    if curve is None:
        return 0.0
    pages, extra = curve
    d = np.asarray(page_distances, dtype=float)
    reused = np.isfinite(d)
    if not reused.any():
        return float(cold * extra[-1])
    sd = stack_distance_of(d)[reused] + 1.0  # pages in the cycle: the distinct ones in between and its own
    per = np.interp(np.log(np.maximum(sd, 1.0)), np.log(pages), extra, left=0.0, right=float(extra[-1]))
    return float(cold * extra[-1] + (1.0 - cold) * per.mean())


def tlb_reach(profile) -> int | None:
    """Pages a unit's TLB holds: the profile's ``tlb.reach_pages`` (a CPU's; None where it was not measured)."""
    hw = view(profile)
    fig = hw.figure("tlb.reach_pages")
    return int(fig.value) if hw.kind == "cpu" and fig.ok and fig.value >= 1 else None
