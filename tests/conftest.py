"""Shared fixtures: the real PoCL device (no mocks), the test profiles, and running the CLI as a user would.

Markers (registered in pyproject.toml): ``pocl`` -- runs kernels on the PoCL device (set automatically for
tests that use the ``pocl`` fixture); ``cuda`` -- needs pycuda and an NVIDIA GPU; ``nvcc`` -- needs the CUDA
toolkit's compiler; ``slow`` -- takes more than about ten seconds (left out unless ``--slow`` is given or an ``-m``
expression names them: ``pytest --slow`` runs everything, ``pytest -m slow`` only them).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
PTX_FIXTURES = FIXTURES / "ptx"
# copies of committed calibrations (see fixtures/profiles/README.md): tests never read results/
POCL_PROFILE = FIXTURES / "profiles" / "pocl.json"
H100_PROFILE = FIXTURES / "profiles" / "h100.json"

# a matrix-product spec with an empty kernel: the size, launch, arrays and declared work of a real one, for the
# laws and rules that read a spec but run nothing; ``extra`` adds top-level keys (small, target, size_multiple)
TOY_MATMUL = """
name = "mm"
kernel = "mm"
size = "n"
{extra}
[source]
opencl = "mm.cl"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[[args]]
name = "A"
dtype = "float32"
shape = ["n", "n"]

[[args]]
name = "C"
dtype = "float32"
shape = ["n", "n"]
output = true

[launch]
global = ["n", "n"]
local = [16, 16]

[work]
flops = "2*n*n*n"
bytes = "8*n*n"
"""


def toy_matmul(folder, extra=""):
    """:data:`TOY_MATMUL` written into ``folder`` and loaded."""
    from gpuprofiler.workloads.spec import load_spec

    (folder / "mm.cl").write_text("__kernel void mm(int n, __global float *A, __global float *C) {}")
    (folder / "mm.toml").write_text(TOY_MATMUL.format(extra=extra))
    return load_spec(folder / "mm.toml")


def pocl_id():
    """The first PoCL device that can compile kernels on this CPU (else the first PoCL device)."""
    from gpuprofiler.device import list_devices

    pocl = [d for d in list_devices() if d.backend == "opencl" and "portable" in d.platform.lower()]
    pocl.sort(key=lambda d: bool(d.extra.get("problem")))
    return pocl[0].id if pocl else None


FUZZ = Path(__file__).resolve().parent / "fuzz"


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="run the tests marked slow too (the default run, CI's, leaves them out; so does any -m "
                          "expression that does not name them)")


def pytest_collection_modifyitems(config, items):
    # the fuzz suite's longer budgets (its `slow` tests) run only when asked for, GPUPROFILER_FUZZ_LONG=1:
    # the default run (CI's) keeps the small budgets, about a minute
    long_fuzz = bool(os.environ.get("GPUPROFILER_FUZZ_LONG"))
    skip = pytest.mark.skip(reason="the long fuzz budget: set GPUPROFILER_FUZZ_LONG=1 to run it")
    for item in items:
        if "pocl" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.pocl)
        if not long_fuzz and item.get_closest_marker("slow") and FUZZ in Path(str(item.fspath)).parents:
            item.add_marker(skip)
    # the slow tests (each over about ten seconds) run with --slow or an -m expression that names them: the
    # default run stays near ten minutes on two cores
    if config.getoption("--slow") or "slow" in (config.getoption("-m") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(scope="session")
def pocl():
    """An OpenCL backend on the PoCL CPU device."""
    from gpuprofiler.device import open_backend

    device = pocl_id()
    if device is None:
        pytest.fail("the PoCL device is missing: pip install pocl-binary-distribution")
    with open_backend(device) as backend:
        yield backend


@pytest.fixture
def quick_policy():
    from gpuprofiler.measure.policy import TimingPolicy

    return TimingPolicy(warmup=1, min_samples=5, budget_s=0.15)


def run_cli(*args, cwd=None, timeout=300, **kwargs):
    """Run ``python -m gpuprofiler ARGS`` in a subprocess and return the CompletedProcess."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "gpuprofiler", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)
