"""Which profile ``validate`` uses without ``--profile``: OUTDIR's from an earlier run, else the device's stored
one (copied into OUTDIR) unless methods changed since it was measured, else a calibration; ``--fresh`` never
reuses OUTDIR's."""

import argparse
import json
import shutil
import types

import pytest
from conftest import POCL_PROFILE

from gpuprofiler.cli.validate import choose
from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.profile.file import load_profile, method_versions_present, superseded

DEVICE = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d",
                    platform="Portable Computing Language")


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROFILER_RESULTS", str(tmp_path / "results"))
    calls = []

    def calibrate(path, quick, only=(), resume=None):
        calls.append((path, quick))
        path.write_text(POCL_PROFILE.read_text())
        return load_profile(path)

    backend = types.SimpleNamespace(info=DEVICE)
    return tmp_path, backend, calibrate, calls


def args(**kw):
    return argparse.Namespace(**{"profile": None, "fresh": False, "quick": True, **kw})


def stored_profile(tmp_path, marker, current=True):
    """The test profile stored for DEVICE; ``current``: as this gpuprofiler's calibration writes it (every figure
    by today's method), else as calibrated before some methods changed (the fixture as it is)."""
    path = tmp_path / "results" / DEVICE.slug / "profile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(POCL_PROFILE.read_text())
    data["host"] = marker
    if current:
        data["method_versions"] = method_versions_present(data)
    path.write_text(json.dumps(data))
    return path


def test_none_stored_calibrates_into_outdir(world):
    tmp, backend, calibrate, calls = world
    profile, name = choose(args(), tmp / "out", backend.info, calibrate)
    assert calls == [(tmp / "out" / "profile.json", True)] and name == str(tmp / "out" / "profile.json")


def test_stored_profile_is_copied_and_then_reused(world):
    tmp, backend, calibrate, calls = world
    stored = stored_profile(tmp, "stored")
    profile, name = choose(args(), tmp / "out", backend.info, calibrate)
    assert calls == [] and profile.data["host"] == "stored" and name == f"{stored} (copied to {tmp / 'out' / 'profile.json'})"
    assert load_profile(tmp / "out" / "profile.json").data["host"] == "stored"
    stored_profile(tmp, "newer")  # a rerun resumes with the copy it started with
    profile, name = choose(args(), tmp / "out", backend.info, calibrate)
    assert profile.data["host"] == "stored" and name == str(tmp / "out" / "profile.json")
    profile, _ = choose(args(fresh=True), tmp / "out", backend.info, calibrate)  # --fresh takes the stored one again
    assert profile.data["host"] == "newer" and calls == []


def test_a_stored_profile_of_replaced_methods_is_not_validated_against(world, capsys):
    """The fixture was calibrated before the barrier, latency-curve and cache methods changed: validate measures
    the device afresh rather than judge today's models on figures they no longer mean, and leaves it stored."""
    tmp, backend, calibrate, calls = world
    stored = stored_profile(tmp, "stored", current=False)
    stale = superseded(json.loads(stored.read_text()))
    assert "instructions.barrier" in stale and "latency_curve" in stale
    profile, name = choose(args(), tmp / "out", backend.info, calibrate)
    err = capsys.readouterr().err
    assert calls == [(tmp / "out" / "profile.json", True)] and name == str(tmp / "out" / "profile.json")
    assert "methods since replaced" in err and "instructions.barrier" in err and profile.data.get("host") != "stored"
    assert json.loads(stored.read_text())["host"] == "stored"


def test_other_commands_say_their_stored_profile_is_stale(world):
    from gpuprofiler.profile.locate import choose_profile

    tmp, _, _, _ = world
    stored_profile(tmp, "stored", current=False)
    choice = choose_profile(None, DEVICE)
    assert choice.profile.data["host"] == "stored"
    assert "methods since replaced" in choice.message and f"gpuprofiler calibrate --device {DEVICE.id}" in choice.message
    stored_profile(tmp, "stored")
    assert "replaced" not in choose_profile(None, DEVICE).message


def test_given_profile_wins(world):
    tmp, backend, calibrate, calls = world
    stored_profile(tmp, "stored")
    mine = tmp / "mine.json"
    shutil.copy(POCL_PROFILE, mine)
    profile, name = choose(args(profile=str(mine)), tmp / "out", backend.info, calibrate)
    assert name == str(mine) and profile.path == mine and calls == []


def partial_profile(path, drop=("transfer", "instructions"), marker=True):
    """The test profile as a calibration killed before ``drop`` leaves it."""
    from gpuprofiler.calibrate.driver import SECTIONS

    data = json.loads(POCL_PROFILE.read_text())
    for section in drop:
        data.pop(section, None)
    data["method_versions"] = method_versions_present(data)
    if marker:
        data["sections_done"] = [s for s in SECTIONS if s not in drop]
        data["complete"] = False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def resuming(world):
    """A calibrate that records what it was asked to resume and fills those sections in."""
    tmp, backend, _, _ = world
    calls = []

    def calibrate(path, quick, only=(), resume=None):
        calls.append((list(only), resume is not None))
        data, full = dict(resume.data), json.loads(POCL_PROFILE.read_text())
        for section in only:
            data[section] = full[section]
        data["sections_done"], data["complete"] = list(data["sections"]), True
        path.write_text(json.dumps(data))
        return load_profile(path)

    return tmp, backend, calibrate, calls


@pytest.mark.parametrize("marker", [True, False], ids=["marked", "older-profile"])
def test_a_partial_profile_in_outdir_is_completed_not_reused_silently(resuming, capsys, marker):
    tmp, backend, calibrate, calls = resuming
    kept = partial_profile(tmp / "out" / "profile.json", marker=marker)
    profile, name = choose(args(), tmp / "out", backend.info, calibrate)
    err = capsys.readouterr().err
    assert calls == [(["transfer", "instructions"], True)] and name == str(kept)
    assert "incomplete" in err and "transfer, instructions missing" in err and "reusing the profile" not in err
    assert profile.data["transfer"] == json.loads(POCL_PROFILE.read_text())["transfer"]
    assert profile.data["launch"] == json.loads(POCL_PROFILE.read_text())["launch"]  # the rest kept
    choose(args(), tmp / "out", backend.info, calibrate)  # complete now: reused as it is
    assert len(calls) == 1 and "reusing the profile" in capsys.readouterr().err


def test_a_partial_stored_profile_is_completed_in_the_copy(resuming, capsys):
    tmp, backend, calibrate, calls = resuming
    stored = partial_profile(tmp / "results" / DEVICE.slug / "profile.json", drop=("bandwidth",))
    choose(args(), tmp / "out", backend.info, calibrate)
    assert calls == [(["bandwidth"], True)] and "incomplete" in capsys.readouterr().err
    assert "bandwidth" not in json.loads(stored.read_text())  # the stored one is left as it is


def test_a_partial_given_profile_is_used_with_a_warning(resuming, capsys):
    tmp, backend, calibrate, calls = resuming
    mine = partial_profile(tmp / "mine.json", drop=("latency",))
    profile, name = choose(args(profile=str(mine)), tmp / "out", backend.info, calibrate)
    err = capsys.readouterr().err
    assert calls == [] and name == str(mine) and "incomplete" in err and f"calibrate --resume -o {mine}" in err
