"""Cache-level detection on synthetic latency curves: exact where the answer is known."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.calibrate.caches import detect_levels, plateaus


def staircase(level_sizes, latencies, top=2**31, per_octave=2, noise=0.0, seed=0):
    sizes = 2 ** np.arange(10, np.log2(top) + 1e-9, 1 / per_octave)
    lat = np.empty_like(sizes)
    bounds = list(level_sizes) + [np.inf]
    for i, s in enumerate(sizes):
        lat[i] = latencies[next(k for k, b in enumerate(bounds) if s <= b)]
    rng = np.random.default_rng(seed)
    return sizes, lat * (1 + noise * rng.uniform(-1, 1, len(lat)))


def test_three_levels_exact():
    sizes, lat = staircase([32 << 10, 1 << 20, 32 << 20], [1e-9, 4e-9, 15e-9, 80e-9])
    levels = detect_levels(sizes, lat)
    assert [round(np.log2(c.size_bytes)) for c in levels.caches] == [15, 20, 25]
    assert [c.latency_s for c in levels.caches] == [1e-9, 4e-9, 15e-9]
    assert levels.memory_latency_s == 80e-9


@settings(max_examples=60)
@given(st.lists(st.integers(12, 28), min_size=1, max_size=3, unique=True), st.floats(0.0, 0.08), st.integers(0, 99))
def test_detected_sizes_within_a_factor_of_two(exponents, noise, seed):
    exps = sorted(exponents)
    if any(b - a < 2 for a, b in zip(exps, exps[1:])):
        exps = exps[:1]  # levels closer than two octaves cannot be plateaus of >= 1 octave each
    lats = [1e-9 * 3.0**k for k in range(len(exps) + 1)]
    sizes, lat = staircase([2**e for e in exps], lats, noise=noise, seed=seed)
    found = [c.size_bytes for c in detect_levels(sizes, lat).caches]
    assert len(found) == len(exps)
    for f, e in zip(found, exps):
        assert 2 ** (e - 1) <= f <= 2 ** (e + 1)


def test_rising_curve_has_no_false_levels():
    sizes = 2 ** np.arange(10, 31, 0.5)
    lat = 1e-9 * (sizes / 1024) ** 0.5  # no plateau anywhere
    levels = detect_levels(sizes, lat)
    assert levels.caches == [] and levels.memory_latency_s == lat[-1]


def test_plateaus_runs():
    assert plateaus([1, 1.05, 1.1, 3, 3.1, 3.2, 10]) == [(0, 3), (3, 6)]
