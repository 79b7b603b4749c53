"""Reuse and LRU stack distances: exact on small streams (against a direct count), and StatStack / StatCache from
a sample of one access in a thousand against the exact LRU miss ratio."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.cache.reuse import (
    lru_miss_ratio,
    next_and_first_use,
    next_use,
    previous_from_next,
    previous_use,
    reuse_distances,
    stack_distances,
)
from gpuprofiler.models.cache.statcache import expected_stack_distance, statcache, statstack


def direct_stack_distances(lines):
    out, last = [], {}
    for i, line in enumerate(lines):
        out.append(len(set(lines[last[line] + 1:i])) if line in last else -1)
        last[line] = i
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=80))
def test_stack_distances_are_exact(lines):
    assert stack_distances(np.array(lines, dtype=np.int64)).tolist() == direct_stack_distances(lines)


def test_next_previous_and_reuse_distances():
    lines = np.array([7, 3, 7, 7, 5, 3])
    assert next_use(lines).tolist() == [2, 5, 3, 6, 6, 6]
    assert previous_use(lines).tolist() == [-1, -1, 0, 2, -1, 1]
    assert reuse_distances(lines).tolist() == [1, 3, 0, -1, -1, -1]
    assert stack_distances(lines).tolist() == [-1, -1, 1, 0, -1, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=80), st.sampled_from([0, -5, 2**40, 2**61]))
def test_next_and_first_use_are_exact_at_any_line_numbers(lines, offset):
    """By one sort of (line, position) keys, or of the lines where their span times the length would overflow."""
    arr = np.array(lines, dtype=np.int64) + offset
    if len(lines):
        arr[0] = offset if offset < 2**61 else 0  # at 2^61 the span forces the stable argsort
    nxt, first = next_and_first_use(arr)
    values = arr.tolist()
    assert nxt.tolist() == [next((j for j in range(i + 1, len(values)) if values[j] == v), len(values))
                            for i, v in enumerate(values)]
    assert first.tolist() == [values.index(v) for v in values]
    assert previous_from_next(nxt).tolist() == previous_use(arr).tolist()


def sampled(lines, rate=1e-3, seed=0):
    """Forward reuse distances of a random sample of the stream's first half (inf: not reused)."""
    rng = np.random.default_rng(seed)
    half = len(lines) // 2
    pick = np.flatnonzero(rng.random(half) < rate)
    d = reuse_distances(lines)[pick].astype(float)
    d[d < 0] = np.inf
    return d


def streams(kind, n, m, seed):
    """A synthetic stream and its LRU miss ratio as a function of the cache's lines (known exactly: a line's first
    touch always misses; a sweep over m lines misses everything in fewer than m lines; uniformly random accesses
    over m lines hit with probability L / m, the independent-reference model's LRU result)."""
    rng = np.random.default_rng(seed)
    if kind == "sequential":  # 4-byte elements, 64-byte lines: each line 16 times in a row, then never again
        return np.arange(n, dtype=np.int64) // 16, lambda lines: 1 / 16
    if kind == "cyclic":
        return np.arange(n, dtype=np.int64) % m, lambda lines: 1.0 if lines < m else m / n
    if kind == "strided":  # coprime steps through m lines: a sweep over all of them, in another order
        step = next(k for k in (3, 5, 7, 11, 13) if np.gcd(k, m) == 1)
        return (np.arange(n, dtype=np.int64) * step) % m, lambda lines: 1.0 if lines < m else m / n
    return rng.integers(0, m, n), lambda lines: max(0.0, 1 - lines / m) + m / n


@pytest.mark.slow
@settings(max_examples=16, deadline=None)
@given(st.sampled_from(["sequential", "cyclic", "strided", "random"]), st.integers(300, 20000), st.integers(0, 10**6))
def test_statstack_from_one_access_in_a_thousand_matches_lru(kind, m, seed):
    # 2^24 accesses give 8000 samples: with 4000, a random set barely larger than the cache (300 lines, 256 cached)
    # was off by up to 0.034 for some seeds, the sample's stack-distance estimate moving about 3 lines (std ~0.01)
    lines, truth = streams(kind, 1 << 24, m, seed)
    sizes = [256, 512, 1024, 4096, 16384]
    est = statstack(sampled(lines, 1e-3, seed + 1), sizes)  # a sample independent of the stream's own draws
    exact = np.array([truth(s) for s in sizes])
    assert np.all(np.abs(est - exact) <= 0.03), (kind, m, exact, est)


@pytest.mark.slow
def test_statstack_matches_the_exact_lru_stack_distances_of_the_same_stream():
    rng = np.random.default_rng(5)
    # a mix: a random gather over 3000 lines beside a stream that never comes back, as spmv does
    n = 1 << 21
    lines = np.where(rng.random(n) < 0.3, rng.integers(0, 3000, n), 10**9 + np.arange(n) // 16)
    sizes = [256, 1024, 2048, 4096]
    exact = lru_miss_ratio(lines, sizes)
    assert np.all(np.abs(statstack(sampled(lines, 1e-3, 11), sizes) - exact) <= 0.03), exact  # not the stream's seed


def test_statcache_is_random_replacement():
    # a cyclic sweep over 2000 lines: LRU with 1000 lines misses every access, random replacement keeps some
    lines = np.arange(1 << 20, dtype=np.int64) % 2000
    d = sampled(lines)
    assert statstack(d, [1000])[0] == pytest.approx(1.0)
    r = statcache(d, [1000, 4000])
    assert 0.5 < r[0] < 0.95 and r[1] < 0.01
    # Hagersten's equation holds at the solution: R = mean(1 - (1 - 1/L)^(R d))
    R = r[0]
    assert R == pytest.approx(np.mean(1 - (1 - 1 / 1000) ** (R * d)), abs=1e-6)
    # nothing ever reused: every access misses in every cache
    assert statcache(np.full(100, np.inf), [10, 10**6]).tolist() == [1.0, 1.0]


def test_expected_stack_distance_of_a_cyclic_stream_is_its_period():
    d = np.full(1000, 99.0)  # every access reused after 99 others: a cycle of 100 lines
    _, sd = expected_stack_distance(d)
    assert np.allclose(sd, 99.0)
    assert statstack(d, [99, 100]).tolist() == [1.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=120), st.integers(1, 8), st.integers(1, 6),
       st.data())
def test_a_windows_distinct_lines_of_a_set_are_counted_exactly(lines, sets, ways, data):
    """The set-crowding count of the cache analysis against a direct count over each window."""
    from gpuprofiler.models.cache.analysis import _crowded

    stream = np.array(lines, dtype=np.int64)
    queries = data.draw(st.lists(st.tuples(st.integers(0, len(lines)), st.integers(0, len(lines)),
                                           st.integers(0, sets - 1)), min_size=1, max_size=20))
    lo = np.array([min(x, y) for x, y, _ in queries])
    hi = np.array([max(x, y) for x, y, _ in queries])
    in_set = np.array([s for _, _, s in queries])
    got = _crowded(stream, lambda x: x % sets, lo, hi, in_set, ways, chunk=7)
    want = [len({v for v in lines[a:b] if v % sets == s}) >= ways for a, b, s in zip(lo, hi, in_set)]
    assert got.tolist() == want
