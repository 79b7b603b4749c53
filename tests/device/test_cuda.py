"""CUDA backend on a real NVIDIA GPU; skipped where pycuda or a CUDA device is missing."""

import importlib.util

import pytest

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(importlib.util.find_spec("pycuda") is None, reason="pycuda is not installed")]


@pytest.fixture(scope="module")
def cuda_backend():
    from gpuprofiler.device import list_devices, open_backend

    ids = [d.id for d in list_devices() if d.backend == "cuda"]
    if not ids:
        pytest.skip("no CUDA device")
    with open_backend(ids[0]) as backend:
        yield backend


@pytest.mark.parametrize("name", ["vadd", "matmul_tiled", "reduction", "spmv_csr"])
def test_cuda_specs_check_and_time(cuda_backend, quick_policy, name):
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.kernel import measure_spec
    from gpuprofiler.workloads.spec import load_spec

    spec = load_spec(resolve(name))
    [rec] = measure_spec(cuda_backend, spec, [spec.small[-1]], quick_policy)
    assert rec["checked"] and rec["median_s"] > 0 and rec["samples"] >= 5


def test_cuda_cg_app(cuda_backend, quick_policy):
    from gpuprofiler.workloads.apps import load_app, measure_app
    from gpuprofiler.workloads.builtin import resolve

    records = measure_app(cuda_backend, load_app(resolve("cg")), [65536], quick_policy)
    assert {"spmv", "dot_partial", "axpy", "xpay"} <= {r["phase"] for r in records}
    assert all(r["checked"] for r in records)


def test_cuda_compile_error(cuda_backend):
    from gpuprofiler.errors import UserError

    with pytest.raises(UserError, match="CUDA compile error"):
        cuda_backend.compile('extern "C" __global__ void k() { undefined_name = 1; }', "k")
