"""The work law follows the kernel's roofline cost, is the chosen law where it exists, never has a negative fixed
time, and its interval scales with the times; sizes respect a spec's size_multiple."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import H100_PROFILE, POCL_PROFILE, toy_matmul
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.models.costs import level_bandwidths
from gpuprofiler.models.fractal.extrapolate import SumOfLaws, extrapolate
from gpuprofiler.models.fractal.laws import WorkLaw, choose, rival_bounds
from gpuprofiler.models.fractal.regimes import (
    aligned_like,
    alignment_step,
    hardware_sizes,
    recommended_small,
    roofline,
    run_cost,
    work_function,
)
from gpuprofiler.profile.file import Profile, entry, load_profile
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.spec import load_spec
from gpuprofiler.workloads.sweep import Sweep

POCL = load_profile(POCL_PROFILE)

SIZES = np.array([100, 126, 159, 200, 252, 317, 400, 504], float)

def spec(tmp_path, extra=""):
    return toy_matmul(tmp_path, extra)


def profile(fma=True):
    data = {"bandwidth": {"read_Bps": entry(40e9, "B/s", "test")},
            "launch": {"event_s": entry(1e-6, "s", "test")}}
    if fma:
        data["instructions"] = {"float_fma": {"throughput_ops_per_s": entry(10e9, "op/s", "test")}}
    return Profile(data)


def test_a_compute_bound_kernel_is_extrapolated_by_its_flops_not_its_bytes(tmp_path):
    mm = spec(tmp_path)
    w = work_function(mm, profile(), 256)
    assert w(512) == pytest.approx(max(8 * 512**2 / 40e9, 2 * 512**3 / 20e9))
    assert w(1024) / w(512) == pytest.approx(8.0)  # n^3: the flops term
    # no FMA rate in the profile: the declared count that grows faster, the flops
    w = work_function(mm, profile(fma=False), 256)
    assert w(1024) / w(512) == pytest.approx(8.0)
    cost = roofline(mm, profile())
    assert cost(512, 1e8) == pytest.approx(8 * 512**2 / 1e8)  # a slow enough memory makes it memory-bound
    assert cost(512, 40e9) == pytest.approx(2 * 512**3 / 20e9)
    assert roofline(mm, profile(fma=False)) is None


def test_the_work_law_is_chosen_and_laws_that_bend_to_the_points_stay_rivals():
    work = lambda n: float(n) ** 3  # noqa: E731
    t = 1e-9 * SIZES**3
    t[-1] *= 1.25  # the largest small size is slow (a cache conflict at that size)
    samples = [[v] for v in t]
    model, scores = choose(SIZES, samples, work=work)
    assert model.name == "work"
    assert min(scores.values()) < scores["work"]  # a free law fits that point better ...
    assert model.rivals_  # ... and is reported as a rival, not chosen
    lo, hi = rival_bounds(model, 4096)
    assert lo <= model.predict_value(4096) <= hi and hi / lo > 1.1
    model, _ = choose(SIZES, samples)  # without a work law the leave-one-out choice decides
    assert model.name != "work"


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-12, 1e-6), st.floats(-0.9, 0.9))
def test_the_work_law_never_has_a_negative_fixed_time(k, bend):
    # times that grow faster than the work would give a negative intercept; the law goes through zero instead
    t = k * SIZES * (SIZES / SIZES[0]) ** (0.3 * bend)
    law = WorkLaw(lambda n: float(n)).fit(SIZES, [[v] for v in t])
    assert law.coef_[0] >= 0 and law.coef_[1] > 0
    assert all(law.predict_value(s) > 0 for s in (1.0, SIZES[0], 8 * SIZES[-1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.05, 20.0), min_size=4, max_size=8), st.floats(1e-12, 1e-6))
def test_times_that_fall_as_the_work_grows_keep_the_law_in_proportion(scatter, k):
    # noisy times over close sizes can fall as the work grows (a leave-one-out fold of three points, say): the law
    # goes through zero, in proportion to the work, and is not dropped for a law fitted to the noise
    sizes = SIZES[:len(scatter)]
    t = k * sizes * np.array(scatter)
    law = WorkLaw(lambda n: float(n)).fit(sizes, [[v] for v in t])
    assert law.coef_[1] > 0 and law.coef_[0] >= 0
    if np.polyfit(sizes, t, 1)[0] <= 0:
        assert law.coef_[0] == 0 and law.coef_[1] == pytest.approx(np.sum(sizes * t) / np.sum(sizes**2))


def test_a_copy_whose_times_dip_keeps_its_counted_work_law():
    # jacobi's host copy in a run on the Zen 3 VM (p10 of each size, bytes copied = 8 per cell): the largest size's
    # dip made a fold's slope negative, the work law was scored infinite and a power law took the phase to 41 s at
    # 2^28 cells (measured 5.1 s); in proportion to its bytes the law predicts about 1 s
    cells = np.array([18490000, 22553001, 27510025, 33547264], float)
    t = [[0.0164], [0.1236], [0.1457], [0.0910]]
    model, scores = choose(cells, t, work=lambda n: 8.0 * n)
    assert math.isfinite(scores["work"]) and model.name == "work"
    assert 0.5 < model.predict_value(2**28) < 2.0


def test_the_work_law_interval_is_relative_to_the_time():
    rng = np.random.default_rng(3)
    t = 2e-9 * SIZES * (1 + 0.1 * rng.standard_normal(len(SIZES)))  # each size off by ~10% (its own luck)
    law = WorkLaw(lambda n: float(n)).fit(SIZES, [[v] for v in t])
    near, far = law.predict(SIZES[-1]), law.predict(64 * SIZES[-1])
    # 64x further out the interval is at least as wide relative to the prediction: the scatter scales with time
    assert far.high / far.low >= near.high / near.low > 1.2
    assert far.low <= 2e-9 * 64 * SIZES[-1] <= far.high


def test_minor_phases_are_fitted_one_by_one_with_their_counted_work():
    sizes = [int(s) for s in SIZES * 1000]
    major = [np.array([1e-9 * n] * 3) for n in sizes]
    copy = [np.array([5e-11 * n * (3.0 if n == sizes[-1] else 1.0)] * 3) for n in sizes]  # a jump at the last
    other = [np.array([1e-11 * n] * 3) for n in sizes]
    phases = {"k": major, "memcpy": copy, "other": other}
    totals = [sum(p[i] for p in phases.values()) for i in range(len(sizes))]
    sw = Sweep("app", "app", sizes, phases, totals, work={"k": list(map(float, sizes)),
                                                           "memcpy": [4.0 * n for n in sizes],
                                                           "other": [2.0 * n for n in sizes]})
    ex = extrapolate(sw, coverage=0.7)
    assert ex.phases == ["k"] and isinstance(ex.rest_fit, SumOfLaws)
    assert {m.name for m in ex.rest_fit.parts.values()} == {"work"}
    target = 8 * sizes[-1]
    rest = ex.rest_fit.predict(target)
    assert rest.seconds == pytest.approx(sum(m.predict_value(target) for m in ex.rest_fit.parts.values()))
    assert rest.low <= rest.seconds <= rest.high
    # a straight work law for the copy, bent only as far as its last point pulls it: not a power law through it
    assert ex.rest_fit.parts["memcpy"].predict_value(target) < 3.0 * 5e-11 * target * 1.5


def test_size_multiple_is_checked_and_the_recommended_sizes_respect_it(tmp_path):
    with pytest.raises(UserError, match="size_multiple"):
        spec(tmp_path, 'size_multiple = 16\nsmall = [100, 128]')
    mm = spec(tmp_path, 'size_multiple = 16\nsmall = [96, 128]\ntarget = [1024]')
    with pytest.raises(UserError, match="not a multiple"):
        mm.instantiate(100)
    cost = run_cost(mm, profile())
    assert cost(100) == cost(96)  # a size it does not take costs what the multiple below does
    sizes, _, how = recommended_small(mm, mm.target, profile())
    assert how == "hardware" and sizes and all(s % 16 == 0 and 0 < s < 1024 for s in sizes)
    assert sizes == sorted(set(sizes))
    raw, _ = hardware_sizes(1024, None, profile(), cost=cost)
    assert len(raw) == 8  # eight sizes by default


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 100_000), min_size=1, max_size=12), st.integers(2, 200_000),
       st.sampled_from([2, 8, 16, 32, 48]))
def test_aligned_sizes_share_the_targets_residue_where_the_move_is_small(sizes, target, step):
    sizes = sorted(set(s for s in sizes if s < target)) or [1]
    if sizes[0] >= target:
        return
    out = aligned_like(sizes, target, step)
    assert out == sorted(set(out)) and all(0 < v < target for v in out) and min(out) >= min(sizes)
    for v in out:  # each output is an input moved at most an eighth onto the target's residue, or an input kept
        assert any(abs(v - s) * 8 <= s and v % step == target % step for s in sizes) or v in sizes


def test_sizes_are_laid_out_like_the_target(tmp_path):
    """A line holds 16 float32 on a CPU (64 B) and 8 in a GPU's 32 B sector; the chosen sizes keep n mod 16 of the
    target (gesummv's n = 3000: 8 more than a multiple of 16) and a spec's size_multiple."""
    mm = spec(tmp_path, 'target = [3000]')
    assert alignment_step(mm, POCL) == 16 and alignment_step(mm, load_profile(H100_PROFILE)) == 8
    assert alignment_step(mm, None) == 1
    tiled = spec(tmp_path, 'size_multiple = 32\nsmall = [96, 128]\ntarget = [1024]')
    assert alignment_step(tiled, POCL) == 32
    prof = Profile({**profile().data, "device": {"compute_units": 2, "type": "CPU"}})
    sizes, _, _ = recommended_small(mm, mm.target, prof)
    assert len(sizes) >= 6 and all(s % 16 == 8 for s in sizes if s >= 128)


def test_without_a_profile_the_spec_sizes_are_recommended(tmp_path):
    mm = spec(tmp_path, 'small = [96, 128]\ntarget = [1024]')
    assert recommended_small(mm, mm.target, None) == ([96, 128], [], "spec")


def test_tiny_launches_are_never_recommended_when_the_target_is_long(tmp_path):
    mm = spec(tmp_path, 'target = [2048]')
    prof = profile()
    sizes, _, _ = recommended_small(mm, mm.target, prof)
    cost = run_cost(mm, prof)
    assert cost(2048) > 50e-6 and all(cost(s) >= 50e-6 for s in sizes)
    assert math.isclose(cost(max(sizes)), cost(2048) / 8, rel_tol=0.05)


def test_the_cache_miss_law_is_the_work_law_until_memory_takes_longer():
    from gpuprofiler.models.fractal.laws import CacheMissLaw

    work = lambda n: 1e-9 * float(n)  # noqa: E731
    memory = lambda n: 0.5e-9 * float(n) if n < 4000 else 8e-9 * float(n)  # noqa: E731  misses jump past 4000
    t = [2e-5 + 3 * work(n) for n in SIZES]  # the small sizes: 3 x the work, memory well below
    law = CacheMissLaw(work, memory).fit(SIZES, [[v] for v in t])
    assert law.coef_[1] == pytest.approx(3.0, rel=1e-3) and law.coef_[0] == pytest.approx(2e-5, rel=1e-2)
    assert law.predict_value(800) == pytest.approx(2e-5 + 3 * work(800), rel=1e-3)
    target = law.predict(8000)
    assert target.seconds == pytest.approx(2e-5 + memory(8000), rel=1e-3) and target.details["bound"] == "memory"
    assert target.low < target.seconds < target.high


def test_the_cache_miss_law_is_chosen_within_the_margin_and_warns_what_the_crossing_costs(tmp_path):
    from gpuprofiler.models.fractal.misses import regime_costs

    work = lambda n: float(n) ** 3  # noqa: E731
    memory = lambda n: 0.0 if n < 1000 else 5e-9 * float(n) ** 3  # noqa: E731
    samples = [[1e-9 * work(n)] for n in SIZES]
    model, scores = choose(SIZES, samples, work=work, misses=memory)
    assert model.name == "cache-miss" and scores["cache-miss"] == pytest.approx(scores["work"], abs=1e-9)
    assert {r.name for r in model.rivals_} >= {"work"}
    assert model.predict_value(2000) == pytest.approx(5e-9 * 2000**3, rel=1e-6)  # memory-bound at the target

    class Level:
        def __init__(self, name, ratio, shared, stores=0.0, misses=0.0):
            self.name, self.miss_ratio, self.by_array = name, ratio, {"B": 0.9, "A": 0.1}
            self.shared, self.store_remisses, self.misses, self.write_share = shared, stores, misses, 0.0

    class Analysis:
        order = SimpleNamespace(line_bytes=64)

        def __init__(self, ratio, stores, loads):
            self.levels = [Level("L1", ratio, False, stores, loads), Level("L2", ratio / 2, True)]

    class Cost:
        profile = POCL

        def __init__(self, stores=0.0, loads=0.0):
            self.stores, self.loads = stores, loads

        def analysis(self, n):
            big = n >= 1000
            return Analysis(0.02 if not big else 0.5, self.stores if big else 0.0, self.loads if big else 0.0)

    private, last = regime_costs(Cost(), [100, 200], 2000, 1.4)
    assert "L1 miss ratio 0.02 at the small sizes -> 0.50 at the target (B): not priced" in private
    assert "L2 miss ratio 0.01 at the small sizes -> 0.25 at the target (B): +1.4 s over the work law" in last
    assert regime_costs(Cost(), [100, 200], 500, 0.0) == []
    # stores re-missing L1 wait for L2, one core's after another: 1e6 x the L2 latency / 2 cores
    l2 = view(POCL).caches[1].latency_s
    private, _ = regime_costs(Cost(1e6), [100, 200], 2000, 1.4)
    assert f"(B): {1e6 * l2 / 2 * 1e3:+.3g} ms of stores waiting for the next level" in private
    # loads missing L1 that the L2 serves where the profile measured the L2's bandwidth: a bound of their own
    assert level_bandwidths(POCL)[0] is None  # the curve starts past the mean of its L1 and L2 sizes
    bw = 59e9
    cost = Cost(loads=1e6)
    cost.bandwidths = [bw, None]
    private, _ = regime_costs(cost, [100, 200], 2000, 1.4)
    assert f"(B): {1e6 * 64 / bw * 1e3:.3g} ms for the next level to serve its loads, +1.4 s over the work law" \
        in private


def test_scattered_misses_cost_a_scattered_read_each_and_streamed_ones_a_line_at_the_bandwidth():
    """The cache-miss law's memory time on the H100 profile: spmv's last-level misses split by where their lines
    lie, x's (gathered: a new page per line) at the profile's scattered read, the matrix's at 32 bytes over the
    read bandwidth; a profile that measured a gathered read (``bandwidth.gather_s``) prices them with it."""
    import copy

    from conftest import H100_PROFILE, KERNELS

    from gpuprofiler.models.costs import scattered
    from gpuprofiler.models.fractal.misses import miss_cost
    from gpuprofiler.profile.file import load_profile
    from gpuprofiler.profile.hardware import view

    prof = load_profile(H100_PROFILE)
    spec = load_spec(KERNELS / "spmv_csr.toml")
    cost = miss_cost(spec, prof)
    bw = view(prof).figure("bandwidth.read_Bps").value
    assert cost.gather_s == scattered(prof, bw).value == prof.get("memory.read_step_s")
    n = 1 << 21
    a = cost.analysis(n)
    last = a.levels[-1]
    share = a.scattered_share(last)
    assert 0 < share < 1 and share == pytest.approx(last.by_array["x"] * a.scattered["x"], rel=0.1)
    expected = last.misses * ((1 - share) * 32 / bw + share * cost.gather_s)
    assert cost.memory_s(n) == pytest.approx(expected, rel=1e-12)
    data = copy.deepcopy(prof.data)
    data["bandwidth"]["gather_s"] = {"value": 5e-11, "unit": "s", "interval": [4e-11, 6e-11], "status": "ok",
                                     "method": "a test's figure"}
    measured = miss_cost(spec, Profile(data))
    assert measured.gather_s == 5e-11 and scattered(Profile(data), bw).value == 5e-11
    measured.analyses[n] = a
    assert measured.memory_s(n) == pytest.approx(last.misses * ((1 - share) * 32 / bw + share * 5e-11), rel=1e-12)
