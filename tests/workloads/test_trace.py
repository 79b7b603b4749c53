"""Dry runs of programs: the launches an app makes without a device, and static models summed per phase."""

from collections import Counter

import numpy as np
import pytest

from gpuprofiler.device.dry import DryBackend
from gpuprofiler.errors import UserError
from gpuprofiler.models.base import Prediction
from gpuprofiler.models.programs import COPIES_NOTE, bind, predict_program
from gpuprofiler.workloads.apps import load_app
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.trace import trace_app


@pytest.mark.parametrize("kind", ["opencl", "cuda"])
def test_cg_launches_every_kernel_of_every_iteration(kind):
    app = load_app(resolve("cg"))
    it = app.module.ITERATIONS
    launches = trace_app(app, 4096, kind)
    counts = Counter((launch.phase, launch.kernel.name) for launch in launches)
    assert counts == {("spmv", "spmv"): it, ("dot_partial", "dot_partial"): 2 * it, ("axpy", "axpy"): 2 * it,
                      ("xpay", "xpay"): it}
    suffix = ".cl" if kind == "opencl" else ".cu"
    assert all(launch.kernel.path is not None and launch.kernel.path.suffix == suffix for launch in launches)
    spmv = next(launch for launch in launches if launch.phase == "spmv")
    # the CSR row pointers the program copied in are there for a model to read
    rowptr = [a.data for a in spmv.args if isinstance(getattr(a, "data", None), np.ndarray)
              and a.data.dtype == np.int32 and a.data.size == 4097]
    assert rowptr and rowptr[0][0] == 0 and rowptr[0][-1] == 5 * 4096 - 2 * (1 + int(np.sqrt(4096)))


def test_jacobi_launches():
    launches = trace_app(load_app(resolve("jacobi")), 4096, "opencl")
    counts = Counter(launch.phase for launch in launches)
    assert counts == {"jacobi_step": 20, "diff_partial": 2}


def test_dry_backend_reads_back_what_was_copied_and_ones_otherwise():
    backend = DryBackend("opencl")
    data = np.arange(8, dtype=np.float32)
    buf, event = backend.to_device(data)
    out = np.zeros(8, np.float32)
    backend.from_device(buf, out)
    assert (out == data).all() and event.seconds() == 0.0
    backend.from_device(backend.alloc(32), out)
    assert (out == 1).all()
    assert backend.launches == []


def test_bind_names_scalars_buffers_and_integer_contents():
    backend = DryBackend("opencl")
    ints, _ = backend.to_device(np.array([0, 2, 5], np.int32))
    floats, _ = backend.to_device(np.ones(4, np.float32))
    b = bind(["rowptr", "x", "n", "alpha"], [ints, floats, np.int32(3), np.float32(0.5)])
    assert b.buffers == {"rowptr": 12, "x": 16} and b.bytes == 28
    assert b.scalars == {"n": 3, "alpha": 0.5}
    read, dtype = b.contents["rowptr"]
    assert dtype == np.int32 and list(read(np.array([0, 2, 9, -1]))) == [0, 5, 5, 0]  # clipped into the buffer
    assert "x" not in b.contents
    with pytest.raises(UserError, match="2 parameters and the launch passes 1"):
        bind(["a", "b"], [ints])
    with pytest.raises(UserError, match="neither a scalar nor a buffer"):
        bind(["a"], ["text"])


def test_program_prediction_sums_phases_and_predicts_each_distinct_launch_once():
    app = load_app(resolve("cg"))
    seen = []

    def per_launch(launch):
        seen.append(launch)
        t = 1e-6 * (1 + len(launch.kernel.name))
        return Prediction(4096, t, 0.5 * t, 2 * t, "toy", "toy", {"features": {"x": 1.0}})

    p = predict_program(app, 4096, "opencl", "toy", per_launch)
    phases = p.details["phases"]
    assert set(phases) == {"spmv", "dot_partial", "axpy", "xpay"}  # no copy phase
    for name, ph in phases.items():
        one = 1e-6 * (1 + len(name))
        assert ph["predicted_s"] == pytest.approx(ph["calls"] * one)
        assert ph["interval_s"] == pytest.approx([ph["calls"] * one / 2, ph["calls"] * one * 2])
    assert p.seconds == pytest.approx(sum(ph["predicted_s"] for ph in phases.values()))
    assert p.details["launches"] == 120 and len(seen) == p.details["distinct_launches"] < 120
    assert COPIES_NOTE in p.details["notes"]
    assert all(ph["features"] == {"x": pytest.approx(1.0)} and len(ph["kernel_code"]) == 16 for ph in phases.values())
    assert len({ph["kernel_code"] for ph in phases.values()}) == 4


def test_a_phase_of_several_kernels_weights_their_features_by_time():
    from gpuprofiler.models.programs import _mean_features

    assert _mean_features([(1.0, {"a": 0.0, "b": 1.0}), (3.0, {"a": 1.0})]) == {"a": 0.75}
    assert _mean_features([(0.0, {"a": 2.0}), (0.0, {"a": 4.0})]) == {"a": 3.0}
    assert _mean_features([(1.0, {"a": 1.0}), (1.0, None)]) is None


def test_each_launch_keeps_its_buffers_contents_at_launch_time():
    backend = DryBackend("opencl")
    host = np.array([0, 1, 2], np.int32)
    buf, _ = backend.to_device(host)
    host[1] = 99  # a host edit after the copy does not reach the device
    kernel = backend.compile("__kernel void k(__global const int *p) {}", "k")
    backend.launch(kernel, (2,), None, [buf])
    backend.to_device(np.array([0, 64, 128], np.int32), buf)
    backend.launch(kernel, (2,), None, [buf])
    first, second = (launch.args[0].data for launch in backend.launches)
    assert list(first) == [0, 1, 2] and list(second) == [0, 64, 128]


def test_launches_that_differ_only_in_buffer_contents_are_predicted_apart(tmp_path):
    (tmp_path / "rows.cl").write_text(
        "__kernel void rows(int n, __global const int *rowptr, __global float *y) {\n"
        "  int i = get_global_id(0); float s = 0.0f;\n"
        "  for (int k = rowptr[i]; k < rowptr[i + 1]; ++k) s += 1.0f;\n  y[i] = s;\n}\n")
    (tmp_path / "two.py").write_text(
        "import numpy as np\nNAME = 'two'\nSMALL = [64, 128]\nTARGET = [256]\n"
        "def run(ctx, n):\n"
        "    k = ctx.compile(ctx.source('rows'), 'rows')\n"
        "    d_rows = ctx.to_device(np.arange(n + 1, dtype=np.int32))\n"
        "    y = ctx.empty(n, np.float32)\n"
        "    with ctx.region('short'):\n"
        "        ctx.launch(k, (n,), (64,), np.int32(n), d_rows, y)\n"
        "    ctx.to_device(64 * np.arange(n + 1, dtype=np.int32), d_rows)\n"
        "    with ctx.region('long'):\n"
        "        ctx.launch(k, (n,), (64,), np.int32(n), d_rows, y)\n"
        "    return {}\n")
    seen = []

    def per_launch(launch):
        rowptr = next(a.data for a in launch.args if isinstance(getattr(a, "data", None), np.ndarray))
        seen.append(int(rowptr[1] - rowptr[0]))
        return Prediction(64, 1e-6 * seen[-1], 1e-6, 1e-4, "toy")

    p = predict_program(load_app(tmp_path / "two.py"), 64, "opencl", "toy", per_launch)
    assert seen == [1, 64] and p.details["distinct_launches"] == 2
    assert p.details["phases"]["long"]["predicted_s"] == pytest.approx(64 * p.details["phases"]["short"]["predicted_s"])
