"""Shared fixtures: the real PoCL device (no mocks), the test profiles, and running the CLI as a user would.

Markers (registered in pyproject.toml): ``pocl`` -- runs kernels on the PoCL device (set automatically for
tests that use the ``pocl`` fixture); ``cuda`` -- needs pycuda and an NVIDIA GPU; ``nvcc`` -- needs the CUDA
toolkit's compiler; ``slow`` -- takes more than about ten seconds (``pytest -m "not slow"`` skips them).
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


def pocl_id():
    """The first PoCL device that can compile kernels on this CPU (else the first PoCL device)."""
    from gpuprofiler.device import list_devices

    pocl = [d for d in list_devices() if d.backend == "opencl" and "portable" in d.platform.lower()]
    pocl.sort(key=lambda d: bool(d.extra.get("problem")))
    return pocl[0].id if pocl else None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "pocl" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.pocl)


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
