"""Measured launches in a worker process: the same records as in one process, errors crossing as they are, nothing
sent while a size is timed, and a runtime that really crashes (a kernel writing terabytes out of bounds) becoming a
DeviceError while the records before it are kept."""

import shutil

import pytest
from conftest import FIXTURES, KERNELS

from gpuprofiler.errors import CheckError, DeviceError
from gpuprofiler.measure import engine
from gpuprofiler.workloads import isolated
from gpuprofiler.workloads.apps import load_app
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.kernel import measure_spec
from gpuprofiler.workloads.spec import load_spec

pytestmark = pytest.mark.pocl


@pytest.fixture(scope="module")
def worker():
    from conftest import pocl_id

    w = isolated.DeviceWorker(pocl_id())
    yield w
    w.close()


def test_a_spec_measured_in_the_worker_gives_the_same_records(pocl, worker, quick_policy):
    spec = load_spec(KERNELS / "vadd.toml")
    said, sizes, stored = [], [], []
    got = worker.measure(spec, [4096, 8192], quick_policy, check=True, on_record=stored.append,
                         progress=said.append, on_size=lambda size, recs: sizes.append((size, len(recs))))
    here = measure_spec(pocl, spec, [4096], quick_policy)
    assert [r["size"] for r in got] == [4096, 8192] and stored == got and sizes == [(4096, 1), (8192, 1)]
    assert set(got[0]) == set(here[0]) and all(r["checked"] and r["samples"] >= 5 for r in got)
    assert any("timing sizes 4096, 8192" in s for s in said)


def test_an_app_measured_in_the_worker(worker, quick_policy):
    sizes = []
    got = worker.measure(load_app(resolve("cg")), [4096], quick_policy,
                         on_size=lambda size, recs: sizes.append((size, len(recs))))
    assert {"spmv", "axpy"} <= {r["phase"] for r in got} and sizes == [(4096, len(got))]


def test_errors_cross_the_pipe_as_they_are(worker, quick_policy, tmp_path):
    for f in KERNELS.glob("vadd.*"):
        shutil.copy(f, tmp_path / f.name)
    cl = tmp_path / "vadd.cl"
    cl.write_text(cl.read_text().replace("a[i] + b[i]", "a[i] - b[i]"))
    with pytest.raises(CheckError, match="differs"):
        worker.measure(load_spec(tmp_path / "vadd.toml"), [4096], quick_policy)
    assert worker.alive  # and the worker goes on
    [rec] = worker.measure(load_spec(KERNELS / "copy.toml"), [4096], quick_policy, check=False)
    assert rec["kernel"] == "copy"


class Conn:
    """The worker's end of the pipe, recording what is sent and whether the engine was timing then."""

    def __init__(self):
        self.sent, self.timing = [], False

    def send(self, message):
        assert not self.timing, f"sent {message[0]!r} while a size was being timed"
        self.sent.append(message[0])


def test_nothing_crosses_the_pipe_while_a_size_is_timed(pocl, quick_policy, monkeypatch):
    conn = Conn()
    plain = engine.Engine.interleave

    def watched(self, runs, budget_s=None):
        conn.timing = True
        try:
            return plain(self, runs, budget_s)
        finally:
            conn.timing = False

    monkeypatch.setattr(engine.Engine, "interleave", watched)
    request = {"kind": "spec", "spec": load_spec(KERNELS / "vadd.toml"), "name": "vadd", "overrides": None,
               "sizes": [4096, 8192], "policy": quick_policy, "check": True, "interleave": True}
    isolated._run(conn, pocl, request)
    assert conn.sent.count("record") == 2 and "stage" in conn.sent and "progress" in conn.sent


def test_a_crashing_runtime_is_a_device_error_and_the_records_before_it_stay(quick_policy):
    from conftest import pocl_id

    w = isolated.DeviceWorker(pocl_id())
    stored = []
    with pytest.raises(DeviceError) as info:
        w.measure(load_spec(FIXTURES / "bounds" / "wild.toml"), [1024, 2048], quick_policy, check=False,
                  interleave=False, on_record=stored.append)
    assert ("the device runtime crashed while running wild at size 2048 (likely an out-of-bounds access)"
            in str(info.value)), info.value
    assert "signal SIG" in str(info.value)
    assert [r["size"] for r in stored] == [1024] and stored[0]["samples"] >= 5
    assert not w.alive
    w.close()


def test_isolation_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(isolated.ENV, "off")
    assert not isolated.enabled()
    monkeypatch.setenv(isolated.ENV, "on")
    assert isolated.enabled()
