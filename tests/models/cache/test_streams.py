"""Address streams of real kernels in a modelled execution order, and StatStack on them against exact LRU."""

import copy
import dataclasses

import numpy as np
import pytest
from conftest import H100_PROFILE, KERNELS, POCL_PROFILE
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuprofiler.models.cache.analysis import Samples, analyse, cache_levels, scattered_lines
from gpuprofiler.models.cache.reuse import lru_miss_ratio, reuse_distances
from gpuprofiler.models.cache.statcache import statstack
from gpuprofiler.models.cache.streams import Order, device_order, launch_groups, window
from gpuprofiler.profile.file import Profile, load_profile
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.spec import load_spec

ONE_CORE = Order(units=1, lanes=1, line_bytes=64)


def inst(name, size):
    return load_spec(KERNELS / f"{name}.toml").instantiate(size)


def test_vadd_stream_is_each_work_item_in_turn():
    s = window(inst("vadd", 4096), ONE_CORE, 0, 2)
    lines, arrays = s.lines[0], s.arrays[0]
    names = s.names
    # work-item 0 reads a[0], b[0] then writes c[0]; work-item 1 the next elements: 16 floats per 64-byte line
    assert [names[a] for a in arrays[:6]] == ["a", "b", "c", "a", "b", "c"]
    assert len(lines) == 2 * 256 * 3 and len(np.unique(lines)) == 3 * 512 // 16
    assert s.accesses_per_group == 3 * 256 and s.total_groups == 16


def test_work_groups_are_dealt_round_robin_and_warps_issue_together():
    two = Order(units=2, lanes=1, line_bytes=64)
    s = window(inst("vadd", 4096), two, 0, 2)
    assert len(s.lines) == 2 and len(s.lines[0]) == len(s.lines[1]) == 2 * 256 * 3
    first_a = s.lines[1][0]  # unit 1 starts with work-group 1: element 256 of a, line 16 of a
    assert first_a - s.lines[0][0] == 256 * 4 // 64
    warp = Order(units=1, lanes=32, line_bytes=128)
    w = window(inst("vadd", 4096), warp, 0, 1)
    # a warp's 32 reads of a, then its 32 reads of b: 128 bytes each, one line apiece
    assert len(np.unique(w.lines[0][:32])) == 1 and w.lines[0][0] != w.lines[0][32]


def test_gathers_follow_the_spec_inputs():
    spmv = inst("spmv_csr", 65536)
    s = window(spmv, ONE_CORE, 0, 4)
    x = s.names.index("x")
    gathered = s.lines[0][s.arrays[0] == x]
    assert len(gathered) == 4 * 256 * 8 and not s.unknown
    # random columns: the gathered lines spread over the whole vector
    assert np.ptp(gathered) > 0.8 * 65536 * 4 // 64


@pytest.mark.slow
@pytest.mark.parametrize("name,size", [("matmul_naive", 128), ("transpose_naive", 1 << 22), ("stencil5", 1 << 22),
                                       ("spmv_csr", 1 << 20)])
def test_statstack_on_real_kernel_streams_matches_exact_lru(name, size):
    probe = window(inst(name, size), ONE_CORE, 0, 1)
    s = window(inst(name, size), ONE_CORE, 0, int(np.ceil(2_000_000 / probe.accesses_per_group)))
    lines = s.lines[0]
    assert len(lines) > 1_500_000
    rng = np.random.default_rng(1)
    half = len(lines) // 2
    pick = np.flatnonzero(rng.random(half) < 1e-3)
    d = reuse_distances(lines)[pick].astype(float)
    d[d < 0] = np.inf
    sizes = [256, 1024, 4096, 16384]
    exact = lru_miss_ratio(lines, sizes)
    est = statstack(d, sizes)
    assert np.all(np.abs(est - exact) <= 0.03), (name, exact, est)


@pytest.mark.slow  # over five seconds; a cheaper test of the same behaviour stays in the default run
def test_analysis_names_levels_and_the_arrays_that_miss():
    prof = load_profile(POCL_PROFILE)
    res = analyse(inst("transpose_naive", 1 << 20), prof, rate=1e-2)
    assert [lv.name for lv in res.levels] == [name for name, _ in cache_levels(prof)]
    assert res.order == device_order(prof) and res.samples > 1000
    assert all(0 <= lv.miss_ratio <= 1 and 0 <= lv.miss_ratio_random <= 1 for lv in res.levels)
    # ratios do not grow with the cache; every array's share of a level's misses adds up to all of them
    ratios = [lv.miss_ratio for lv in res.levels]
    assert ratios == sorted(ratios, reverse=True)
    assert all(sum(lv.by_array.values()) == pytest.approx(1.0) for lv in res.levels if lv.miss_ratio > 0)
    assert res.accesses == pytest.approx(2 * (1 << 20), rel=0.01)
    # the vector spmv gathers at random misses far more than the streamed matrix
    spmv = analyse(inst("spmv_csr", 1 << 20), prof, rate=1e-2)
    assert spmv.levels[0].by_array["x"] > 0.6


def test_a_gpu_order_from_the_h100_profile():
    order = device_order(load_profile(H100_PROFILE))
    assert order.lanes == 32 and order.units > 100 and order.line_bytes == 32 and order.sectored
    assert launch_groups(inst("vadd", 1 << 20)) == 4096


def _samples(*streams):
    from gpuprofiler.models.cache.analysis import Samples

    out = Samples()
    for lines, arrays in streams:
        out.add(np.asarray(lines, np.int64), np.asarray(arrays, np.int64), 1e-3, np.random.default_rng(0))
    return out


def test_scattered_lines_tell_a_stream_from_a_gather_and_a_page_stride():
    from gpuprofiler.models.cache.analysis import scattered_lines

    rng = np.random.default_rng(0)
    n = 4096
    seq = np.arange(n)                       # a stream: a new page every 4096 / 64 = 64 lines
    far = 10**7 + rng.permutation(10**6)[:n]  # a gather over 64 MB of lines
    walk = 2 * 10**7 + 64 * np.arange(n)     # a column walk: one line per 4 KiB page
    lines = np.stack([seq, far, walk], axis=1).ravel()  # interleaved, as one unit touches them
    arrays = np.tile([0, 1, 2], n)
    got = scattered_lines(_samples((lines, arrays)), ["a", "x", "col"], 64)
    assert got["a"] == pytest.approx((n // 64 - 1) / (n - 1))
    assert got["x"] > 0.99 and got["col"] == 1.0
    # a line touched again is not a new line: repeating the stream changes nothing
    again = scattered_lines(_samples((np.concatenate([seq, seq]), np.zeros(2 * n, np.int64))), ["a"], 64)
    assert again["a"] == pytest.approx((n // 64 - 1) / (n - 1))


def test_a_gathered_vector_that_fits_the_last_level_misses_once_per_sector():
    """spmv on the H100 at 2M rows: x (8 MB) fits the 50 MB L2, but a window of the launch (a million accesses)
    is too short to see the same sector gathered again; the launch comes back to it, so L2 misses x's sectors
    once (compulsory), not at every access the window does not see reused; the streamed matrix misses in full.
    At 32M rows x (128 MB) does not fit: most of its gathers miss."""
    prof = load_profile(H100_PROFILE)
    small = analyse(inst("spmv_csr", 1 << 21), prof, budget=1 << 20, count=2)
    last = small.levels[-1]
    sectors = (1 << 21) * 4 / 32
    assert last.misses * last.by_array["x"] == pytest.approx(sectors, rel=0.1)
    assert last.misses * last.by_array["cols"] == pytest.approx(8 * sectors, rel=0.05)
    assert small.scattered["x"] > 0.95 and small.scattered["cols"] < 0.05
    large = analyse(inst("spmv_csr", 1 << 25), prof, budget=1 << 20, count=2)
    big = large.levels[-1]
    assert big.misses * big.by_array["x"] > 0.5 * 8 * (1 << 25)
    assert large.scattered_share(big) > 0.6 > small.scattered_share(last)


# ---- physically indexed sets -------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 1 << 30), min_size=1, max_size=200), st.sampled_from([16, 64, 1024, 16384]))
def test_a_lines_set_keeps_its_page_offset_and_its_pages_colour(lines, sets):
    """A set spans the page's lines (the offset bits) and a colour per page: lines of one page land in consecutive
    sets of one colour; a cache of at most a page per way is indexed by the line's low bits alone."""
    s = Samples(line_bytes=64)
    lines = np.array(lines, dtype=np.int64)
    got = s.set_of(lines, sets)
    assert np.all((0 <= got) & (got < sets))
    if sets <= 64:
        assert np.array_equal(got, lines % sets)
    else:
        assert np.array_equal(got % 64, lines % 64)
        same_page = (lines[:, None] // 64) == (lines[None, :] // 64)
        assert np.all((got[:, None] // 64 == got[None, :] // 64) | ~same_page)


def test_a_column_walk_crowds_some_sets_of_a_physically_indexed_level():
    """512 lines 2 KiB apart (a 512 x 512 float matrix's column) in a 1 MiB, 16-way cache of 1024 sets: virtual
    indexing puts 16 in each of 32 sets, which the ways hold exactly; random page colours overfill some."""
    s = Samples(line_bytes=64)
    walk = np.arange(512, dtype=np.int64) * 32 + 7
    counts = np.bincount(s.set_of(walk, 1024), minlength=1024)
    assert np.bincount(walk % 1024, minlength=1024).max() == 16
    assert counts.sum() == 512 and counts.max() > 16


@pytest.mark.parametrize("rows,streams,share", [(8, 16, 0.0), (16, 16, 0.0), (17, 16, 1.0), (34, 24, 1.0)])
def test_a_tiles_rows_are_streams_a_core_follows_up_to_its_capacity(rows, streams, share):
    """A unit walking ``rows`` rows a line at a time, round robin (a 2-D tile's rows): with a core that follows
    ``streams`` pages at once, no line is scattered while the rows fit (each page's first line starts a stream);
    past them, every line."""
    s = Samples(line_bytes=64)
    steps = 256
    lines = (np.arange(rows)[None, :] * 1000 + np.arange(steps)[:, None]).ravel()  # rows 64 KB apart
    s.first_lines.append(lines.astype(np.int64))
    s.first_arrays.append(np.zeros(len(lines), dtype=np.int64))
    got = scattered_lines(s, ["a"], 64, streams)["a"]
    assert got == share
    # without a capacity: a new line in another page than the unit's previous one of that buffer
    assert scattered_lines(s, ["a"], 64)["a"] == pytest.approx(1.0 if rows > 1 else 1 / 64, rel=1e-12)


def test_a_page_starts_a_stream_when_its_next_line_follows_not_when_it_is_strided_or_touched_once():
    """With a core that follows 16 pages: a copy whose pages the cores split (16 consecutive lines of every other
    page) has no scattered line; a column walk 2 KiB apart (two lines a page, 32 lines apart) starts no stream, and
    both lines of each page are scattered; a gather's lines, one a page, are all scattered; a page a stream starts
    in keeps its lines streamed even where the walk reached it with a stride first."""
    def share(lines):
        s = Samples(line_bytes=64)
        s.first_lines.append(np.asarray(lines, np.int64))
        s.first_arrays.append(np.zeros(len(lines), dtype=np.int64))
        return scattered_lines(s, ["a"], 64, 16)["a"]

    split = (128 * np.arange(64)[:, None] + np.arange(16)[None, :]).ravel()
    assert share(split) == 0.0
    column = 32 * np.arange(512)
    assert share(column) == 1.0
    gather = 64 * np.random.default_rng(1).permutation(4096)[:512]
    assert share(gather) == 1.0
    late = np.array([5, 20, 21, 22, 23, 64 + 5, 64 + 20, 64 + 21, 64 + 22, 64 + 23])
    assert share(late) == pytest.approx(0.2)  # each page's first line, reached 15 lines before its stream


@pytest.mark.slow  # over five seconds; a cheaper test of the same behaviour stays in the default run
def test_the_cache_miss_law_counts_a_work_items_accesses_once_and_scales_them_by_the_declared_work():
    """covariance's work-items run n x (m - j1) steps: the first size analysed follows one work-item through them,
    the next take its count in proportion to the flops per work-item, within a tenth of following one there;
    with the same miss ratios; a spec that declares no work is followed at every size."""
    from gpuprofiler.models.fractal.misses import BUDGET, WINDOWS, miss_cost

    profile = load_profile(POCL_PROFILE)
    spec = load_spec(KERNELS / "covariance.toml")
    cost = miss_cost(spec, profile)
    first, second = cost.analysis(96), cost.analysis(128)
    assert first.probed and not second.probed
    followed = analyse(spec.instantiate(128), profile, budget=BUDGET, count=WINDOWS)
    assert followed.probed and second.per_item == pytest.approx(followed.per_item, rel=0.1)
    assert len(second.levels) == len(followed.levels) > 0
    for mine, theirs in zip(second.levels, followed.levels):
        assert mine.miss_ratio == pytest.approx(theirs.miss_ratio, abs=0.03)

    bare = dataclasses.replace(load_spec(KERNELS / "vadd.toml"), flops=None, bytes=None)
    vadd = miss_cost(bare, profile)
    assert vadd.analysis(4096).probed and vadd.analysis(8192).probed


def test_sizes_above_one_whose_graph_is_too_large_are_not_built_again(monkeypatch):
    """The builder's statement limit passed at one size fails the larger ones with its message at once; smaller
    sizes are still analysed."""
    import gpuprofiler.models.fractal.misses as misses
    from gpuprofiler.models.maxplus.builder import TooLarge

    built = []

    def too_large(inst, *args, **kwargs):
        built.append(inst.size)
        raise TooLarge(f"covariance.cl:13: more than 131072 statements after unrolling at {inst.size}")

    monkeypatch.setattr(misses, "analyse", too_large)
    cost = misses.miss_cost(load_spec(KERNELS / "covariance.toml"), load_profile(POCL_PROFILE))
    assert cost.analysis(160) is None and cost.analysis(192) is None and cost.analysis(480) is None
    assert cost.analysis(96) is None
    assert built == [160, 96]
    assert cost.failed[192] == cost.failed[480] == cost.failed[160]


# ---- reuses after the window -------------------------------------------------------------------------------------


def _windowed_miss_ratio(lines, arrays, names, footprints, capacity, window, seed=0):
    """A fully associative LRU level's miss ratio as the analysis reads it off windows of ``window`` accesses (the
    launch's reuses beyond a window taken by :func:`later_hits`), over 64 windows at random points of the stream."""
    from gpuprofiler.models.cache.analysis import later_hits
    from gpuprofiler.models.cache.statcache import stack_distance_of

    rng = np.random.default_rng(seed)
    s = Samples()
    for start in np.sort(rng.integers(0, len(lines) - window, 64)):  # not evenly: a period would alias
        s.add(lines[start:start + window], arrays[start:start + window], 0.05, rng)
    d, _ = s.all()
    later = later_hits(s, names, footprints, float(len(lines)), capacity)
    return s.misses(stack_distance_of(d) >= capacity, names, later)[0], later


def test_a_gather_reused_after_the_window_hits_as_lru_does():
    """A uniform gather over 4096 lines beside a stream (spmv's x beside cols), the gather's mean gap (8192
    accesses) four times a window's: an LRU cache of C lines holds about C / 4096 of the gathers, less what the
    stream takes; the analysis's windows agree with exact LRU on the whole stream within 0.03. Taking every
    reuse after a window as coming back a mean gap later, all or nothing, misses nearly every gather."""
    rng = np.random.default_rng(7)
    steps = 1 << 18
    lines = np.empty(2 * steps, np.int64)
    lines[0::2] = (1 << 30) + np.arange(steps) // 16  # a stream, 16 steps to a line, never back
    lines[1::2] = rng.integers(0, 4096, steps)
    arrays = np.tile(np.array([0, 1], np.int64), steps)
    foot = {"stream": steps // 16, "x": 4096}
    capacities = [512, 1024, 2048, 3072]
    exact = lru_miss_ratio(lines, capacities)
    for capacity, want in zip(capacities, exact):
        got, later = _windowed_miss_ratio(lines, arrays, ["stream", "x"], foot, capacity, window=2048)
        assert abs(got - want) <= 0.03, (capacity, got, want)
        # the stream never comes back; the gathers do, past the window's end once the cache outlasts it
        assert later[0] == 0.0 and (later[1] > 0.0) == (capacity > 512)


def test_a_buffer_the_launch_comes_back_to_evenly_keeps_the_all_or_nothing_rule():
    """A block of 1024 lines swept in order, then the same sweep again after a stream of 1536 new lines (a matrix
    each work-group row reads again): each line is back after exactly 2560 accesses, past the window. A cache of
    3072 lines holds the block (the second sweep hits); one of 2048 does not (it misses), as exact LRU says."""
    sweeps = 64
    block = np.arange(1024, dtype=np.int64)
    lines = np.concatenate([np.concatenate([block, (1 << 30) + k * 1536 + np.arange(1536)]) for k in range(sweeps)])
    arrays = np.concatenate([np.concatenate([np.zeros(1024, np.int64), np.ones(1536, np.int64)])] * sweeps)
    foot = {"a": 1024, "stream": 1536 * sweeps}
    for capacity, want in zip((2048, 3072), lru_miss_ratio(lines, [2048, 3072])):
        got, _ = _windowed_miss_ratio(lines, arrays, ["a", "stream"], foot, capacity, window=2048)
        assert abs(got - want) <= 0.03, (capacity, got, want)


def test_a_latency_knee_well_past_the_drivers_last_level_cache_is_not_a_cache():
    """The H100 profile's latency curve has knees at 27.8 MB (the near half of its L2) and 106 MB; the driver
    reports a 50 MB L2, so the second is the translation's reach or the memory's, not a cache level. A knee
    within 1.25x of what the driver reports stays."""
    prof = load_profile(H100_PROFILE)
    assert [round(c.size_bytes / 2**20) for c in view(prof).caches][-1] == 101
    levels = cache_levels(prof)
    assert [name for name, _ in levels] == ["L1", "L2"] and levels[-1][1] == pytest.approx(27801901)
    data = copy.deepcopy(prof.data)
    data["device"]["extra"]["l2_cache_bytes"] = 90 << 20  # a driver reporting more keeps the knee at 101 MiB
    assert len(cache_levels(Profile(data))) == 3
    del data["device"]["extra"]["l2_cache_bytes"]  # nothing reported: every knee kept
    assert len(cache_levels(Profile(data))) == 3


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-3, 10.0), st.floats(1.0, 1e7), st.floats(1.0, 1e9))
@example(3.0, 1.0, 401684479.0)  # an answer 1e9 times below the upper end
def test_fill_finds_where_the_distinct_lines_reach_the_capacity(per_access, capacity, accesses):
    from gpuprofiler.models.cache.analysis import _fill

    got = _fill(lambda g: per_access * g, capacity, hi=accesses)
    if per_access * accesses < capacity:
        assert got == accesses  # the launch never fills it
    else:
        assert got == pytest.approx(capacity / per_access, rel=1e-9)


def test_the_probe_counts_a_stencils_interior_and_a_small_grid_whole():
    """The work-item probe that sizes the windows: a 5-point stencil's interior work-item reads 4 neighbours and
    stores once, which its first work-item (on the boundary, writing nothing) does not say, nor the first column of
    groups that a 128 x 128 grid's linear numbering puts its middles in. Covariance at 190 variables (3 work-groups
    of 64) is followed whole: the builder unrolls the triangle's loop over j2 for the 190 work-items' mean trip
    count, 96 passes, each for those still looping (min(190 - j1, 96) of them: 72 on average), and each pass reads
    2n = 380 elements and stores 2."""
    from gpuprofiler.models.cache.streams import probe_per_item

    order = device_order(load_profile(POCL_PROFILE))
    stencil = load_spec(KERNELS / "stencil5.toml")
    for side in (2048, 1449):
        assert probe_per_item(stencil.instantiate(stencil.valid_size(side * side)), order) == 5.0
    assert probe_per_item(inst("covariance", 190), order) == 72 * (2 * 190 + 2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 2), st.booleans()), min_size=1, max_size=60))
def test_coherence_counts_hand_offs_between_units_exactly(accesses):
    """Coherence misses (the next access to a line is another unit's, a store on either side) and the share of
    written lines that several units touch back to back, against a direct walk of the merged stream."""
    from gpuprofiler.models.cache.analysis import coherence
    from gpuprofiler.models.cache.reuse import next_and_first_use

    lines = np.array([a[0] for a in accesses], dtype=np.int64)
    units = np.array([a[1] for a in accesses])
    writes = np.array([a[2] for a in accesses])
    last: dict[int, int] = {}
    switches, shared = 0, set()
    for i, (line, unit, store) in enumerate(accesses):
        if line in last:
            j = last[line]
            if units[j] != unit:
                shared.add(line)
                switches += bool(writes[j] or store)
        last[line] = i
    written = {line for line, _, store in accesses if store}
    want_share = len(written & shared) / len(written) if written else 0.0
    nxt, first = next_and_first_use(lines)
    assert coherence(units, writes, nxt, first) == (float(switches), pytest.approx(want_share, abs=1e-12))
