"""TLB misses from page reuse distances, and the page walks both models bound a launch by."""

import copy
import math
from types import SimpleNamespace

import pytest
from conftest import H100_PROFILE, KERNELS, POCL_PROFILE

from gpuprofiler.models.cache.analysis import analyse, tlb_reach
from gpuprofiler.models.costs import tlb_walks
from gpuprofiler.models.fractal.laws import CacheMissLaw
from gpuprofiler.models.fractal.misses import BUDGET, WINDOWS
from gpuprofiler.profile.file import Profile, entry, load_profile
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.spec import load_spec

POCL = load_profile(POCL_PROFILE)
H100 = load_profile(H100_PROFILE)


def with_tlb(profile, knee=4096, miss_s=1.7e-9):
    """The profile with a TLB curve: nothing extra up to ``knee`` pages, ``miss_s`` from twice that on."""
    data = copy.deepcopy(profile.data)
    curve = [{"pages": p, "packed_s": 3e-10, "spread_s": 3e-10 + (miss_s if p >= 2 * knee else 0.0)}
             for p in (64, knee, 2 * knee, 4 * knee)]
    data["tlb"] = {"reach_pages": entry(1.41 * knee, "pages", "test"), "miss_s": entry(miss_s, "s", "test"),
                   "curve": curve}
    return Profile(data, profile.path)


def test_a_column_walk_over_more_pages_than_the_tlb_holds_pays_the_curve_at_its_page_distance():
    """gesummv at n = 3000 (column-major): each work-item walks a column of A and one of B, 6000 pages a walk, and
    the next work-item walks the same pages: those loads cost the curve at about 6000 pages (between a knee at 4096
    and the full cost at 8192: log2(6000 / 4096) of it); with the knee at 16384 pages, next to nothing."""
    spec = load_spec(KERNELS / "gesummv.toml")
    small = analyse(spec.instantiate(3000), with_tlb(POCL, 4096), budget=BUDGET, count=WINDOWS)
    big = analyse(spec.instantiate(3000), with_tlb(POCL, 16384), budget=BUDGET, count=WINDOWS)
    column_share = 2 / 3  # A and B per step, x[j] contiguous
    expected = column_share * math.log2(6000 / 4096) * 1.7e-9
    assert small.tlb_s_per_access == pytest.approx(expected, rel=0.15)
    assert small.tlb_miss_ratio == pytest.approx(column_share, abs=0.05)  # past a reach of 1.41 x 4096 pages
    assert big.tlb_s_per_access < 0.05 * expected


def test_a_stream_pays_a_walk_once_a_page_on_each_core():
    """A page holds 1024 floats, four work-groups of 256 dealt round-robin to the two cores: each core's TLB takes
    every page once, a walk per 512 of its accesses."""
    spec = load_spec(KERNELS / "vadd.toml")
    a = analyse(spec.instantiate(1 << 22), with_tlb(POCL), budget=BUDGET, count=WINDOWS)
    assert a.order.units == 2 and a.tlb_s_per_access == pytest.approx(2 / 1024 * 1.7e-9, rel=0.1)


def test_no_tlb_figures_no_tlb_analysis():
    spec = load_spec(KERNELS / "vadd.toml")
    broken = with_tlb(POCL)
    broken.data["tlb"]["miss_s"] = {"value": None, "unit": "s", "interval": None, "method": "test", "status": "failed",
                                    "reason": "a time per access at or below zero"}
    assert view(broken).tlb_curve == [] and view(with_tlb(POCL)).tlb_curve  # a failed curve is never used
    assert tlb_reach(POCL) is None and tlb_reach(with_tlb(H100)) is None  # a GPU's TLB is not modelled
    a = analyse(spec.instantiate(1 << 20), POCL, budget=BUDGET, count=WINDOWS)
    assert a.tlb_pages is None and a.tlb_misses == 0.0 and a.tlb_s_per_access == 0.0


def test_page_walks_are_accesses_times_the_cost_per_access_over_the_cores():
    p = with_tlb(POCL)
    cores = 2.0
    assert p.data["device"]["compute_units"] == cores
    walked = SimpleNamespace(accesses=1e7, tlb_s_per_access=2e-9, tlb_miss_ratio=0.9, tlb_pages=4096)
    seconds, source = tlb_walks(p, walked)
    assert seconds == pytest.approx(1e7 * 2e-9 / cores, rel=1e-12) and "page walks" in source
    assert tlb_walks(p, SimpleNamespace(accesses=1e7, tlb_s_per_access=0.0, tlb_miss_ratio=0.0, tlb_pages=4096))[0] == 0
    assert tlb_walks(with_tlb(H100), walked)[0] == 0.0


class _Memory:
    """A cache-miss cost with few misses and page walks that outgrow the work: P(n) = 2e-6 * max(n - 500, 0)."""

    def __call__(self, n):
        return 1e-9 * n

    def stall_s(self, n):
        return 0.0

    def tlb_s(self, n):
        return 2e-6 * max(n - 500.0, 0.0)


def test_the_cache_miss_law_adds_the_page_walks_to_the_work():
    """Work-bound small sizes (T = 1e-6 n), then walks priced at the target: k W + P (the walks lengthen loads that
    hit the caches), memory still a bound of its own."""
    sizes = [50, 60, 70, 80, 90, 100]
    law = CacheMissLaw(lambda n: float(n), _Memory()).fit(sizes, [[1e-6 * n] * 5 for n in sizes])
    assert law.predict_value(150) == pytest.approx(1.5e-4, rel=1e-6)  # work 1.5e-4, no walks
    assert law.predict_value(900) == pytest.approx(9e-4 + 8e-4, rel=1e-6)
    assert law.predict_value(5000) == pytest.approx(5e-3 + 9e-3, rel=1e-6)
    assert law._predict(5000)[2]["bound"] == "work and page walks"
    assert law._predict(150)[2]["bound"] == "work"

