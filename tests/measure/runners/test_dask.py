"""Runners on Dask: the default path without Dask, a simulated fleet of 200 devices on a threaded LocalCluster
(calibration, outliers, 10^5 records with the client's memory measured), and the real PoCL device on a
LocalCluster of worker processes (the same records as the sequential run, a worker killed mid-run)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import pytest
from conftest import POCL_PROFILE, REPO, pocl_id, run_cli

from gpuprofiler.measure.runners.base import Task

distributed = pytest.importorskip("distributed")

sys.path.insert(0, str(Path(__file__).parent))
import fakefleet  # noqa: E402

from gpuprofiler.calibrate.driver import SECTIONS  # noqa: E402
from gpuprofiler.calibrate.fleet import plan, profile_path, run_calibrations  # noqa: E402
from gpuprofiler.measure.runners.dask import DaskRunner  # noqa: E402
from gpuprofiler.measure.storage import KeyedLog, read_records  # noqa: E402


def test_default_install_has_no_dask_and_default_path_imports_none():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if d.split(">")[0].split("[")[0].strip() in ("dask", "distributed", "dask-cuda")]
    code = ("import sys\nfrom gpuprofiler.cli.main import main\n"
            "for cmd in (['validate', '--help'], ['calibrate', '--help'], ['measure', '--help'], ['tune', '--help']):\n"
            "    try:\n        main(cmd)\n    except SystemExit:\n        pass\n"
            "import gpuprofiler.validate.suite, gpuprofiler.calibrate.fleet, gpuprofiler.measure.runners\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_cluster_without_dask_says_how_to_install(tmp_path):
    code = ("import sys\nsys.modules['distributed'] = None\nfrom gpuprofiler.cli.main import main\n"
            "sys.exit(main(['measure', 'vadd', '--cluster', 'local:2', '-o', sys.argv[1]]))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.jsonl")], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and "pip install 'gpuprofiler[dask]'" in r.stderr and "Traceback" not in r.stderr
    for bad in ("ftp://nowhere", "local:0", "tcp:/x"):
        r = run_cli("validate", "--cluster", bad, "-o", tmp_path / "o")
        assert r.returncode == 2 and "--cluster" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.fixture(scope="module")
def fleet():
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)  # 200 devices' comms logged at INFO slow the run down
    fakefleet.register()
    runner = DaskRunner.local(fakefleet.NODES, fakefleet.ids(), processes=False)
    try:
        yield runner
    finally:
        runner.close()
        fakefleet.unregister()


@pytest.mark.slow
def test_fleet_of_200_calibrates_and_the_slow_device_is_flagged(fleet, tmp_path, capsys):
    slots = fleet.slots()
    assert len(slots) == 200 and len(fleet.kinds()) == 3
    assert len({(s.ip, s.resource) for s in slots}) == 200
    out = tmp_path / "fleet"
    runs = [plan(s, profile_path(out, s, slots), SECTIONS) for s in slots]
    run_calibrations(fleet, runs, section_fn=fakefleet.fake_section)
    assert all(not r.todo and not r.error for r in runs)
    assert len(list(out.rglob("profile.json"))) == 200
    # a rerun finds every profile complete
    assert all(not plan(s, profile_path(out, s, slots), SECTIONS).todo for s in slots)
    r = run_cli("profile", "fleet", out, "--json", "--plot", tmp_path / "fleet.png")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    slow = next(s for s in slots if s.resource == fakefleet.SLOW)
    assert list(got["outliers"]) == [str(profile_path(out, slow, slots).parent)]
    assert {"bandwidth.read_Bps", "launch.fixed_s"} <= set(got["outliers"][str(profile_path(out, slow, slots).parent)])
    assert (tmp_path / "fleet.png").stat().st_size > 0
    text = run_cli("profile", "fleet", out).stdout
    assert text.count("OUTLIER") == 1 and "slower" in text


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_fleet_store_holds_1e5_records_with_bounded_client_memory(fleet, tmp_path):
    tasks, per_task = 250, 400  # 10^5 records of 20 samples each, streamed into the store
    store = KeyedLog(tmp_path / "m.jsonl", fleet.slots()[0].info)
    kinds = list(fleet.kinds())
    before = peak = _rss()
    half = {}

    def done(task, outcome):
        nonlocal peak
        store.put_many([(f"{task.key}|{size}", records) for size, records in outcome.value.items()])
        peak = max(peak, _rss())
        if store.records >= tasks * per_task // 2 and not half:
            half.update(rss=_rss(), disk=(tmp_path / "m.jsonl").stat().st_size)

    todo = (Task(f"t{i}", fakefleet.fake_records, (i, per_task, 20), kind=kinds[i % 3]) for i in range(tasks))
    t0 = time.perf_counter()
    fleet.window = 50  # what is in flight (here 50 x 400 records) is what the client may hold at once
    try:
        fleet.run(todo, done)
    finally:
        fleet.window = None
    spent = time.perf_counter() - t0
    on_disk = (tmp_path / "m.jsonl").stat().st_size
    assert store.records == tasks * per_task >= 10**5
    growth, late = peak - before, peak - half["rss"]
    # the stated bound: the process (client, scheduler and the 25 threaded workers) grows by less than 96 MiB in
    # all (the tasks in flight and their results), and by less than 16 MiB while the second half of the records
    # (over 40 MiB on disk) streams in: the client keeps none of them
    assert growth < 96 * 2**20 and late < 16 * 2**20 < (on_disk - half["disk"]) / 2.5, (growth, late, on_disk)
    print(f"10^5 records ({on_disk / 2**20:.0f} MiB) in {spent:.1f} s; RSS grew {growth / 2**20:.1f} MiB, "
          f"{late / 2**20:.1f} MiB in the second half")
    again = KeyedLog(tmp_path / "m.jsonl", fleet.slots()[0].info)
    assert again.stored == tasks * per_task and not again.put("t0|0", [{"x": 1}])


def _where(ctx):
    return ctx.resource


def _broken(ctx):
    raise ValueError("a bug in a task")


def test_tasks_of_a_kind_spread_over_its_devices_and_each_result_names_where_it_ran(fleet):
    kind = fleet.slots()[0].kind
    got = []
    fleet.run([Task(f"w{i}", _where, kind=kind) for i in range(64)], lambda t, o: got.append((o.value, o.slot)))
    assert len(got) == 64 and all(slot.resource == ran and slot.kind == kind for ran, slot in got)
    assert len({slot for _, slot in got}) > 8  # not all on one device
    failures = []
    fleet.run([Task("b", _broken, kind=kind), Task("w", _where, kind=kind)], lambda t, o: got.append(o.value),
              failures.append)
    assert len(failures) == 1 and "ValueError: a bug in a task" in str(failures[0].error)
    assert type(failures[0].error).__name__ == "DeviceError" and len(got) == 65
    with pytest.raises(Exception, match="no device of the kind"):
        fleet.run([Task("n", _where, kind="no-such-kind")], lambda t, o: None)


def _sleep_task(ctx, seconds: float) -> float:
    ctx.backend()
    time.sleep(seconds)
    return seconds


def test_scheduling_overhead_per_task_is_small(fleet):
    """Each of 20 tasks of 100 ms on one device: the wall time beyond the tasks' own is the runner's overhead.
    The generous bound here guards against regressions; benchmarks/cluster_overhead.py measures it."""
    slot = fleet.slots()[0]
    spent = []
    t0 = time.perf_counter()
    fleet.run([Task(f"s{i}", _sleep_task, (0.1,), slot=slot) for i in range(20)],
              lambda t, o: spent.append(o.seconds))
    wall = time.perf_counter() - t0
    overhead = (wall - sum(spent)) / len(spent)
    assert len(spent) == 20 and overhead < 0.02, overhead


def test_two_workers_claiming_one_device_are_refused():
    cluster = distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None,
                                       resources={pocl_id(): 1})
    client = distributed.Client(cluster)
    try:
        with pytest.raises(Exception, match="both hold the device"):
            DaskRunner(client=client).slots()
    finally:
        client.close()
        cluster.close()


def _listening(process) -> set:
    """The TCP addresses ``process`` and its children listen on."""
    import psutil

    out = set()
    for p in [process] + process.children(recursive=True):
        try:
            out |= {c.laddr for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        except psutil.Error:  # a child that ended meanwhile
            continue
    return out


def test_a_local_cluster_listens_on_loopback_only(monkeypatch):
    """A local cluster of worker processes: its scheduler (this process) and its worker listen on 127.0.0.1 only,
    read from the listening sockets; its dashboard is asked for on 127.0.0.1 too (bokeh, which serves it, is not a
    dependency: the address handed to Dask is checked)."""
    import psutil

    asked = {}
    real = distributed.LocalCluster

    def recording(*args, **kwargs):
        asked.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", recording)
    me = psutil.Process()
    before = _listening(me)
    runner = DaskRunner.local(1, ["opencl:0:0"])  # started, not asked for its devices: none is opened
    try:
        listening = _listening(me) - before
        assert len(listening) >= 2, listening  # the scheduler's and the worker's
        assert {addr.ip for addr in listening} == {"127.0.0.1"}, listening
    finally:
        runner.close()
    assert asked["host"] == "127.0.0.1" and asked["dashboard_address"].startswith("127.0.0.1:")


# ---- the real PoCL device on worker processes ------------------------------------------------------------------

SUITE_SPEC = (REPO / "tests" / "validate" / "test_validate.py")


def _suite(folder: Path, names=("one", "two")) -> Path:
    sys.path.insert(0, str(REPO / "tests" / "validate"))
    import test_validate

    return test_validate.make_suite(folder, names=names, target=2097152)


def _validate(suite, out, *extra):
    return run_cli("validate", "--suite", suite, "--profile", POCL_PROFILE, "--quick", "--spec-sizes",
                   "--models", "fractal", "-o", out, *extra)


@pytest.mark.slow
@pytest.mark.pocl
def test_validate_on_a_local_cluster_gives_the_sequential_records(tmp_path, pocl):
    suite = _suite(tmp_path / "suite", names=("one",))
    r = _validate(suite, tmp_path / "seq", "--device", pocl_id())
    assert r.returncode == 0, r.stderr
    r = _validate(suite, tmp_path / "dask", "--cluster", "local:2")
    assert r.returncode == 0, r.stderr
    assert "measured on" in r.stderr
    seq = read_records(tmp_path / "seq" / "measurements.jsonl")
    par = read_records(tmp_path / "dask" / "measurements.jsonl")

    def key(x):
        return x["kernel"], x["phase"], x["size"], x["validate_digest"], x["validate_group_size"], x["validate_visit"]

    assert sorted(map(key, seq)) == sorted(map(key, par)) and len(par) == 18  # 6 sizes x 3 visits
    assert all(set(a) == set(b) for a, b in zip(seq, par))
    assert all(p["device"]["name"] == s["device"]["name"] and p["host"] == s["host"] for s, p in zip(seq, par))
    assert all(p["checked"] == (p["validate_visit"] == 0) for p in par)
    rows = [x.split(",")[:3] for x in (tmp_path / "dask" / "predictions.csv").read_text().splitlines()[1:]]
    assert sorted(rows) == sorted(x.split(",")[:3] for x in (tmp_path / "seq" / "predictions.csv").read_text()
                                  .splitlines()[1:])
    # a rerun on the cluster measures nothing again
    r = _validate(suite, tmp_path / "dask", "--cluster", "local:2")
    assert r.returncode == 0 and "reusing 18 finished measurement(s)" in r.stderr
    assert len(read_records(tmp_path / "dask" / "measurements.jsonl")) == 18


def _device_worker_pid(runner) -> int:
    info = runner.client.scheduler_info()["workers"]
    [address] = [a for a, w in info.items() if pocl_id() in (w.get("resources") or {})]
    return runner.client.run(os.getpid, workers=[address])[address]


@pytest.mark.slow
@pytest.mark.pocl
def test_a_worker_killed_mid_run_leaves_each_size_stored_once(tmp_path, pocl):
    from gpuprofiler.profile.file import load_profile
    from gpuprofiler.validate import suite as vs

    folder = _suite(tmp_path / "suite", names=("one", "two"))
    out = tmp_path / "out"
    runner = DaskRunner.local(2, [pocl_id()])
    log = out / "measurements.jsonl"
    killed = []

    def kill_when_first_group_lands():
        deadline = time.time() + 120
        while time.time() < deadline and (not log.exists() or not log.read_text().strip()):
            time.sleep(0.02)
        time.sleep(0.5)  # inside the next item's task
        pid = _device_worker_pid(runner)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    watcher = threading.Thread(target=kill_when_first_group_lands, daemon=True)
    watcher.start()
    try:
        results = vs.run(runner, str(folder), out, load_profile(POCL_PROFILE), ["fractal"], quick=True,
                         spec_sizes=True)
    finally:
        watcher.join(timeout=5)
        deadline = time.time() + 60
        while True:  # the restarted worker (it may still be starting)
            try:
                after = _device_worker_pid(runner)
                break
            except (ValueError, KeyError):
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        runner.close()
    assert killed and killed[0] != after  # the worker was killed, and a new one finished the run
    stored = read_records(log)
    keys = [(r["validate_digest"], r["size"], r["validate_visit"]) for r in stored]
    assert len(keys) == len(set(keys)) == 36  # 2 items x 6 sizes x 3 visits, each once
    assert len(results) == 2 and all(res.rows for res in results)


def _die(ctx):
    os.kill(os.getpid(), signal.SIGKILL)


def _fine(ctx):
    return ctx.device_id


@pytest.mark.slow
@pytest.mark.pocl
def test_a_task_that_kills_every_worker_is_reported_failed(pocl):
    import cloudpickle
    import dask

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        runner = DaskRunner.local(1, [pocl_id()])
    failures, done = [], []
    try:
        kind = runner.slots()[0].kind
        runner.run([Task("die", _die, kind=kind), Task("fine", _fine, kind=kind)],
                   lambda t, o: done.append(o.value), failures.append)
    finally:
        runner.close()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert done == [pocl_id()]
    # the task queued behind the dying one was blamed too, tried again alone and ran; the dying one, alone, died
    assert len(failures) == 1 and failures[0].task.key == "die" and "died each time" in str(failures[0].error)


@pytest.mark.slow
@pytest.mark.pocl
def test_tune_on_a_local_cluster_measures_each_configuration_once(tmp_path, pocl):
    args = ("tune", "spmv_sell", "--space", "S=8,16;Nt=64,128", "--matrix", "poisson2d", "--size", "262144",
            "--cluster", "local:1", "--seconds", "0.1", "--json", "-o", tmp_path / "t")
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["measured"] == 4 and [row["status"] for row in got["rows"]] == ["ok"] * 4
    stored = read_records(tmp_path / "t" / "tune.jsonl")
    assert len(stored) == 4 and all(x["tune_device"].endswith(pocl_id()) for x in stored)
    r = run_cli(*args)
    assert r.returncode == 0 and "(4 stored)" in r.stderr and len(read_records(tmp_path / "t" / "tune.jsonl")) == 4


def test_cluster_addresses_are_checked_without_dask():
    from gpuprofiler.errors import UserError
    from gpuprofiler.measure.runners import check_address

    assert check_address("local") == (True, None)
    assert check_address("local:1") == (True, 1) and check_address("local:256") == (True, 256)
    assert check_address("tcp://10.0.0.1:8786") == (False, None) and check_address("tls://h:1") == (False, None)
    for bad in ("local:0", "local:257", "local:", "udp://h:1", "tcp:/h", "remote"):
        with pytest.raises(UserError, match="--cluster"):
            check_address(bad)
