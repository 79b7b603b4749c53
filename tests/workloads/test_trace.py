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
