"""A validate run's sizes measured in visits minutes apart: the visits' records pooled exactly, stored one visit at a
time (a rerun measures only the visits missing), the report's visit spread, and the per-visit policy."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.measure.policy import VALIDATE, VALIDATE_QUICK
from gpuprofiler.measure.records import PHASE_METRIC, pooled, record
from gpuprofiler.measure.stats import model_value, spread
from gpuprofiler.validate.replay import latest_per_size
from gpuprofiler.validate.suite import Store, visit_spread
from gpuprofiler.workloads.sweep import from_records

DEVICE = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d")

times = st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=40)


def kernel_rec(samples, date="d", size=64):
    return {**record("kernel", "k", "k", size, samples, "m", "k.toml", flops=1000, bytes=4000, gflops=0.0,
                     gbps=0.0, placements=1, checked=date == "d0", host_samples_s=[2 * x for x in samples],
                     warmup_s=[samples[0]]), "date": date}


@settings(max_examples=60, deadline=None)
@given(st.lists(times, min_size=1, max_size=4))
def test_pooled_figures_are_those_of_every_visits_runs(visits):
    recs = [[kernel_rec(v, f"d{i}")] for i, v in enumerate(visits)]
    [got] = pooled(recs)
    every = [x for v in visits for x in v]
    assert got["samples_s"] == every and got["samples"] == len(every)
    assert got["model_s"] == model_value(every) and got["spread"] == pytest.approx(spread(every))
    assert got["median_s"] == pytest.approx(float(np.median(every)), rel=1e-12) and got["min_s"] == min(every)
    if len(visits) > 1:
        assert [v["samples"] for v in got["visits"]] == [len(v) for v in visits]
        assert [v["date"] for v in got["visits"]] == [f"d{i}" for i in range(len(visits))]
        assert got["gflops"] == pytest.approx(1000 / got["model_s"] / 1e9)
        assert got["host_samples_s"] == [2 * x for x in every] and got["checked"]
        assert got["placements"] == len(visits)


def test_pooled_app_phases_keep_their_runs_aligned():
    def visit(a, b):
        return [record("app", "app", p, 8, s, PHASE_METRIC, "app.py", share=0.0, run_model_s=0.0,
                       run_median_s=0.0) for p, s in (("step", a), ("copy", b))]

    out = pooled([visit([3.0, 4.0], [1.0, 1.0]), visit([2.0, 5.0, 6.0], [2.0, 1.0, 2.0])])
    step, copy = out
    totals = [4.0, 5.0, 4.0, 6.0, 8.0]
    assert step["samples_s"] == [3.0, 4.0, 2.0, 5.0, 6.0] and copy["samples_s"] == [1.0, 1.0, 2.0, 1.0, 2.0]
    assert step["run_model_s"] == model_value(totals) and step["run_median_s"] == 5.0
    assert step["share"] == pytest.approx(np.median(np.array(step["samples_s"]) / totals))
    sweep = from_records(out)
    assert list(sweep.totals[0]) == totals


def test_visit_spread_is_the_largest_visits_figure_over_the_smallest():
    [got] = pooled([[kernel_rec([1.0, 1.1, 1.2])], [kernel_rec([1.5, 1.6])], [kernel_rec([1.2, 1.3, 1.4, 2.0])]])
    figs = [model_value([1.0, 1.1, 1.2]), model_value([1.5, 1.6]), model_value([1.2, 1.3, 1.4, 2.0])]
    assert visit_spread(got["samples_s"], [got]) == pytest.approx(max(figs) / min(figs))
    assert math.isnan(visit_spread([1.0, 2.0], [kernel_rec([1.0, 2.0])]))  # one visit
    assert math.isnan(visit_spread([1.0], [got]))  # samples that are not the visits'


def test_store_finishes_a_size_when_every_visit_is_stored_and_a_rerun_keeps_them(tmp_path):
    path = tmp_path / "m.jsonl"
    store = Store(path, DEVICE)
    assert store.put("dg", 64, [kernel_rec([1.0, 2.0], "d0")], visit=0, visits=3)
    assert not store.put("dg", 64, [kernel_rec([9.0], "d0")], visit=0, visits=3)  # a visit is written once
    assert store.has("dg", 64, 0) and not store.has("dg", 64, 1) and store.get("dg", 64) is None
    store.put("dg", 64, [kernel_rec([3.0], "d1")], visit=1, visits=3)
    again = Store(path, DEVICE)  # a rerun after an interruption
    assert again.reused == 2 and again.has("dg", 64, 1) and not again.has("dg", 64, 2)
    again.put("dg", 64, [kernel_rec([0.5, 4.0], "d2")], visit=2, visits=3)
    for s in (again, Store(path, DEVICE)):
        [got] = s.get("dg", 64)
        assert got["samples_s"] == [1.0, 2.0, 3.0, 0.5, 4.0] and len(got["visits"]) == 3
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all('"validate_visits": 3' in x for x in lines)


def test_a_store_of_single_visit_groups_still_reads(tmp_path):
    path = tmp_path / "m.jsonl"
    Store(path, DEVICE).put("dg", 64, [kernel_rec([1.0, 2.0])])  # as runs before visits stored them
    store = Store(path, DEVICE)
    assert all(store.has("dg", 64, v) for v in range(3)) and store.get("dg", 64)[0]["samples_s"] == [1.0, 2.0]


def test_replay_pools_the_latest_record_of_each_visit():
    recs = [dict(kernel_rec([5.0]), validate_visit=0), dict(kernel_rec([1.0]), validate_visit=0),
            dict(kernel_rec([2.0]), validate_visit=1), dict(kernel_rec([7.0], size=128))]
    got = latest_per_size(recs)
    assert got[64][0]["samples_s"] == [1.0, 2.0] and got[128][0]["samples_s"] == [7.0]


@pytest.mark.parametrize("policy", [VALIDATE, VALIDATE_QUICK])
def test_a_visit_gets_its_share_of_the_sampling(policy):
    one = policy.per_visit()
    assert policy.visits == 3 and one.visits == 1 and one.placements == 1
    assert one.budget_s * policy.visits == pytest.approx(policy.budget_s)
    assert sum(policy.per_visit(v).min_samples for v in range(policy.visits)) == policy.min_samples
    assert one.per_visit() is one
    assert one.warmup == policy.warmup and policy.per_visit(1).warmup == 0 == policy.per_visit(2).warmup_s
    assert policy.per_visit(2).budget_s == one.budget_s
