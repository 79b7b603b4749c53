import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from gpuprofiler.measure.engine import sample
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.stats import median_interval, summarize


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
        assert cov == 1 - 2 * stats.binom.cdf(j - 1, n, 0.5)
        # one order statistic further in would fall below 95%
        assert 1 - 2 * stats.binom.cdf(j, n, 0.5) < 0.95
    assert median_interval([3.0, 1, 2, 5, 4])[2] == 1 - 2 / 32  # n=5: min..max, 93.75%


def test_summary_fields():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.median, s.minimum, s.n) == (3.0, 1.0, 5)
    assert s.iqr == 2.0


def test_engine_stops_on_interval_and_keeps_every_sample():
    values = iter([5.0, 5.0] + [1.0] * 1000)  # two warm-ups, then constant
    timing = sample(lambda: next(values), TimingPolicy(warmup=2, budget_s=10))
    assert timing.warmup_s == [5.0, 5.0]
    assert timing.stop_reason == "interval"
    assert len(timing.device_s) == 6 and len(timing.host_s) == 6  # first n whose interval reaches 95%


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
