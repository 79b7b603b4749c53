"""The cache geometry the operating system reports, how a CPU's physically indexed L2 fills its sets, and the bound
the cache-miss law sets for the loads a later cache level serves."""

import copy
import math

import numpy as np
import pytest
from conftest import FIXTURES, H100_PROFILE, KERNELS
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.device.base import host_caches, page_batch
from gpuprofiler.models.cache.analysis import Samples, analyse, cache_levels, geometry
from gpuprofiler.models.cache.streams import device_order
from gpuprofiler.models.fractal.misses import BUDGET, WINDOWS, level_bandwidths, miss_cost
from gpuprofiler.profile.file import Profile, load_profile
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.spec import load_spec

ZEN4 = load_profile(FIXTURES / "profiles" / "pocl_zen4.json")
# what this VM's Linux reports (sysfs and /proc/zoneinfo), as `device.extra` holds it in newer profiles
ZEN4_CACHES = [{"level": 1, "size_bytes": 32768, "ways": 8, "sets": 64, "line_bytes": 64},
               {"level": 2, "size_bytes": 1 << 20, "ways": 8, "sets": 2048, "line_bytes": 64},
               {"level": 3, "size_bytes": 32 << 20, "ways": 16, "sets": 32768, "line_bytes": 64}]


def zen4(caches=ZEN4_CACHES, run=63):
    data = copy.deepcopy(ZEN4.data)
    data["device"]["extra"].update({"host_caches": caches, "page_run_pages": run})
    return Profile(data)


def _write(root, name, **files):
    d = root / name
    d.mkdir()
    for key, value in files.items():
        (d / key).write_text(f"{value}\n")


def test_host_caches_reads_the_data_caches_smallest_first(tmp_path):
    _write(tmp_path, "index0", level=1, type="Data", size="32K", ways_of_associativity=8, number_of_sets=64,
           coherency_line_size=64)
    _write(tmp_path, "index1", level=1, type="Instruction", size="32K", ways_of_associativity=8,
           number_of_sets=64, coherency_line_size=64)
    _write(tmp_path, "index3", level=3, type="Unified", size="32768K", ways_of_associativity=16,
           number_of_sets=32768, coherency_line_size=64)
    _write(tmp_path, "index2", level=2, type="Unified", size="1024K", ways_of_associativity=8,
           number_of_sets=2048, coherency_line_size=64)
    _write(tmp_path, "index4", level=4, type="Unified", size="?", ways_of_associativity=0)  # unreadable: left out
    assert host_caches(str(tmp_path)) == ZEN4_CACHES
    assert host_caches(str(tmp_path / "missing")) == []


def test_page_batch_is_the_largest_zones_batch(tmp_path):
    zi = tmp_path / "zoneinfo"
    zi.write_text("Node 0, zone DMA\n  pagesets\n    cpu: 0\n              count: 0\n              high:  0\n"
                  "              batch: 1\nNode 0, zone Normal\n    cpu: 0\n              batch: 63\n")
    assert page_batch(str(zi)) == 63
    assert page_batch(str(tmp_path / "none")) is None


def test_a_level_takes_the_reported_geometry_of_its_level_within_a_factor_of_four():
    hw = view(zen4())
    assert hw.reported_cache(2, 788_012) == (8, 2048)      # the calibrated L2 knee: the 1 MiB L2
    assert hw.reported_cache(2, 2_533_950) == (8, 2048)    # a knee read high on a busy host: still the L2
    assert hw.reported_cache(3, 20 << 20) == (16, 32768)
    assert hw.reported_cache(3, 6_646_391) is None         # 4.8x short of the 32 MiB L3
    assert hw.reported_cache(2, 6_646_391) is None         # 6.6 MiB is no L2 of 1 MiB
    assert hw.reported_cache(4, 20 << 20) is None          # no level 4 reported
    assert hw.page_run == 63
    assert view(ZEN4).reported_cache(2, 788_012) is None and view(ZEN4).page_run == 1
    assert view(load_profile(H100_PROFILE)).reported_cache(2, 50 << 20) is None  # a GPU: never the host's caches
    order = device_order(zen4())
    assert geometry("L2", 788_012, order, (8, 2048)) == (8, 2048)
    assert geometry("L2", 788_012, order) == (12, 1024)  # 16-way guess when nothing is reported
    assert geometry("L1", 22_388, order, (8, 64)) == (5, 64)  # L1: its calibrated capacity over a page of sets


@settings(max_examples=60, deadline=None)
@given(run=st.integers(1, 200), start=st.integers(0, 1 << 20), sets=st.sampled_from([128, 2048, 8192]))
def test_within_a_run_of_contiguous_pages_colours_follow_the_virtual_pages(run, start, sets):
    s = Samples(line_bytes=64, page_run=run)
    colours = sets // 64
    first = (start // run) * run  # the run holding page `start`
    pages = np.arange(first, first + run)
    got = s.set_of(pages * 64 + 5, sets)
    assert np.all(got % 64 == 5)  # the offset within the page is kept
    steps = np.diff(got // 64) % colours
    assert np.all(steps == 1 % colours)  # consecutive pages of a run: consecutive colours
    assert np.all(s.set_of(np.arange(64), 64) == np.arange(64))  # a page's worth of sets: virtual index


@pytest.mark.parametrize("n,crowded", [(496, False), (512, True), (528, False), (768, False), (1024, True)])
def test_matmul_naive_column_crowds_the_l2_only_where_its_sets_fill(n, crowded):
    """B's column walk, one line per k: at 512 (2 KiB stride) 8 lines of each of the column's sets, as many as an
    8-way set holds; at 1024 32 a set; at 768 (3 KiB stride) 6 on average (the runs' boundaries leave some sets
    fuller: a few per cent of misses, a tenth of the crowded sizes'); at 496 and 528 spread over every set.
    Measured here (p10 per n^3): 0.50, 1.04, 0.51, 0.54 and 1.54 ns."""
    spec = load_spec(KERNELS / "matmul_naive.toml")
    a = analyse(spec.instantiate(n), zen4(), budget=BUDGET, count=WINDOWS)
    l2 = a.level("L2")
    assert (l2.ways, l2.sets) == (8, 2048) and not l2.shared
    if crowded:
        assert l2.miss_ratio > 0.3
    else:
        assert l2.miss_ratio < 0.03 if n != 768 else l2.miss_ratio < 0.1


def test_the_l2s_misses_served_by_the_l3_are_priced_at_the_bandwidth_of_a_working_set_in_it():
    prof = zen4()
    spec = load_spec(KERNELS / "matmul_naive.toml")
    cost = miss_cost(spec, prof)
    bws = level_bandwidths(prof)
    assert bws[0] is None  # the curve starts at 1 MiB: an L1's misses are not priced
    a = cost.analysis(1024)
    l2, last = a.level("L2"), a.levels[-1]
    expect = (l2.misses * (1 - l2.write_share) - last.misses) * 64 / bws[1]
    assert cost.served_s(1024) == pytest.approx(expect, rel=1e-9)
    assert 0.5 < cost.served_s(1024) < 2.0  # about 1e9 loads at ~1 ns
    assert cost.served_s(496) < 1e-3 * cost.served_s(1024)
    gpu = miss_cost(spec, load_profile(H100_PROFILE))
    assert gpu.served_s(1024) == 0.0


def test_a_levels_bandwidth_is_the_best_the_curve_measured_between_it_and_the_next():
    """Other tenants only slow a point of the working-set curve: the L2's misses take the fastest point past the L2
    and within the next level, not the one nearest the middle; without a point there, the interpolation."""
    prof = zen4()
    levels = cache_levels(prof)
    curve = prof.data["bandwidth"]["working_set_curve"]
    inside = [p["Bps"] for p in curve if levels[1][1] < p["bytes"] <= levels[2][1]]
    assert inside and level_bandwidths(prof)[1] == max(inside)
    slowed = copy.deepcopy(prof.data)
    best = max(range(len(curve)), key=lambda i: curve[i]["Bps"] if levels[1][1] < curve[i]["bytes"] <= levels[2][1]
               else -1)
    slowed["bandwidth"]["working_set_curve"][best]["Bps"] /= 3  # one disturbed point
    bws = level_bandwidths(Profile(slowed))
    assert bws[1] == max(sorted(inside)[:-1] + [max(inside) / 3])
    assert bws[-1] == view(prof).figure("bandwidth.read_Bps").value
    # no point between the L2 and the next level, one on each side: the curve interpolated at their mean
    sparse = copy.deepcopy(prof.data)
    kept = [{"bytes": levels[1][1] / 2, "Bps": 80e9}] + [p for p in curve if p["bytes"] > levels[2][1]]
    sparse["bandwidth"]["working_set_curve"] = kept
    mean = math.sqrt(levels[1][1] * levels[2][1])
    expect = math.exp(np.interp(math.log(mean), np.log([p["bytes"] for p in kept]), np.log([p["Bps"] for p in kept])))
    assert level_bandwidths(Profile(sparse))[1] == pytest.approx(expect, rel=1e-12)
    sparse["bandwidth"]["working_set_curve"] = kept[1:]  # nor any below the mean: not measured, not priced
    assert level_bandwidths(Profile(sparse))[1] is None


def test_the_lines_a_later_cache_serves_bound_the_time_beside_the_work():
    """The served lines are a bound of their own: below the work they add nothing, above it they are the time."""
    from gpuprofiler.models.fractal.laws import CacheMissLaw

    sizes = np.array([100.0, 200.0, 400.0, 800.0])

    class Memory:
        def __init__(self, served):
            self.served = served

        def __call__(self, n):
            return 1e-12 * n

        def served_s(self, n, capacity=None):
            return 0.0 if n < 1000 else self.served

    for served in (5e-3, 5e-2):
        law = CacheMissLaw(lambda n: n**2, Memory(served))
        law._fit(sizes, 1e-4 + 1e-9 * sizes**2)
        value, _, details = law._predict(4000)
        assert value == pytest.approx(1e-4 + max(1e-9 * 4000**2, served), rel=1e-6)
        assert details["cache_served_s"] == served and math.isfinite(details["work_s"])
        assert details["bound"] == ("lines a later cache serves" if served > 1.6e-2 else "work")


def test_served_lines_that_bind_at_some_small_sizes_get_their_scale_fitted():
    """Lines served by the L3 that bind the two largest small sizes, at half the profile's bandwidth: r is fitted
    to 0.5; the work's k and the fixed time come back too."""
    from gpuprofiler.models.fractal.laws import CacheMissLaw

    sizes = np.array([100.0, 200.0, 300.0, 400.0, 600.0, 800.0])

    class Memory:
        def __call__(self, n):
            return 1e-12 * n

        def served_s(self, n, capacity=None):
            return 4e-9 * n**2

    law = CacheMissLaw(lambda n: n, Memory())
    law._fit(sizes, 1e-4 + np.maximum(1e-6 * sizes, 0.5 * 4e-9 * sizes**2))
    c0, k, s, r, u = law.coef_
    assert r == pytest.approx(0.5, rel=1e-3) and k == pytest.approx(1e-6, rel=1e-3)
    assert c0 == pytest.approx(1e-4, rel=1e-2) and s == 1.0 and u == 1.0


class _Scattered:
    """A cache-miss law's memory whose scattered loads the shared cache serves cost ``price`` n^2 from size ``start``
    on (streamed memory 1e-12 n beside)."""

    def __init__(self, price, start):
        self.price, self.start = price, start

    def __call__(self, n):
        return 1e-12 * n

    def scattered_s(self, n, capacity=None):
        return self.price * n**2 if n >= self.start else 0.0


def test_scattered_loads_the_shared_cache_serves_add_to_the_work():
    """The scattered loads' time is added to the work at the target, like the page walks, not a bound beside it;
    at the small sizes it is taken out of the times before the work is fitted."""
    from gpuprofiler.models.fractal.laws import CacheMissLaw

    sizes = np.array([100.0, 200.0, 400.0, 800.0])
    law = CacheMissLaw(lambda n: n**2, _Scattered(2e-10, 400))
    law._fit(sizes, 1e-4 + 1e-9 * sizes**2 + np.where(sizes >= 400, 2e-10 * sizes**2, 0.0))
    assert law.coef_[1] == pytest.approx(1e-9, rel=1e-6)
    value, _, details = law._predict(4000)
    assert value == pytest.approx(1e-4 + 1.2e-9 * 4000**2, rel=1e-6)
    assert details["scattered_served_s"] == pytest.approx(3.2e-3, rel=1e-12) and details["page_walks_s"] == 0.0
    assert details["bound"] == "work and scattered loads the shared cache serves"


def test_scattered_loads_a_kernel_hides_behind_its_work_get_their_scale_fitted():
    """Scattered loads that cost a fifth of the profile's price at the small sizes where they are a material part of
    the time: their scale u is fitted to 0.2 with the work's k and the fixed time, and the target pays that share;
    where they are never more than FITS of a small size's time, the profile's price stands (u = 1)."""
    from gpuprofiler.models.fractal.laws import FITS, CacheMissLaw

    sizes = np.array([100.0, 200.0, 300.0, 400.0, 600.0, 800.0])
    law = CacheMissLaw(lambda n: n**2, _Scattered(5e-9, 300))
    law._fit(sizes, 1e-4 + 1e-9 * sizes**2 + np.where(sizes >= 300, 0.2 * 5e-9 * sizes**2, 0.0))
    c0, k, s, r, u = law.coef_
    assert u == pytest.approx(0.2, rel=1e-3) and k == pytest.approx(1e-9, rel=1e-3)
    assert c0 == pytest.approx(1e-4, rel=1e-2) and s == 1.0 and r == 1.0
    value, _, details = law._predict(4000)
    assert value == pytest.approx(1e-4 + 2e-9 * 4000**2, rel=1e-3)
    assert details["scattered_scale"] == u and details["scattered_served_s"] == pytest.approx(1.6e-2, rel=1e-3)

    price = 0.5 * FITS * 1e-9  # at most half of FITS of any size's time: not fitted
    law = CacheMissLaw(lambda n: n**2, _Scattered(price, 300))
    law._fit(sizes, 1e-4 + 1e-9 * sizes**2 + np.where(sizes >= 300, 0.2 * price * sizes**2, 0.0))
    assert law.coef_[4] == 1.0


def test_scattered_loads_that_cost_more_than_the_price_keep_it():
    """Scattered loads that cost twice the profile's price (a dependent chain): u stays at 1, the profile's price,
    and the excess goes to the work the law fits."""
    from gpuprofiler.models.fractal.laws import CacheMissLaw

    sizes = np.array([100.0, 200.0, 300.0, 400.0, 600.0, 800.0])
    law = CacheMissLaw(lambda n: n**2, _Scattered(5e-9, 300))
    law._fit(sizes, 1e-4 + 1e-9 * sizes**2 + np.where(sizes >= 300, 2 * 5e-9 * sizes**2, 0.0))
    assert law.coef_[4] == pytest.approx(1.0, abs=1e-9) and law.coef_[1] > 1e-9
