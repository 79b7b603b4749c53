"""The package as installed: cheap to import (no GPU API until a backend is opened), and no top-level
``microbench`` import (a different PyPI project owns that name)."""

import importlib.util
import os
import subprocess
import sys

import pytest

STAGES = ("device", "measure", "kernelcode", "workloads", "profile", "microbench", "calibrate", "models", "validate", "report",
          "cli")


def test_import_loads_no_gpu_api():
    code = ("import sys, importlib; [importlib.import_module('gpuprofiler.' + s) for s in %r]; "
            "import gpuprofiler.models.registry, gpuprofiler.workloads.spec, gpuprofiler.cli.main; "
            "bad = [m for m in ('pyopencl', 'pycuda') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)") % (STAGES,)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cuda_backend_missing_pycuda_is_a_user_error_only_when_used():
    from gpuprofiler.device import open_backend
    from gpuprofiler.errors import UserError

    if importlib.util.find_spec("pycuda") is not None:
        pytest.skip("pycuda present: covered by tests/device/test_cuda.py")
    with pytest.raises(UserError, match="pycuda"):
        open_backend("cuda:0")


def test_installed_package_has_microbench_inside_and_no_top_level_microbench(tmp_path):
    """Run outside the source tree, so only what pip installed is importable."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([sys.executable, "-c", "import gpuprofiler"], cwd=tmp_path, env=env, capture_output=True)
    if probe.returncode != 0:
        pytest.skip("gpuprofiler is not installed in this interpreter (run from a source tree only)")
    done = subprocess.run([sys.executable, "-c", "import gpuprofiler.microbench.latency, gpuprofiler.kernels.apps"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-c", "import microbench"], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert done.returncode != 0 and "No module named 'microbench'" in done.stderr
