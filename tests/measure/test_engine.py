"""The timing engine's loop without a device: runs in alternation, fixed counts, warm-up, and launch hooks
around every timed launch (and only there)."""

import itertools

import pytest

from gpuprofiler.device.base import LaunchHook
from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import TimingPolicy, bench, fixed


@pytest.mark.parametrize("stop_on", ["median", "model"])
def test_interleave_alternates_runs_and_stops_them_together(stop_on):
    order = []
    values = {"a": itertools.cycle([1.0, 1.0, 1.02]), "b": itertools.cycle([2.0, 2.1, 2.0, 2.05])}

    def run(name):
        def once():
            order.append(name)
            return next(values[name])
        return once

    policy = TimingPolicy(warmup=2, min_samples=5, rel_ci=0.5, budget_s=10, stop_on=stop_on)
    a, b = Engine(policy).interleave([run("a"), run("b")])
    assert order[:4] == ["a", "b", "a", "b"] and order == ["a", "b"] * (len(order) // 2)
    # the first count whose order-statistic interval reaches 95% coverage: 6 for the median; 31 for the 10th
    # percentile (0.9^n must leave at most 2.5% to each side)
    n = {"median": 6, "model": 31}[stop_on]
    assert len(a.warmup_s) == len(b.warmup_s) == 2 and len(a.device_s) == len(b.device_s) == n
    assert a.stop_reason == b.stop_reason == "interval"
    assert len(order) == 2 * (2 + n)


def test_interleave_waits_for_the_slowest_to_converge_or_the_budget():
    steady = itertools.cycle([1.0])
    noisy = itertools.cycle([1.0, 5.0, 0.2, 3.0])
    a, b = Engine(TimingPolicy(warmup=0, min_samples=5, max_samples=12, rel_ci=0.02, budget_s=10)).interleave(
        [lambda: next(steady), lambda: next(noisy)])
    assert len(a.device_s) == len(b.device_s) == 12 and a.stop_reason == b.stop_reason == "max_samples"


def test_fixed_policy_runs_exactly_n_after_the_warm_up():
    calls = []
    t = Engine(fixed(4, warmup=6)).sample(lambda: float(calls.append(1) or len(calls)))
    assert len(t.warmup_s) == 6 and len(t.device_s) == 4 and len(calls) == 10
    assert t.device_s == [7.0, 8.0, 9.0, 10.0]


def test_bench_policy_budgets():
    assert bench(True, 0.3, 0.03).budget_s == 0.03 and bench(False, 0.3, 0.03).budget_s == 0.3
    assert bench(True, 0.2).budget_s == 0.2 and bench(False, 0.2, warmup=2).warmup == 2


class Recorder(LaunchHook):
    def __init__(self, log):
        self.log = log

    def before_launch(self):
        self.log.append("before")

    def after_launch(self):
        self.log.append("after")


class Event:
    def seconds(self):
        return 1e-3


class FakeBackend:
    """A backend whose launches are logged; one launch hook, as the CUDA backend has."""

    def __init__(self):
        self.log = []
        self.hook = Recorder(self.log)

    def launch_hooks(self):
        return (self.hook,)

    def launch(self, kernel, global_size, local_size, args):
        self.log.append("launch")
        return Event()

    def finish(self):
        self.log.append("finish")


def test_timed_launches_run_the_backends_hooks_around_each_launch():
    backend = FakeBackend()
    timing = Engine(fixed(3, warmup=1)).time_launch(backend, "k", (1,), (1,), [])
    assert timing.device_s == [1e-3] * 3
    assert backend.log == ["before", "launch", "after", "finish"] * 4


def test_a_plain_backend_has_no_hooks():
    from gpuprofiler.device.base import Backend

    class Plain(Backend):
        kind, info, source_suffix = "x", None, ".x"
        compile = alloc = to_device = from_device = launch = finish = None

    assert tuple(Plain.launch_hooks(object.__new__(Plain))) == ()


@pytest.mark.parametrize("n", [1, 3])
def test_engine_keeps_host_times_beside_the_values(n):
    t = Engine(fixed(n)).sample(lambda: 42.0)
    assert t.device_s == [42.0] * n and len(t.host_s) == n and all(h >= 0 for h in t.host_s)
