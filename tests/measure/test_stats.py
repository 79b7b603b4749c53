import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gpuprofiler.measure.engine import sample
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.stats import median_interval, quantile_interval, summarize, tight


@given(st.lists(st.floats(1e-9, 1.0), min_size=1, max_size=300))
def test_interval_holds_the_median(xs):
    lo, hi, cov = median_interval(xs)
    assert lo <= np.median(xs) <= hi
    assert 0 <= cov <= 1  # one sample: a point, coverage 0


def test_interval_coverage_is_exact_binomial():
    for n in (6, 10, 37, 200):
        lo, hi, cov = median_interval(np.arange(n, dtype=float))
        j = int(lo) + 1
        assert cov >= 0.95
        assert cov == pytest.approx(1 - 2 * stats.binom.cdf(j - 1, n, 0.5), abs=1e-12)
        # one order statistic further in would fall below 95%
        assert 1 - 2 * stats.binom.cdf(j, n, 0.5) < 0.95
    assert median_interval([3.0, 1, 2, 5, 4])[2] == 1 - 2 / 32  # n=5: min..max, 93.75%


def test_summary_fields():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.median, s.minimum, s.n) == (3.0, 1.0, 5)
    assert s.iqr == 2.0


def test_engine_stops_on_interval_and_keeps_every_sample():
    values = iter([5.0, 5.0] + [1.0] * 1000)  # two warm-ups, then constant
    timing = sample(lambda: next(values), TimingPolicy(warmup=2, budget_s=10, stop_on="median"))
    assert timing.warmup_s == [5.0, 5.0]
    assert timing.stop_reason == "interval"
    assert len(timing.device_s) == 6 and len(timing.host_s) == 6  # first n whose interval reaches 95%
    values = iter([5.0, 5.0] + [1.0] * 1000)
    timing = sample(lambda: next(values), TimingPolicy(warmup=2, budget_s=10))  # on the modelling figure
    assert timing.stop_reason == "interval" and len(timing.device_s) == 31


def test_engine_stops_on_budget_with_at_least_min_samples():
    rng = np.random.default_rng(0)
    timing = sample(lambda: float(rng.lognormal(0, 1)), TimingPolicy(warmup=0, budget_s=0.0, min_samples=5))
    assert timing.stop_reason == "budget" and len(timing.device_s) == 5


def test_warm_up_lasts_at_least_its_time():
    """Warm-up runs go on until both the count and the time are reached; none of them is a sample."""
    import time

    calls = []

    def once():
        calls.append(time.perf_counter())
        time.sleep(0.005)
        return 1.0

    timing = sample(once, TimingPolicy(warmup=1, warmup_s=0.2, min_samples=5, budget_s=10))
    assert 2 <= len(timing.warmup_s) <= 41  # each run sleeps >= 5 ms
    assert calls[len(timing.warmup_s)] - calls[0] >= 0.2  # the first sample starts after the warm-up time
    assert len(timing.device_s) >= 5


def test_two_separated_clusters_are_two_modes_fastest_first():
    from gpuprofiler.measure.stats import modes, spread

    rng = np.random.default_rng(1)
    x = np.r_[rng.normal(2.0e-3, 4e-5, 40), rng.normal(1.0e-3, 2e-5, 60)]
    found = modes(x)
    assert [round(m["share"], 2) for m in found] == [0.6, 0.4]
    assert found[0]["median_s"] == pytest.approx(1.0e-3, rel=0.02)
    assert found[1]["median_s"] == pytest.approx(2e-3, rel=0.02)
    assert found[0]["high_s"] < found[1]["low_s"]
    assert spread(x) == pytest.approx(np.percentile(x, 90) / np.percentile(x, 10))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=200))
def test_modes_partition_the_samples(xs):
    from gpuprofiler.measure.stats import MIN_MODE_SHARE, modes

    found = modes(xs)
    assert sum(m["share"] for m in found) == pytest.approx(1.0)
    assert all(a["high_s"] <= b["low_s"] for a, b in zip(found, found[1:]))  # ordered and disjoint
    assert all(m["low_s"] <= m["median_s"] <= m["high_s"] for m in found)
    assert min(m["low_s"] for m in found) == min(xs) and max(m["high_s"] for m in found) == max(xs)
    if len(found) > 1:
        assert all(m["share"] >= MIN_MODE_SHARE - 1e-12 for m in found)
    if len(xs) < 10 or len(set(xs)) == 1:
        assert len(found) == 1
    assert np.isfinite([m["median_s"] for m in found]).all()


def test_one_normal_cluster_is_one_mode():
    from gpuprofiler.measure.stats import modes

    x = np.random.default_rng(2).normal(1e-3, 3e-5, 200)
    assert len(modes(x)) == 1 and modes([]) == []


@given(st.integers(1, 400), st.floats(0.01, 0.99), st.floats(0.5, 0.99))
@settings(max_examples=200, deadline=None)
def test_quantile_interval_is_the_binomial_order_statistic_interval(n, q, confidence):
    """Each end is the order statistic with at most (1 - confidence)/2 binomial probability beyond it, pulled in
    no further than that, and the coverage is the exact binomial probability between them."""
    lo, hi, cov = quantile_interval(np.arange(n, dtype=float), q, confidence)
    i, j = int(lo) + 1, int(hi) + 1  # 1-based order statistics
    tail = (1 - confidence) / 2
    cdf = lambda k: stats.binom.cdf(k, n, q)  # noqa: E731
    assert cov == pytest.approx(cdf(j - 1) - cdf(i - 1), abs=1e-12)
    assert i == 1 or cdf(i - 1) <= tail  # at most tail beyond the low end ...
    assert i == n or cdf(i) > tail  # ... and the next one in would leave more
    assert j == n or cdf(j - 1) >= 1 - tail
    assert j == 1 or cdf(j - 2) < 1 - tail
    assert i <= j


@given(st.lists(st.floats(1e-6, 1.0), max_size=300), st.sampled_from(["model", "median"]), st.floats(0.0, 0.5),
       st.sampled_from([0.9, 0.95, 0.99]))
@settings(max_examples=300, deadline=None)
def test_the_timing_loops_check_is_the_summarys(xs, statistic, rel, confidence):
    """The stopping check the timing loop asks each round answers as the whole summary would."""
    assert tight(xs, statistic, rel, confidence) == (len(xs) > 0 and summarize(xs, confidence).tight(statistic, rel,
                                                                                                      confidence))


def test_modelling_figure_is_the_low_quantile_with_its_interval():
    x = np.r_[np.full(40, 1.0), np.full(60, 2.5)]  # 40% fast runs, 60% slowed
    s = summarize(x)
    assert s.model == 1.0 and s.median == 2.5
    assert s.model_ci_low == s.model_ci_high == 1.0 and s.model_ci_coverage >= 0.95
    assert s.tight("model", 0.01, 0.95) and not s.tight("median", 0.01, 0.95)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-5.0, 5.0), min_size=2, max_size=400).filter(lambda v: np.ptp(v) > 1e-3),
       st.integers(1, 64))
def test_the_density_is_scipys_gaussian_kde_with_silverman_bandwidth(ys, chunk):
    """The modes' density, computed in numpy in chunks of samples, is scipy's one-dimensional Gaussian KDE."""
    from gpuprofiler.measure.stats import _density

    y = np.asarray(ys)
    grid = np.linspace(y.min() - 1, y.max() + 1, 97)
    expect = stats.gaussian_kde(y, bw_method="silverman")(grid)
    assert np.allclose(_density(y, grid, chunk=chunk), expect, rtol=1e-9, atol=1e-12 * expect.max())


def test_a_measuring_worker_does_not_import_scipy_stats():
    """The worker that launches kernels imports the statistics it records with, not scipy.stats (1.2 s a process)."""
    import subprocess
    import sys

    code = ("import sys, gpuprofiler.workloads.isolated, gpuprofiler.measure.records; "
            "sys.exit('scipy.stats' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@given(st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=200), st.floats(0.0, 1.0))
@settings(max_examples=500, deadline=None)
def test_the_checks_quantile_is_numpys_to_the_bit(xs, q):
    from gpuprofiler.measure.stats import _sorted_quantile
    assert _sorted_quantile(sorted(xs), q) == float(np.quantile(np.asarray(xs), q))
