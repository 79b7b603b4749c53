"""Cache-level detection on synthetic latency curves: exact where the answer is known."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.calibrate.caches import cache_figures, detect_levels, level_names, plateaus
from gpuprofiler.errors import UserError


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


# --------------------------------------------------------------------------------------------------
# level names (method version 2): L1, L2, L3 on a CPU; on a GPU the plateau after L2 is "L2 far"
# --------------------------------------------------------------------------------------------------

H100_LIKE = ([256 << 10, 16 << 20, 64 << 20], [20e-9, 147e-9, 300e-9, 600e-9])  # L1, L2 near, L2 far, memory


def latency_result(sizes, lat):
    return {"latency_curve": [{"bytes": int(s), "latency_s": float(v)} for s, v in zip(sizes, lat)],
            "pattern": "synthetic staircase"}


def test_level_names_by_device_type():
    assert level_names(3, "cpu") == ["L1", "L2", "L3"]
    assert level_names(3, "gpu") == ["L1", "L2", "L2 far"]
    assert level_names(2, "GPU") == ["L1", "L2"]
    assert level_names(5, "gpu") == ["L1", "L2", "L2 far", "level 4", "level 5"]
    assert level_names(4, "accelerator") == ["L1", "L2", "L3", "L4"]
    assert level_names(0, "gpu") == [] and level_names(1, "other") == ["L1"]


@pytest.mark.parametrize("kind, count, message", [
    ("fpga", 2, "unknown device type 'fpga': expected one of gpu, cpu, accelerator, other"),
    (None, 2, "unknown device type None"),
    ("gpu", -1, "must be a non-negative integer, got -1"),
    ("gpu", 2.0, "must be a non-negative integer, got 2.0"),
])
def test_level_names_bad_input(kind, count, message):
    with pytest.raises(UserError, match=re.escape(message)):
        level_names(count, kind)


def test_gpu_plateau_after_l2_is_l2_far_exactly():
    sizes, lat = staircase(*H100_LIKE, top=2**29)
    caches, dram = cache_figures(latency_result(sizes, lat), 2e9, device_type="gpu")
    assert [c["name"] for c in caches] == ["L1", "L2", "L2 far"]
    assert [c["level"] for c in caches] == [1, 2, 3]                     # still numeric for old readers
    assert [c["latency_s"] for c in caches] == [20e-9, 147e-9, 300e-9]
    assert [c["latency_cycles"] for c in caches] == [40.0, 294.0, 600.0]
    assert [round(np.log2(c["size_bytes"])) for c in caches] == [18, 24, 26]
    assert dram["value"] == 600e-9 and dram["status"] == "ok"


def test_cpu_keeps_l3_on_the_same_curve():
    sizes, lat = staircase(*H100_LIKE, top=2**29)
    caches, _ = cache_figures(latency_result(sizes, lat), 2e9, device_type="cpu")
    assert [c["name"] for c in caches] == ["L1", "L2", "L3"]


def test_gpu_with_two_plateaus_has_no_far_l2():
    sizes, lat = staircase([256 << 10, 32 << 20], [20e-9, 150e-9, 600e-9], top=2**29)
    caches, _ = cache_figures(latency_result(sizes, lat), None, device_type="gpu")
    assert [c["name"] for c in caches] == ["L1", "L2"] and [c["latency_cycles"] for c in caches] == [None, None]


def test_cache_figures_needs_a_known_device_type():
    sizes, lat = staircase(*H100_LIKE, top=2**29)
    with pytest.raises(UserError, match="unknown device type 'tpu'"):
        cache_figures(latency_result(sizes, lat), 2e9, device_type="tpu")


def test_hardware_view_reads_named_levels_by_number():
    """Profiles with names (method v2) read as before: HardwareView.caches takes the numeric level."""
    from gpuprofiler.profile.file import SCHEMA, Profile
    from gpuprofiler.profile.hardware import HardwareView

    sizes, lat = staircase(*H100_LIKE, top=2**29)
    caches, _ = cache_figures(latency_result(sizes, lat), 2e9, device_type="gpu")
    hw = HardwareView(Profile({"schema": SCHEMA, "schema_version": 1, "caches": caches}))
    assert [c.level for c in hw.caches] == [1, 2, 3]
    assert [c.latency_s for c in hw.caches] == [20e-9, 147e-9, 300e-9]
