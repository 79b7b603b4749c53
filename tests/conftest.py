"""Shared fixtures: the real PoCL device (no mocks), and a helper to run the CLI as a user would."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"


def pocl_id():
    from gpuprofiler.backends import list_devices

    for d in list_devices():
        if d.backend == "opencl" and "portable" in d.platform.lower():
            return d.id
    return None


@pytest.fixture(scope="session")
def pocl():
    """An OpenCL backend on the PoCL CPU device."""
    from gpuprofiler.backends import open_backend

    device = pocl_id()
    if device is None:
        pytest.fail("the PoCL device is missing: pip install pocl-binary-distribution")
    with open_backend(device) as backend:
        yield backend


@pytest.fixture
def quick_policy():
    from gpuprofiler.timing import TimingPolicy

    return TimingPolicy(warmup=1, min_samples=5, budget_s=0.15)


def run_cli(*args, cwd=None, timeout=300, **kwargs):
    """Run ``python -m gpuprofiler ARGS`` in a subprocess and return the CompletedProcess."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "gpuprofiler", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, **kwargs)
