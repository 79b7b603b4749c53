import subprocess
import sys


def test_import_loads_no_gpu_api():
    code = ("import sys, gpuprofiler, gpuprofiler.cli, gpuprofiler.spec, gpuprofiler.backends; "
            "bad = [m for m in ('pyopencl', 'pycuda') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cuda_backend_missing_pycuda_is_a_user_error_only_when_used():
    import importlib.util

    from gpuprofiler.backends import open_backend
    from gpuprofiler.errors import UserError

    if importlib.util.find_spec("pycuda") is not None:
        return  # pycuda present: covered by test_cuda.py
    try:
        open_backend("cuda:0")
    except UserError as exc:
        assert "pycuda" in str(exc)
    else:
        raise AssertionError("cuda:0 without pycuda must be refused")
