"""Scaling laws and the fractal extrapolator on synthetic data: exact answers where they are known."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gpuprofiler.models.fractal.extrap import evaluate_model, text_format
from gpuprofiler.models.fractal.extrapolate import extrapolate, major_phases, stable_from
from gpuprofiler.models.fractal.laws import Fractal, Overhead, Polynomial, TwoTerm, choose
from gpuprofiler.models.fractal.regimes import hardware_sizes, regime_warnings
from gpuprofiler.profile.file import Profile, entry
from gpuprofiler.workloads.sweep import Sweep

SIZES = np.array([1, 2, 4, 8, 16, 32]) * 1024.0


@settings(max_examples=50)
@given(st.floats(0.3, 3.0), st.floats(-25, -5))
def test_fractal_recovers_a_power_law_exactly(m, ln_a):
    t = np.exp(ln_a) * SIZES**m
    fit = Fractal().fit(SIZES, [[v] for v in t])
    target = 8 * SIZES[-1]
    p = fit.predict(target)
    assert p.details["m"] == pytest.approx(m, rel=1e-9)
    assert p.seconds == pytest.approx(math.exp(ln_a) * target**m, rel=1e-9)
    # the paper's form: x = ln(n / n_L), so d = ln T(n_L)
    assert p.details["d"] == pytest.approx(math.log(p.seconds), rel=1e-12)


def test_overhead_and_two_term_recover_constant_plus_power():
    t = 5e-6 + 2e-9 * SIZES
    target = 8 * SIZES[-1]
    truth = 5e-6 + 2e-9 * target
    assert Overhead().fit(SIZES, [[v] for v in t]).predict_value(target) == pytest.approx(truth, rel=1e-3)
    assert Overhead(5e-6).fit(SIZES, [[v] for v in t]).predict_value(target) == pytest.approx(truth, rel=1e-6)
    tt = TwoTerm().fit(SIZES, [[v] for v in t])
    assert (tt.p_, tt.q_) == (1.0, 0) and tt.predict_value(target) == pytest.approx(truth, rel=1e-9)
    # the pure power law misses the constant and overestimates the exponent's effect
    assert abs(Fractal().fit(SIZES, [[v] for v in t]).predict_value(target) - truth) / truth > 0.05


def test_polynomial_baseline_is_exact_on_polynomials():
    t = 1e-6 + 3e-9 * SIZES + 1e-13 * SIZES**2
    for deg in (2, 3):
        v = Polynomial(deg).fit(SIZES, [[x] for x in t]).predict_value(8 * SIZES[-1])
        assert v == pytest.approx(1e-6 + 3e-9 * 8 * SIZES[-1] + 1e-13 * (8 * SIZES[-1]) ** 2, rel=1e-6)


def test_interval_covers_and_widens_with_repeat_spread():
    rng = np.random.default_rng(0)
    t = 1e-9 * SIZES
    tight = [v * (1 + 0.001 * rng.standard_normal(9)) for v in t]
    loose = [v * (1 + 0.05 * rng.standard_normal(9)) for v in t]
    a = Fractal().fit(SIZES, tight).predict(8 * SIZES[-1])
    b = Fractal().fit(SIZES, loose).predict(8 * SIZES[-1])
    assert a.low <= a.seconds <= a.high and b.low <= b.seconds <= b.high
    assert (b.high - b.low) > (a.high - a.low)


@pytest.mark.parametrize("scatter,repeat", [(0.0, 0.05), (0.05, 0.0), (0.05, 0.01), (0.01, 0.05)])
def test_the_figures_noise_counts_once_in_the_interval(scatter, repeat):
    """The residuals already hold the small sizes' measurement noise: the repeats' variance widens the interval
    only by what it exceeds them (the target's own noise), never on top of them."""
    rng = np.random.default_rng(3)
    t = 1e-9 * SIZES * np.exp(scatter * rng.standard_normal(len(SIZES)))
    samples = [v * np.exp(repeat * rng.standard_normal(12)) for v in t]
    model = Fractal().fit(SIZES, samples)
    target = 8 * SIZES[-1]
    p = model.predict(target)
    value, log_sd, _ = model._predict(float(target))
    tq = stats.t.ppf(0.975, len(SIZES) - 2)
    want = tq * math.sqrt(log_sd**2 + max(model.rep_var_ - model.s2_, 0.0))
    assert math.log(p.high / p.seconds) == pytest.approx(want, rel=1e-9)
    assert math.log(p.high / p.seconds) >= tq * log_sd * (1 - 1e-12)


def test_choose_prefers_the_law_that_fits():
    t = 20e-6 + 1e-9 * SIZES**1.0
    model, scores = choose(SIZES, [[v] for v in t])
    assert model.name in ("overhead", "two-term") and scores[model.name] < scores["fractal"]
    pure = 1e-9 * SIZES**1.5
    model, scores = choose(SIZES, [[v] for v in pure])
    assert scores[model.name] < 1e-6


def _sweep(phases, sizes=SIZES):
    per = {p: [np.array([f(n)] * 3) for n in sizes] for p, f in phases.items()}
    totals = [sum(per[p][i] for p in per) for i in range(len(sizes))]
    return Sweep("app", "app", [int(s) for s in sizes], per, totals)


def test_whole_run_from_phase_shares_is_exact_on_power_laws():
    sw = _sweep({"a": lambda n: 1e-9 * n, "b": lambda n: 1e-12 * n**2, "c": lambda n: 1e-8 * n**0.5,
                 "tiny": lambda n: 1e-11 * n})
    ex = extrapolate(sw, coverage=0.7)
    target = 8 * SIZES[-1]
    truth = 1e-9 * target + 1e-12 * target**2 + 1e-8 * target**0.5 + 1e-11 * target
    frac = ex.predict(int(target), which="fractal")
    assert set(ex.phases) <= {"a", "b", "c", "tiny"} and "tiny" not in ex.phases
    assert sum(ph["predicted_s"] for ph in frac.details["phases"]) <= truth
    assert frac.seconds == pytest.approx(truth, rel=0.05)


def test_major_phases_and_stability():
    sw = _sweep({"big": lambda n: 1e-9 * n, "small": lambda n: 1e-10 * n})
    assert major_phases(sw, 0.7) == ["big"]
    # shares move early, then settle: the settled sizes are kept
    sizes = np.array([1, 2, 4, 8, 16, 32, 64]) * 1024.0
    sw = _sweep({"a": lambda n: 1e-9 * n, "b": lambda n: 1e-3 * (n < 3000) + 1e-10 * n}, sizes)
    assert stable_from(sw, ["a", "b"]) == 2


def test_regime_warning_names_the_boundary():
    prof = Profile({"caches": [{"level": 2, "size_bytes": 2 << 20, "latency_s": 4e-9}],
                    "concurrency": {"work_items": entry(1000.0, "work-items", "m")}})
    ws = lambda n: 12.0 * n  # noqa: E731
    out = regime_warnings([100, 200, 400], [400000], ws, lambda n: n, prof)
    assert any("L2 cache (2.0 MiB" in w for w in out)
    assert any("concurrency (1000 work-items" in w for w in out)
    assert regime_warnings([1000], [2000], ws, None, prof) == []
    straddle = regime_warnings([100000, 200000], [1600000], ws, None, prof)
    assert len(straddle) == 1 and "(1.1 MiB .. 2.3 MiB) straddles L2 cache (2.0 MiB" in straddle[0]


def test_hardware_sizes_stay_past_the_cache():
    prof = Profile({"caches": [{"level": 3, "size_bytes": 32 << 20, "latency_s": 2e-8}]})
    ws = lambda n: 12.0 * n  # noqa: E731
    sizes, notes = hardware_sizes(2**27, ws, prof)
    assert all(ws(s) > 32 << 20 for s in sizes) and max(sizes) <= 2**27 // 8 and len(sizes) >= 4


def test_extrap_text_format_and_model_evaluation():
    sw = _sweep({"k": lambda n: 1e-9 * n}, SIZES[:3])
    text = text_format([sw])
    assert text.startswith("PARAMETER n\nPOINTS ( 1024 ) ( 2048 ) ( 4096 )\n")
    assert text.count("DATA ") == 6 and "REGION total" in text and "REGION k" in text
    assert evaluate_model("0.05 + 0.001 * n^(1) * log2(n)^(1)", "n", 1024) == pytest.approx(0.05 + 0.001 * 1024 * 10)


def test_cache_aware_law_carries_the_fit_across_a_cache_boundary():
    from gpuprofiler.models.fractal.laws import CacheAware

    mib = 2.0**20
    curve = [(b, 60e9 if b <= 100 * mib else 30e9) for b in 2.0 ** np.arange(20, 31)]
    ws = lambda n: 12.0 * n  # noqa: E731
    model = CacheAware(ws, curve)
    sizes = np.array([1, 1.5, 2, 3, 4, 6]) * 2**20  # 12..72 MiB: all inside the cache
    t = [[2e-6 + 1.1 * model.seconds_per_pass(s)] for s in sizes]
    target = 2**27  # 1.5 GiB: far past it
    truth = 2e-6 + 1.1 * 12.0 * target / 30e9
    assert model.fit(sizes, t).predict_value(target) == pytest.approx(truth, rel=1e-6)
    # the power law, blind to the boundary, predicts the cache's speed
    assert Fractal().fit(sizes, t).predict_value(target) < 0.75 * truth
    chosen, scores = choose(sizes, t, None, ws, curve)
    assert chosen.name == "cache-aware"


def test_work_law_uses_the_declared_work():
    from gpuprofiler.models.fractal.laws import WorkLaw

    work = lambda n: 8.0 * n  # noqa: E731
    t = [3e-11 * work(n) for n in SIZES]
    t[3] *= 1.05  # one size a little slow
    model = WorkLaw(work).fit(SIZES, [[v] for v in t])
    assert model.predict_value(8 * SIZES[-1]) == pytest.approx(3e-11 * work(8 * SIZES[-1]), rel=0.05)


def test_chosen_whole_run_models_the_minor_phases_as_one_series():
    sw = _sweep({"a": lambda n: 1e-9 * n, "b": lambda n: 2e-12 * n**2, "c": lambda n: 1e-8 * n**0.5,
                 "d": lambda n: 2e-11 * n})
    ex = extrapolate(sw, coverage=0.7)
    target = 8 * SIZES[-1]
    truth = 1e-9 * target + 2e-12 * target**2 + 1e-8 * target**0.5 + 2e-11 * target
    rec = ex.predict(int(target))
    assert ex.rest and "rest_s" in rec.details
    assert rec.seconds == pytest.approx(truth, rel=0.02)
    assert rec.low <= rec.seconds <= rec.high


def test_model_differences_within_the_repeat_spread_go_to_the_simplest_law():
    """Laws whose leave-one-out scores differ by less than the repeats' own spread cannot be told apart: the
    simplest (the declared work law) is kept. Without that margin, state noise (each size's repeats share one
    offset, as on a shared machine) hands several of these sweeps to a fractal or overhead law."""
    sizes = np.array([1e6, 1.4e6, 2e6, 2.8e6, 4e6, 5.6e6])
    truth = 1e-4 + 2e-9 * sizes
    for seed in range(20):
        rng = np.random.default_rng(seed)
        samples = [t * (1 + rng.normal(0, 0.08)) * (1 + rng.normal(0, 0.15, 40)) for t in truth]
        model, _ = choose(sizes, samples, work=lambda n: n)
        assert model.name == "work", seed


@given(st.floats(0.0, 0.5), st.integers(4, 50))
@settings(max_examples=40, deadline=None)
def test_repeat_spread_is_the_figures_relative_half_interval(rel, k):
    from gpuprofiler.measure.stats import model_value, quantile_interval
    from gpuprofiler.models.fractal.laws import repeat_spread

    base = np.linspace(1 - rel, 1 + rel, k)
    lo, hi, _ = quantile_interval(base, 0.1)
    spread = (hi - lo) / 2 / model_value(base)
    # scale-free, and a size with under 4 repeats says nothing about it
    assert repeat_spread([base * 3.0, base * 5.0, [1.0, 2.0]]) == pytest.approx(spread, rel=1e-9, abs=1e-12)


@given(st.floats(0.5, 3.0), st.floats(-3.0, 3.0), st.lists(st.integers(10, 10**7), min_size=3, max_size=7, unique=True))
@settings(max_examples=60, deadline=None)
def test_counted_work_law_is_recovered_and_extrapolated(p, ln_a, sizes):
    from gpuprofiler.models.fractal.extrapolate import counted_work_law

    sizes = sorted(sizes)
    counts = [math.exp(ln_a) * n**p for n in sizes]
    law = counted_work_law(sizes, counts)
    assert law is not None
    assert law(8 * sizes[-1]) == pytest.approx(math.exp(ln_a) * (8 * sizes[-1]) ** p, rel=1e-6)


def test_counted_work_law_refuses_what_is_no_law():
    from gpuprofiler.models.fractal.extrapolate import counted_work_law

    sizes = [1000, 2000, 4000, 8000]
    assert counted_work_law(sizes, [4 * n for n in sizes[:3]] + [None]) is None  # a size without a count
    assert counted_work_law(sizes[:2], [4000, 8000]) is None  # too few sizes
    assert counted_work_law(sizes, [4 * n + (n == 4000) * 900 for n in sizes]) is None  # data-dependent
    assert counted_work_law(sizes, [10, 10, 10, 10]) is None  # constant work: no law of the size


def test_rival_laws_are_reported_beside_the_interval_not_inside_it():
    """Laws inside the choice margin are kept as rivals; their spread is reported (``rivals_s``) and the
    interval stays the chosen law's own."""
    from gpuprofiler.models.fractal.laws import rival_bounds

    rng = np.random.default_rng(0)
    sizes = np.array([1e6, 1.4e6, 2e6, 2.8e6, 4e6, 5.6e6])
    samples = [(1e-4 + 2e-9 * n) * (1 + rng.normal(0, 0.15, 40)) for n in sizes]
    model, scores = choose(sizes, samples, work=lambda n: n)
    assert model.rivals_, "noisy points leave rivals"
    lo, hi = rival_bounds(model, 8 * sizes[-1])
    values = [r.predict_value(8 * sizes[-1]) for r in model.rivals_] + [model.predict_value(8 * sizes[-1])]
    assert lo == pytest.approx(min(values)) and hi == pytest.approx(max(values)) and lo < hi
    per = {"k": [np.asarray(x) for x in samples]}
    ex = extrapolate(Sweep("k", "kernel", [int(n) for n in sizes], per, per["k"]), coverage=0.7,
                     work=lambda n: n)
    target = int(8 * sizes[-1])
    pred = ex.predict(target)
    own = ex.fits["k"].model.predict(target)
    assert (pred.low, pred.high) == pytest.approx((own.low, own.high))
    rlo, rhi = pred.details["rivals_s"]
    assert rlo <= pred.seconds <= rhi and rlo < rhi


def test_fits_forced_through_the_origin_keep_the_scale_of_the_times():
    """When the free constant comes out negative, the two-term and cache-aware laws refit through the origin
    in relative error: k = sum(x/t) / sum(x^2/t^2). The prediction must stay on the points' scale (a slip in
    that formula once put it off by a factor 1/t, some hundreds at millisecond times)."""
    from gpuprofiler.models.fractal.laws import CacheAware

    sizes = np.array([1e6, 1.4e6, 2e6, 2.8e6, 4e6, 5.6e6])
    t = 1e-9 * sizes - 2e-5  # a negative intercept: the through-origin branch
    target = 8 * sizes[-1]
    two = TwoTerm().fit(sizes, [[v] for v in t])
    assert two.coef_[0] == 0.0 and two.predict_value(target) == pytest.approx(1e-9 * target, rel=0.05)
    curve = [(1.0, 1e10), (1e12, 1e10)]  # flat: seconds per pass = 4n / 1e10
    cache = CacheAware(lambda n: 4.0 * n, curve).fit(sizes, [[v] for v in t])
    assert cache.coef_[0] == 0.0 and cache.predict_value(target) == pytest.approx(1e-9 * target, rel=0.05)
