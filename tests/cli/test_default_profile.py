"""Without ``--profile``, the model commands use the device's stored profile and say which file; with none
stored they say how to make one."""

import json
import os
import shutil

import pytest
from conftest import POCL_PROFILE, pocl_id, run_cli

pytestmark = pytest.mark.pocl


@pytest.fixture
def stored(tmp_path):
    """A results folder holding a profile for the PoCL device (the committed PoCL calibration's figures)."""
    from gpuprofiler.device import list_devices

    device = next(d for d in list_devices() if d.id == pocl_id())
    path = tmp_path / "results" / device.slug / "profile.json"
    path.parent.mkdir(parents=True)
    shutil.copy(POCL_PROFILE, path)
    return device, path


def cli(*args, cwd):
    return run_cli(*args, "--device", pocl_id(), cwd=cwd)


def test_maxplus_and_pipeline_use_the_stored_profile_and_say_so(tmp_path, stored):
    device, path = stored
    done = cli("maxplus", "vadd", "--size", "1048576", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"using the stored profile of {device.id}" in done.stderr and str(path.relative_to(tmp_path)) in done.stderr
    out = json.loads(done.stdout)
    assert out["profile"] == str(path.relative_to(tmp_path)) and out["predicted_s"] > 0
    done = cli("pipeline", "vadd", "--size", "65536", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"using the stored profile of {device.id}" in done.stderr
    assert json.loads(done.stdout)["profile"] == str(path.relative_to(tmp_path))


def test_results_folder_from_the_environment(tmp_path, stored):
    _, path = stored
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env_before = os.environ.get("GPUPROFILER_RESULTS")
    os.environ["GPUPROFILER_RESULTS"] = str(tmp_path / "results")
    try:
        done = cli("maxplus", "vadd", "--size", "4096", "--json", cwd=elsewhere)
    finally:
        if env_before is None:
            os.environ.pop("GPUPROFILER_RESULTS")
        else:
            os.environ["GPUPROFILER_RESULTS"] = env_before
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["profile"] == str(path)


def test_without_a_stored_profile_they_say_how_to_make_one(tmp_path):
    for args in (("maxplus", "vadd", "--size", "4096"), ("pipeline", "vadd", "--size", "4096")):
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "no stored profile" in done.stderr and f"gpuprofiler calibrate --device {pocl_id()}" in done.stderr


@pytest.mark.slow
def test_extrapolate_warns_from_the_stored_profile(tmp_path, stored):
    device, path = stored
    # 12..48 MiB of arrays measured, 384 MiB predicted: past the last-level cache as streams see it (~181 MiB)
    done = cli("extrapolate", "vadd", "--small", "1048576,1572864,2097152,3145728,4194304", "--target", "33554432",
               "--budget", "0.1", "--json", "--no-extrap", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"using the stored profile of {device.id}" in done.stderr
    (rec,) = json.loads(done.stdout)
    assert any("last-level cache as streams see it" in w for w in rec["warnings"])
    assert rec["small_sizes"] == [1048576, 1572864, 2097152, 3145728, 4194304]  # the sizes asked for
    bare = tmp_path / "bare"
    bare.mkdir()
    done = cli("extrapolate", "vadd", "--small", "1048576,1572864,2097152,3145728", "--target", "33554432",
               "--budget", "0.1", "--json", "--no-extrap", cwd=bare)
    assert done.returncode == 0, done.stderr
    assert "no stored profile" in done.stderr and "gpuprofiler calibrate" in done.stderr
    warnings = json.loads(done.stdout)[0]["warnings"]
    assert any(w.startswith("no hardware profile of this device") for w in warnings)  # says what it cannot see
    assert not any("cache" in w and "exceeds" in w for w in warnings)
