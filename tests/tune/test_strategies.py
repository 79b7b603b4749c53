"""Search strategies against a tuner stand-in with known times (deterministic; the device tests are in
test_tune_pocl)."""

import math

import numpy as np
import pytest
from scipy import stats

from gpuprofiler.tune.space import config_key, parse_space
from gpuprofiler.tune.strategies import create
from gpuprofiler.tune.strategies.model import MIN_SPREAD, ModelGuided
from gpuprofiler.tune.tuner import Result


class FakeTuner:
    """Configurations with a known target time and a ranking time = target x scale x noise."""

    def __init__(self, times: dict[str, float], rank_noise: dict[str, float] | None = None, budget=None):
        self.space = parse_space("i=" + ",".join(str(i) for i in range(len(times))))
        self.candidates = self.space.configs()
        self.times = list(times.values())
        self.noise = rank_noise or {}
        self.budget = budget
        self.results = {}
        self.rank_size = 1
        self.ranker = "sweep"
        self.rank_s = 0.0
        self.ranked = 0

    @property
    def measured_count(self):
        return len(self.results)

    @property
    def exhausted(self):
        return self.budget is not None and self.measured_count >= self.budget

    def measure(self, config):
        t = self.times[config["i"]]
        rec = {"model_s": t, "model_ci_low_s": t * 0.99, "model_ci_high_s": t * 1.01}
        self.results[config_key(config)] = Result(config, "ok", record=rec)
        return self.results[config_key(config)]

    def rank(self, config):
        self.ranked += 1
        return self.times[config["i"]] / 8 * self.noise.get(config["i"], 1.0)

    def best(self):
        return min(self.results.values(), key=lambda r: r.seconds)

    def say(self, message):
        pass


def test_brute_measures_everything_and_random_is_a_permutation():
    times = {f"c{i}": 1.0 + i for i in range(10)}
    t = FakeTuner(times)
    create("brute").search(t)
    assert t.measured_count == 10
    t = FakeTuner(times, budget=4)
    s = create("random", seed=3)
    s.search(t)
    assert t.measured_count == 4 and "budget" in s.notes[0]
    t2 = FakeTuner(times, budget=4)
    create("random", seed=3).search(t2)
    assert set(t.results) == set(t2.results)  # seeded


def test_model_stops_early_when_the_ranking_is_faithful():
    rng = np.random.default_rng(0)
    times = {f"c{i}": float(t) for i, t in enumerate(rng.uniform(1, 3, 24))}
    t = FakeTuner(times, {i: float(x) for i, x in enumerate(rng.normal(1, 0.01, 24))})
    s = ModelGuided()
    s.search(t)
    assert t.measured_count < 24 * 0.3
    assert t.best().seconds == min(times.values())
    assert s.chance <= 0.05 and "stopped after" in s.notes[0]


@pytest.mark.parametrize("seed", range(5))
def test_model_keeps_measuring_when_the_ranking_says_little(seed):
    rng = np.random.default_rng(seed)
    times = {f"c{i}": float(t) for i, t in enumerate(rng.permutation(1.0 + 0.25 * np.arange(12)))}
    t = FakeTuner(times, {i: float(x) for i, x in enumerate(rng.uniform(0.4, 2.5, 12))})
    ModelGuided().search(t)
    assert t.best().seconds == min(times.values())  # the ranking's spread keeps the best within reach


def test_model_stops_inside_the_tolerance():
    # twelve configurations within 2% of each other, faithfully ranked: none can be 5% faster than the best
    times = {f"c{i}": 1.0 + 0.002 * i for i in range(12)}
    t = FakeTuner(times)
    s = ModelGuided(tolerance=0.05)
    s.search(t)
    assert t.measured_count <= 6 and "more than 5% faster" in s.notes[0]


def test_out_of_reach_bound():
    best = Result({"i": 0}, "ok", record={"model_s": 1.0, "model_ci_high_s": 1.0})
    t2 = stats.t(df=2)
    # three measured with target = 8 x small exactly: a common ratio, the spread at its floor
    measured = [(0.1, 0.8), (0.125, 1.0), (0.2, 1.6)]
    chance, reach = ModelGuided.out_of_reach(measured, [0.2, 0.25], best)
    sd = MIN_SPREAD * math.sqrt(1 + 1 / 3)  # no residual, no noise given: the floor
    assert chance == pytest.approx(t2.cdf(math.log(1 / 1.6) / sd) + t2.cdf(math.log(1 / 2.0) / sd), rel=1e-9)
    assert reach == pytest.approx(1 - 1.6 * math.exp(-t2.ppf(0.975) * sd), rel=1e-9)
    chance, reach = ModelGuided.out_of_reach(measured, [0.125], best)
    assert chance == pytest.approx(0.5, abs=1e-9) and reach > 0


def test_out_of_reach_fits_a_slope():
    best = Result({"i": 0}, "ok", record={"model_s": 1.0, "model_ci_high_s": 1.0})
    # target = 2 * small^0.5 exactly, at four well-spread small figures: the line is exact, the spread at its floor
    smalls = [0.25, 1.0, 4.0, 16.0]
    measured = [(s, 2 * s ** 0.5) for s in smalls]
    chance, _ = ModelGuided.out_of_reach(measured, [64.0], best)
    x = np.log(smalls)
    lev = 1 / 4 + (math.log(64.0) - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum()
    want = stats.t(df=2).cdf((0 - math.log(2 * 8.0)) / (MIN_SPREAD * math.sqrt(1 + lev)))
    assert chance == pytest.approx(want, rel=1e-9)
