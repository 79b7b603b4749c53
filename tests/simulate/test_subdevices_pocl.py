"""Sub-devices by fission, recorded timelines and their traces, on the real PoCL device."""

import json

import pytest
from conftest import run_cli

from gpuprofiler.device import open_backend
from gpuprofiler.errors import UserError
from gpuprofiler.simulate import chrome
from gpuprofiler.simulate.algorithm import from_timeline, host_spans
from gpuprofiler.simulate.architecture import machine
from gpuprofiler.simulate.schedule import simulate
from gpuprofiler.workloads.apps import load_app, measure_app
from gpuprofiler.workloads.builtin import resolve


@pytest.fixture(scope="module")
def split(pocl):
    if pocl.info.compute_units < 2 or pocl.info.compute_units % 2:
        pytest.skip(f"the PoCL device has {pocl.info.compute_units} compute unit(s): it does not split in two")
    with open_backend(f"{pocl.info.id}/2") as backend:
        yield backend


def test_a_device_splits_into_sub_devices(pocl, split):
    assert len(split.peers) == 2 and split.peers[0] is split
    assert sum(p.info.compute_units for p in split.peers) == pocl.info.compute_units
    assert all(p.info.extra["sub_device"]["parts"] == 2 for p in split.peers)
    assert split.info.slug == pocl.info.slug and split.info.id == f"{pocl.info.id}/2"
    with open_backend(f"{pocl.info.id}/2/1") as one:
        assert len(one.peers) == 1 and one.info.compute_units == pocl.info.compute_units // 2
    with pytest.raises(UserError, match="splits into"):
        open_backend(f"{pocl.info.id}/{pocl.info.compute_units + 1}")
    r = run_cli("measure", "vadd", "--device", f"{pocl.info.id}/2/3", "--sizes", "1024")
    assert r.returncode == 2 and "splits into" in r.stderr and "Traceback" not in r.stderr


def test_a_run_over_two_sub_devices_is_recorded_operation_by_operation(split, quick_policy):
    app = load_app(resolve("batch"))
    got = {}
    records = measure_app(split, app, [16384], quick_policy, on_timeline=lambda s, t: got.update({s: t}))
    assert all(r["checked"] for r in records)
    tl = got[16384]
    ops = tl["operations"]
    tasks = app.module.TASKS
    assert [op["kind"] for op in ops].count("kernel") == tasks and len(ops) == 3 * tasks
    assert {op["device"] for op in ops} == {0, 1} and len(tl["devices"]) == 2
    assert all(op["device_end_ns"] >= op["device_start_ns"] for op in ops)
    spans = host_spans(tl)
    assert all(s["start_s"] >= s["call_s"] - 1e-9 for s in spans)  # no operation starts before it was called
    assert all(s["end_s"] <= s["return_s"] + 1e-9 for s in spans if s["blocking"])
    g = from_timeline(tl)
    assert len(set(g.groups())) == tasks  # each task's upload, kernel and download share data, nothing else does
    # the recorded run, replayed on the machine it ran on, lands near its own length (generous: a shared VM)
    s = simulate(g, machine(2, split.info.compute_units))
    assert s.placement == "recorded"
    assert 0.5 * tl["run_s"] < s.makespan_s < 1.5 * tl["run_s"]


def test_measure_trace_holds_every_launch_and_copy_and_simulate_reads_it(split, tmp_path):
    trace = tmp_path / "batch.json"
    r = run_cli("measure", "batch", "--device", split.info.id, "--sizes", "16384", "--budget", "0.3", "--trace",
                trace, "-o", tmp_path / "m.jsonl")
    assert r.returncode == 0, r.stderr
    obj = json.loads(trace.read_text())
    assert chrome.problems(obj) == []
    recorded = obj["otherData"]["timeline"]
    complete = [e for e in obj["traceEvents"] if e["ph"] == "X" and e["cat"] != "host"]
    assert len(complete) == len(recorded["operations"]) == 24
    assert sorted(e["name"] for e in complete) == sorted(op["name"] for op in recorded["operations"])
    r = run_cli("simulate", trace, "--devices", "1,2", "--json", "--gantt", tmp_path / "g.png")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    one, two = (s["makespan_s"] for s in out["simulated"])
    assert two < one  # a second sub-device takes half the tasks
    assert (tmp_path / "g.png").stat().st_size > 10_000


def test_cg_recorded_on_one_device_has_every_operation(pocl, quick_policy):
    got = {}
    records = measure_app(pocl, load_app(resolve("cg")), [4096], quick_policy,
                          on_timeline=lambda s, t: got.update({s: t}))
    ops = got[4096]["operations"]
    calls = {r["phase"]: r["calls"] for r in records}
    assert len(ops) == sum(calls.values())
    for phase, n in calls.items():
        assert sum(op["phase"] == phase for op in ops) == n
    spmv = next(op for op in ops if op["name"] == "spmv")
    assert spmv["reads"] and spmv["reads"] == spmv["writes"] and spmv["bytes"] > 0


@pytest.mark.slow  # over five seconds; a cheaper test of the same behaviour stays in the default run
def test_simulate_an_app_checks_itself_and_predicts_a_larger_size(pocl, tmp_path):
    r = run_cli("simulate", "jacobi", "--device", pocl.info.id, "--sizes", "4096,8192,16384", "--at", "65536",
                "--check", "--budget", "0.3", "--json", "-o", tmp_path / "m.jsonl", "--gantt", tmp_path / "g.png")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["size"] == 16384 and out["tasks"] > 20
    one = out["simulated"][0]
    assert abs(one["error_vs_measured"]) < 0.5  # generous: a shared VM; the committed results hold the figures
    p = out["prediction"]
    assert p["size"] == 65536 and p["operations"] == out["tasks"] and p["measured_s"] > 0
    assert set(p["kernel_per_call_s"]) == {"jacobi_step", "diff_partial"} and set(p["copy_s_per_byte"]) == {"htod",
                                                                                                          "dtoh"}
    assert 0.2 < p["simulated_s"] / p["measured_s"] < 5
    assert (tmp_path / "m.jsonl").read_text().count("\n") >= 4 * 4  # every phase at every size stored
    r = run_cli("simulate", "jacobi", "--sizes", "4096", "--at", "65536")
    assert r.returncode == 2 and "at least 3 --sizes" in r.stderr
