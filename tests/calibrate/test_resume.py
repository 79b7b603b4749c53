"""A calibration says how far it got: a profile killed between sections is marked incomplete, names the sections
it lacks, and is completed by measuring only those (on the real PoCL device)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import POCL_PROFILE, REPO, run_cli

from gpuprofiler.calibrate.driver import SECTIONS, calibrate, missing_sections, sections_done
from gpuprofiler.profile.file import load_profile

pytestmark = pytest.mark.pocl


def test_sections_of_a_profile_with_and_without_the_marker():
    data = json.loads(POCL_PROFILE.read_text())
    assert sections_done(data) == list(SECTIONS) and missing_sections(data) == []  # older profile: its figures
    data.pop("bandwidth")
    assert missing_sections(data) == ["bandwidth"]
    data["section_errors"] = {"bandwidth": "failed"}  # a section that ran and failed is done
    assert missing_sections(data) == []
    marked = {"sections": ["launch", "transfer"], "sections_done": ["launch"], "launch": {}, "transfer": {}}
    assert missing_sections(marked) == ["transfer"]  # the marker wins over what is in the file


def test_a_killed_calibration_is_marked_partial_and_resumed(pocl, tmp_path):
    out = tmp_path / "profile.json"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    err = tmp_path / "stderr.txt"
    with open(err, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "gpuprofiler", "calibrate", "--device", pocl.info.id, "--quick",
                                 "--only", "launch,transfer", "-o", str(out)], env=env, cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=fh)
    try:
        end = time.monotonic() + 120
        while "launch: done" not in err.read_text():
            assert proc.poll() is None and time.monotonic() < end, err.read_text()
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    partial = load_profile(out)
    assert partial.data["complete"] is False and partial.data["sections_done"] == ["launch"]
    assert missing_sections(partial.data) == ["transfer"] and "transfer" not in partial.data
    launch = partial.data["launch"]
    done = run_cli("calibrate", "--device", pocl.info.id, "--quick", "--resume", "-o", out, cwd=tmp_path)
    assert done.returncode == 0 and f"resuming {out}: measuring transfer" in done.stderr, done.stderr
    again = load_profile(out)
    assert again.data["complete"] is True and missing_sections(again.data) == []
    assert again.data["sections_done"] == ["launch", "transfer"] and again.data["transfer"]
    assert again.data["launch"] == launch and again.data["clock"] == partial.data["clock"]  # kept, not measured again
    assert [r["sections"] for r in again.data["resumed"]] == [["transfer"]]


def test_resume_in_process(pocl, tmp_path):
    out = tmp_path / "profile.json"
    first = calibrate(pocl, out, quick=True, only=("transfer",))
    assert first.data["complete"] is True and first.data["sections_done"] == ["transfer"]
    data = dict(first.data, sections=["transfer", "launch"], complete=False)
    out.write_text(json.dumps(data))
    done = calibrate(pocl, out, quick=True, only=missing_sections(data), resume=load_profile(out))
    assert done.data["complete"] is True and done.data["sections_done"] == ["launch", "transfer"]
    assert done.data["transfer"] == json.loads(json.dumps(first.data["transfer"]))


def test_resume_refuses_another_devices_profile(tmp_path):
    mine = tmp_path / "other.json"
    data = json.loads(POCL_PROFILE.read_text())
    data["device"]["name"] = "Some Other Device"
    mine.write_text(json.dumps(data))
    done = run_cli("calibrate", "--quick", "--resume", "-o", mine, cwd=tmp_path)
    assert done.returncode == 2 and "is a profile of Some Other Device" in done.stderr, done.stderr
