"""The simulator without a device: Pomelov's worked example exactly, the scheduling rules as properties, graphs
from TOML and from recorded timelines, clock alignment, scaling laws and the trace format."""

import json
import math

import networkx as nx
import pytest
from conftest import REPO, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.simulate import chrome
from gpuprofiler.simulate.algorithm import AlgorithmGraph, Task, at_size, clock_offsets, from_timeline, from_toml
from gpuprofiler.simulate.architecture import Link, machine
from gpuprofiler.simulate.schedule import kernel_cost, scaling, simulate

SEED = REPO / "kernels" / "graphs" / "pomelov_blocks.toml"


@pytest.mark.parametrize("cores, ms", [(1, 5000), (2, 2500), (4, 1250)])
def test_pomelovs_example_exactly(cores, ms):
    s = simulate(from_toml(SEED), machine(cores, 1, "core"))
    assert math.isclose(s.makespan_s * 1e3, ms, rel_tol=1e-12)
    assert all(u == pytest.approx(1.0) for u in s.utilisation().values())  # no core idles
    assert len([x for x in s.slots if x.kind == "kernel"]) == 4


def test_out_of_order_queues_overlap_transfers_with_compute():
    """A core whose transfers run on their own link: only the first transfer is exposed (250 + 4 x 1000)."""
    s = simulate(from_toml(SEED), machine(1, 1, "core"), queue="out-of-order")
    assert math.isclose(s.makespan_s, 4.25, rel_tol=1e-12)
    assert [x["name"] for x in s.critical()] == ["transfer 1", "compute 1", "compute 2", "compute 3", "compute 4"]


def test_seed_scaling_and_gantt_from_the_command_line(tmp_path):
    png, trace = tmp_path / "blocks.png", tmp_path / "blocks.json"
    r = run_cli("simulate", SEED, "--devices", "1,2,4", "--gantt", png, "--trace", trace, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [round(s["makespan_s"] * 1e3, 9) for s in out["simulated"]] == [5000, 2500, 1250]
    assert [row["speedup"] for row in out["scaling"]["rows"]] == pytest.approx([1, 2, 4])
    assert out["scaling"]["serial_fraction"] == pytest.approx(0.0, abs=1e-12)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    obj = json.loads(trace.read_text())
    assert chrome.problems(obj) == []
    assert len([e for e in obj["traceEvents"] if e["ph"] == "X"]) == 3 * 8


def test_amdahl_fraction_of_a_serial_part():
    """One 1 s transfer every task waits for, then 4 independent 1 s computes on it: T(p) = 1 + 4 / p on p cores
    as long as the data is shared (one placement group), so here all on one device: the fit says fully serial."""
    tasks = [Task("load", "copy", 1.0, writes=(0,))] + [Task(f"c{k}", "kernel", 1.0, reads=(0,)) for k in range(4)]
    g = AlgorithmGraph(tasks)
    assert g.groups() == [0] * 5
    sc = scaling(g, [machine(n, 1) for n in (1, 2, 4)])
    assert [r["makespan_s"] for r in sc["rows"]] == [5.0, 5.0, 5.0] and sc["serial_fraction"] == 1.0


def test_dependencies_come_from_buffers():
    tasks = [Task("up a", "copy", 1, writes=(0,)), Task("up b", "copy", 1, writes=(1,)),
             Task("k", "kernel", 1, reads=(0, 1), writes=(2,)), Task("down", "copy", 1, reads=(2,)),
             Task("overwrite a", "copy", 1, writes=(0,))]
    g = AlgorithmGraph(tasks)
    edges = {(u, v): d["why"] for u, v, d in g.graph.edges(data=True)}
    assert edges == {(0, 2): "read after write", (1, 2): "read after write", (2, 3): "read after write",
                     (2, 4): "write after read", (0, 4): "write after write"}


def test_a_cycle_and_bad_tasks_are_user_errors(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[[task]]\nname="a"\nms=1\nafter=["b"]\n[[task]]\nname="b"\nms=1\nafter=["a"]\n')
    with pytest.raises(UserError, match="cycle"):
        from_toml(f)
    for body, message in [('[[task]]\nname="a"\n', "needs a cost"), ('[[task]]\nname="a"\nms=-1\n', "non-negative"),
                          ('[[task]]\nname="a"\nms=1\ncolour=2\n', "unknown key"),
                          ('[[task]]\nname="a"\nms=1\nafter=["zz"]\n', "after"), ("x = ", "not valid TOML"),
                          ('name="x"\n', "needs \\[\\[task\\]\\]")]:
        f.write_text(body)
        with pytest.raises(UserError, match=message):
            from_toml(f)
    f.write_text('[[task]]\nname="a"\nms=1\nafter=["b"]\n[[task]]\nname="b"\nms=1\nafter=["a"]\n')
    r = run_cli("simulate", f)
    assert r.returncode == 2 and "cycle" in r.stderr and "Traceback" not in r.stderr


def test_a_transfer_in_bytes_is_priced_by_the_profiles_link(tmp_path):
    from conftest import POCL_PROFILE

    from gpuprofiler.profile.file import load_profile

    f = tmp_path / "g.toml"
    f.write_text('[[task]]\nname="up"\nkind="transfer"\nbytes=16777216\n')
    with pytest.raises(UserError, match="profile"):
        simulate(from_toml(f), machine(1, 1))
    profile = load_profile(POCL_PROFILE)
    m = machine(1, 1, profile=profile)
    link = m.devices[0].links["htod"]
    s = simulate(from_toml(f), m)
    latency = m.devices[0].launch_s  # an idle queue starts it the profile's queue-to-start after the call
    assert latency is not None and 0 < latency < 1e-3
    assert s.makespan_s == pytest.approx(latency + link.seconds(16777216))
    assert m.graph.has_edge("host", "dev0.mem") and nx.is_connected(m.graph)


def test_link_interpolates_its_curve_and_extends_by_bandwidth():
    link = Link(bandwidth_Bps=1e9, curve=[(1e3, 1e-6), (1e6, 1e-3)])
    assert link.seconds(1e3) == pytest.approx(1e-6)
    assert link.seconds(math.sqrt(1e9)) == pytest.approx(math.sqrt(1e-9))  # the geometric middle, in log-log
    assert link.seconds(2e6) == pytest.approx(1e-3 + 1e6 / 1e9)


def test_kernel_cost_scales_by_waves_of_work_groups():
    t = Task("k", "kernel", 1.0, groups=3, compute_units=1)
    assert kernel_cost(t, 1) == 1.0 and kernel_cost(t, 2) == pytest.approx(2 / 3) and kernel_cost(t, 4) == 1 / 3
    assert kernel_cost(Task("k", "kernel", 1.0, groups=None, compute_units=2), 1) == 2.0
    assert kernel_cost(Task("c", "copy", 1.0, compute_units=1), 8) == 1.0


costs = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@st.composite
def programs(draw):
    n = draw(st.integers(1, 12))
    tasks = []
    for i in range(n):
        kind = draw(st.sampled_from(["copy", "kernel"]))
        after = tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))) if i else ()
        tasks.append(Task(f"t{i}", kind, draw(costs), direction="htod" if kind == "copy" else None, after=after,
                          blocking=draw(st.booleans()), host_before_s=draw(st.floats(0, 1)),
                          host_call_s=draw(st.floats(0, 0.1))))
    return AlgorithmGraph(tasks, host_tail_s=draw(st.floats(0, 1)))


@settings(max_examples=150, deadline=None)
@given(programs(), st.integers(1, 4), st.sampled_from(["in-order", "out-of-order"]))
def test_a_schedule_keeps_every_rule(g, devices, queue):
    s = simulate(g, machine(devices, 1), queue)
    by_task = {x.task: x for x in s.slots if x.task >= 0}
    assert sorted(by_task) == list(range(len(g.tasks)))
    for i, t in enumerate(g.tasks):
        assert by_task[i].end_s - by_task[i].start_s == pytest.approx(t.cost_s)
        for j in g.graph.pred[i]:
            assert by_task[i].start_s >= by_task[j].end_s - 1e-12  # dependencies
    for r in {x.resource for x in s.slots}:  # one operation at a time on each resource
        mine = sorted((x.start_s, x.end_s) for x in s.slots if x.resource == r)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(mine, mine[1:]))
    groups = g.groups()
    for i in range(len(g.tasks)):  # data stays on one device
        for j in range(len(g.tasks)):
            if groups[i] == groups[j]:
                assert by_task[i].device == by_task[j].device
    longest = nx.dag_longest_path_length(g.graph, weight=None, default_weight=0) if g.graph.edges else 0
    assert longest >= 0
    chain = max((sum(g.tasks[k].cost_s for k in path) for path in _paths(g)), default=0.0)
    assert s.makespan_s >= chain - 1e-9  # no schedule beats its longest dependency chain
    assert s.makespan_s >= sum(t.host_before_s for t in g.tasks) + g.host_tail_s - 1e-9  # nor the host's own work
    cp = s.critical_path
    assert cp and s.slots[cp[-1]].end_s == pytest.approx(max(x.end_s for x in s.slots))
    assert all(s.slots[b].start_s >= s.slots[a].end_s - 1e-9 for a, b in zip(cp, cp[1:]))


def _paths(g):
    for src in [n for n in g.graph if g.graph.in_degree(n) == 0]:
        for dst in [n for n in g.graph if g.graph.out_degree(n) == 0]:
            yield from nx.all_simple_paths(g.graph, src, dst) if src != dst else [[src]]


def test_clock_offsets_meet_both_bounds():
    ops = [{"device": 0, "host_call_ns": 1000, "host_return_ns": 1100, "device_start_ns": 500, "device_end_ns": 550,
            "blocking": True},
           {"device": 0, "host_call_ns": 2000, "host_return_ns": 2010, "device_start_ns": 1480, "device_end_ns": 1490,
            "blocking": False},
           {"device": 1, "host_call_ns": 3000, "host_return_ns": 3010, "device_start_ns": 7, "device_end_ns": 9,
            "blocking": False}]
    # device 0: start after its call: offset >= 500 and >= 520; ended before return: offset <= 550 -> middle 535
    assert clock_offsets(ops) == {0: 535.0, 1: 2993.0}


def _timeline():
    """A recorded two-device run, written by hand: upload, kernel, download on each device."""
    def op(i, name, kind, device, call, ret, start, end, reads=(), writes=(), blocking=False, nbytes=0):
        return {"index": i, "name": name, "phase": name, "kind": kind, "device": device, "reads": list(reads),
                "writes": list(writes), "blocking": blocking, "bytes": nbytes, "global_size": [256] if kind ==
                "kernel" else [], "local_size": [64] if kind == "kernel" else None, "host_call_ns": call,
                "host_return_ns": ret, "device_start_ns": start, "device_end_ns": end, "seconds": (end - start) * 1e-9}
    ms = 1_000_000
    ops = [op(0, "memcpy HtoD", "copy", 0, 0, 2 * ms, 0, 2 * ms, writes=[0], blocking=True, nbytes=8),
           op(1, "k", "kernel", 0, 2 * ms, 2 * ms, 2 * ms, 12 * ms, reads=[0, 1], writes=[0, 1]),
           op(2, "memcpy HtoD", "copy", 1, 2 * ms, 4 * ms, 2 * ms, 4 * ms, writes=[2], blocking=True, nbytes=8),
           op(3, "k", "kernel", 1, 4 * ms, 4 * ms, 4 * ms, 14 * ms, reads=[2, 3], writes=[2, 3]),
           op(4, "memcpy DtoH", "copy", 0, 4 * ms, 13 * ms, 12 * ms, 13 * ms, reads=[1], blocking=True, nbytes=8),
           op(5, "memcpy DtoH", "copy", 1, 13 * ms, 15 * ms, 14 * ms, 15 * ms, reads=[3], blocking=True, nbytes=8)]
    dev = {"id": "opencl:0:0/2", "compute_units": 1, "name": "cpu"}
    return {"app": "two", "size": 256, "devices": [dev, dict(dev)], "host_start_ns": 0, "host_end_ns": 15 * ms,
            "run_s": 0.015, "operations": ops}


def test_a_recorded_run_is_reproduced_and_retargeted():
    g = from_timeline(_timeline())
    assert g.groups() == [0, 0, 1, 1, 0, 1]
    s2 = simulate(g, machine(2, 1))
    assert s2.placement == "recorded" and s2.makespan_s == pytest.approx(0.015)
    one = simulate(g, machine(1, 1))  # both tasks on one device: 2 + 10 + 2 + 10 + 1 + 1
    assert one.placement == "earliest" and one.makespan_s == pytest.approx(0.026)
    whole = simulate(g, machine(1, 2))  # 4 work-groups on 2 compute units: each kernel in half the time
    assert whole.makespan_s == pytest.approx(0.016)


def test_measured_rows_and_trace_events_cover_every_operation(tmp_path):
    tl = _timeline()
    rows = chrome.measured_rows(tl)
    ops = [r for r in rows if r["resource"] != "host"]
    assert len(ops) == len(tl["operations"]) and {r["resource"] for r in ops} == {"dev0", "dev1"}
    obj = chrome.trace([("measured", rows)], recorded=tl)
    assert chrome.problems(obj) == []
    path = chrome.write(tmp_path / "t.json", obj)
    assert chrome.load_recorded(path) == tl


@pytest.mark.parametrize("obj, problem", [
    ([], "top level"), ({"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}, "no 'name'"),
    ({"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0}]}, "non-negative dur"),
    ({"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 1}]}, "finite"),
    ({"traceEvents": [{"name": "a", "ph": "M", "pid": 1, "tid": 1}]}, "metadata"),
    ({"traceEvents": [], "displayTimeUnit": "s"}, "displayTimeUnit"),
])
def test_trace_checker_finds_what_viewers_refuse(obj, problem):
    assert any(problem in p for p in chrome.problems(obj))


def test_a_file_without_a_recorded_run_is_refused(tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(UserError, match="no recorded run"):
        chrome.load_recorded(f)
    r = run_cli("simulate", f)
    assert r.returncode == 2 and "no recorded run" in r.stderr


def test_a_program_at_another_size_takes_its_dry_run_and_the_predicted_costs():
    g = from_timeline(_timeline())
    rows = [{"name": t.name, "phase": t.phase, "kind": t.kind, "device": 0, "reads": list(t.reads),
             "writes": list(t.writes), "blocking": t.blocking, "bytes": 4 * t.bytes, "global_size": [1024],
             "local_size": [64]} for t in g.tasks]
    target = at_size(g, rows, {"k": 0.04}, {"htod": 1e-3, "dtoh": 2e-3}, host_factor=2.0, size=1024)
    assert [t.cost_s for t in target.tasks] == pytest.approx([0.032, 0.04, 0.032, 0.04, 0.064, 0.064])
    assert [t.groups for t in target.tasks if t.kind == "kernel"] == [16, 16]
    assert [t.host_before_s for t in target.tasks] == pytest.approx([2 * t.host_before_s for t in g.tasks])
    with pytest.raises(UserError, match="no prediction for phase"):
        at_size(g, rows, {}, {"htod": 1e-3, "dtoh": 1e-3}, 1.0)


def test_a_devices_compute_rate_divides_its_kernels_not_its_copies():
    g = from_toml(SEED)
    s = simulate(g, machine(1, 1, "core", rate=2.0))
    assert math.isclose(s.makespan_s, 4 * (0.25 + 0.5), rel_tol=1e-12)
    with pytest.raises(UserError, match="rate"):
        machine(1, 1, rate=0.0)
