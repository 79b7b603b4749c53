"""Stores that miss a private level for a line they touched before, and what the cores wait for them."""

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import H100_PROFILE, KERNELS, POCL_PROFILE

from gpuprofiler.models.cache.analysis import analyse
from gpuprofiler.models.costs import store_stalls
from gpuprofiler.models.fractal.laws import CacheMissLaw
from gpuprofiler.models.fractal.misses import BUDGET, WINDOWS, miss_cost
from gpuprofiler.profile.file import load_profile
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.spec import load_spec

POCL = load_profile(POCL_PROFILE)
H100 = load_profile(H100_PROFILE)


@pytest.mark.parametrize("side,conflict", [(2048, True), (1024, True), (2000, False), (2100, False)])
def test_a_transposes_stores_re_miss_l1_only_at_a_power_of_two_side(side, conflict):
    """16 x 16 groups: a group's 16 stores to one row of dst fill one line each of 16 rows; at a power-of-two side
    those 16 lines share one L1 set of 12 ways (a 4 KiB-page set index), so 15 of every 16 stores miss a line
    they wrote before; at another side they spread over the sets and (but for rows whose chunk straddles two lines
    crowding a set now and then) only each line's first store misses."""
    spec = load_spec(KERNELS / "transpose_naive.toml")
    a = analyse(spec.instantiate(side * side), POCL, budget=BUDGET, count=WINDOWS)
    l1 = a.levels[0]
    assert l1.name == "L1" and not l1.shared
    share = l1.store_remisses / side**2
    if conflict:
        assert share == pytest.approx(15 / 16, abs=0.03)
    else:
        assert share < 0.1
    assert all(lv.store_remisses == 0 for lv in a.levels if lv.shared)


def _levels(*stores, shared_last=True):
    return [SimpleNamespace(name=f"L{i + 1}", store_remisses=s, shared=shared_last and i == len(stores) - 1)
            for i, s in enumerate(stores)]


def test_store_stalls_are_re_misses_times_the_next_levels_latency_over_the_cores():
    hw = view(POCL)
    l2, l3 = hw.caches[1].latency_s, hw.caches[2].latency_s
    cores = hw.compute_units.value
    seconds, source = store_stalls(POCL, _levels(1e6, 2e5, 7e7))
    assert seconds == pytest.approx((1e6 * l2 + 2e5 * l3) / cores, rel=1e-12)  # the shared level's: DRAM traffic
    assert "re-missing L1" in source and "re-missing L2" in source
    assert store_stalls(POCL, _levels(1e6, 2e5, 7e7), only=1)[0] == pytest.approx(2e5 * l3 / cores, rel=1e-12)
    # past the last knee: DRAM's latency
    dram = hw.figure("memory.dram_latency_s").value
    assert store_stalls(POCL, _levels(0, 0, 5e4, 0, shared_last=False), only=2)[0] == pytest.approx(
        5e4 * dram / cores, rel=1e-12)
    assert store_stalls(POCL, _levels(0.0, 0.0, 0.0))[0] == 0.0


def test_a_gpu_has_no_store_stalls():
    assert store_stalls(H100, _levels(1e6, 1e6))[0] == 0.0


def test_the_cache_miss_law_adds_the_stalls_it_does_not_fit():
    """T = c0 + max(k W, s M) + X: X (priced, not fitted) is taken out of the times before the fit and added back."""
    sizes = np.array([100.0, 200.0, 400.0, 800.0])

    class Memory:
        def __call__(self, n):
            return 1e-12 * n

        def stall_s(self, n):
            return 0.0 if n < 1000 else 2e-3

    law = CacheMissLaw(lambda n: n**2, Memory())
    times = 1e-4 + 1e-9 * sizes**2
    law._fit(sizes, times)
    c0, k, s, r, u = law.coef_
    assert c0 == pytest.approx(1e-4, rel=1e-6) and k == pytest.approx(1e-9, rel=1e-6) and s == 1.0 and r == 1.0
    value, _, details = law._predict(4000)
    assert value == pytest.approx(1e-4 + 1e-9 * 4000**2 + 2e-3, rel=1e-6) and details["store_stall_s"] == 2e-3


def test_stalls_larger_than_a_measured_time_refuse_the_law():
    class Memory:
        def __call__(self, n):
            return 0.0

        def stall_s(self, n):
            return 1.0

    with pytest.raises(ValueError, match="store stalls"):
        CacheMissLaw(lambda n: n, Memory())._fit(np.array([1.0, 2.0, 3.0]), np.array([1e-3, 2e-3, 3e-3]))


def test_miss_cost_prices_a_power_of_two_transpose():
    spec = load_spec(KERNELS / "transpose_naive.toml")
    cost = miss_cost(spec, POCL)
    hw = view(POCL)
    at = cost.analysis(2048 * 2048)
    assert cost.stall_s(2048 * 2048) == pytest.approx(
        at.levels[0].store_remisses * hw.caches[1].latency_s / hw.compute_units.value, rel=1e-12)
    assert cost.stall_s(2000 * 2000) == 0.0
