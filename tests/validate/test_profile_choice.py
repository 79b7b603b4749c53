"""Which profile ``validate`` uses without ``--profile``: OUTDIR's from an earlier run, else the device's stored
one (copied into OUTDIR), else a calibration; ``--fresh`` never reuses OUTDIR's."""

import argparse
import json
import shutil
import types

import pytest
from conftest import POCL_PROFILE

from gpuprofiler.cli.validate import choose
from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.profile.file import load_profile

DEVICE = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d",
                    platform="Portable Computing Language")


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROFILER_RESULTS", str(tmp_path / "results"))
    calls = []

    def calibrate(backend, path, quick, progress):
        calls.append((path, quick))
        path.write_text(POCL_PROFILE.read_text())
        return load_profile(path)

    backend = types.SimpleNamespace(info=DEVICE)
    return tmp_path, backend, calibrate, calls


def args(**kw):
    return argparse.Namespace(**{"profile": None, "fresh": False, "quick": True, **kw})


def stored_profile(tmp_path, marker):
    path = tmp_path / "results" / DEVICE.slug / "profile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(POCL_PROFILE.read_text())
    data["host"] = marker
    path.write_text(json.dumps(data))
    return path


def test_none_stored_calibrates_into_outdir(world):
    tmp, backend, calibrate, calls = world
    profile, name = choose(args(), tmp / "out", backend, calibrate)
    assert calls == [(tmp / "out" / "profile.json", True)] and name == str(tmp / "out" / "profile.json")


def test_stored_profile_is_copied_and_then_reused(world):
    tmp, backend, calibrate, calls = world
    stored = stored_profile(tmp, "stored")
    profile, name = choose(args(), tmp / "out", backend, calibrate)
    assert calls == [] and profile.data["host"] == "stored" and name == f"{stored} (copied to {tmp / 'out' / 'profile.json'})"
    assert load_profile(tmp / "out" / "profile.json").data["host"] == "stored"
    stored_profile(tmp, "newer")  # a rerun resumes with the copy it started with
    profile, name = choose(args(), tmp / "out", backend, calibrate)
    assert profile.data["host"] == "stored" and name == str(tmp / "out" / "profile.json")
    profile, _ = choose(args(fresh=True), tmp / "out", backend, calibrate)  # --fresh takes the stored one again
    assert profile.data["host"] == "newer" and calls == []


def test_given_profile_wins(world):
    tmp, backend, calibrate, calls = world
    stored_profile(tmp, "stored")
    mine = tmp / "mine.json"
    shutil.copy(POCL_PROFILE, mine)
    profile, name = choose(args(profile=str(mine)), tmp / "out", backend, calibrate)
    assert name == str(mine) and profile.path == mine and calls == []
