"""``gpuprofiler validate`` on the real PoCL device: files and columns, a user's suite folder, resuming."""

import csv
import json
import math
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import KERNELS, POCL_PROFILE, REPO, pocl_id, run_cli

from gpuprofiler.models.fractal.regimes import recommended_small
from gpuprofiler.profile.file import load_profile
from gpuprofiler.validate.suite import summarize
from gpuprofiler.workloads.spec import load_spec

PROFILE = POCL_PROFILE

SPEC = """\
name = "{name}"
description = "written from the README's spec documentation"
kernel = "vadd"
size = "n"
small = [65536, 98304, 131072, 196608, 262144]
target = [{target}]

[source]
opencl = "vadd.cl"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[[args]]
name = "a"
dtype = "float32"
shape = "n"
init = "random"

[[args]]
name = "b"
dtype = "float32"
shape = "n"
init = "random"

[[args]]
name = "c"
dtype = "float32"
shape = "n"
init = "zeros"
output = true

[launch]
global = ["n"]
local = [64]

[work]
bytes = "12*n"

[[check]]
got = "c"
expect = "a + b"
"""

pytestmark = pytest.mark.pocl



def make_suite(folder, names=("myvadd",), target=2097152):
    folder.mkdir()
    shutil.copy(KERNELS / "vadd.cl", folder / "vadd.cl")
    for name in names:
        (folder / f"{name}.toml").write_text(SPEC.format(name=name, target=target))
    return folder


def args(suite, out, spec_sizes=True):
    return ["validate", "--suite", suite, "--device", pocl_id(), "--profile", PROFILE, "--quick",
            *(["--spec-sizes"] if spec_sizes else []), "-o", out]


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_user_suite_writes_report_with_recomputable_errors(tmp_path, pocl):
    suite = make_suite(tmp_path / "suite")
    r = run_cli(*args(suite, tmp_path / "out", spec_sizes=False))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    # by default the small sizes are those extrapolate recommends from the profile, not the spec's list
    spec = load_spec(suite / "myvadd.toml")
    small, _, how = recommended_small(spec, spec.target, load_profile(PROFILE))
    measured = sorted({json.loads(x)["size"] for x in (out / "measurements.jsonl").read_text().splitlines()})
    assert how == "hardware" and measured == sorted(small + spec.target) and small != spec.small
    baselines = read_csv(out / "baselines.csv")
    assert [b["law"] for b in baselines][:2] == ["chosen", "fractal"] and "extrapolation against its baselines" in \
        (out / "report.md").read_text()
    rows = read_csv(out / "predictions.csv")
    assert list(rows[0]) == ["kernel", "size", "model", "predicted_s", "measured_s", "measured_median_s",
                             "measured_spread", "measured_visit_spread", "rel_error",
                             "interval_low_s", "interval_high_s", "model_interval_low_s", "model_interval_high_s",
                             "calibrated_low_s", "calibrated_high_s", "evidence_size", "evidence_log_error",
                             "loko_corrected_s", "loko_rel_error", "family", "crossing", "device_kind", "device_name",
                             "detail"]
    assert all(float(row["measured_spread"]) >= 1.0 and float(row["measured_visit_spread"]) >= 1.0 for row in rows)
    assert "(visits " in (out / "report.md").read_text()
    assert {r["model"] for r in rows} == {"fractal", "maxplus"}  # no pipeline on OpenCL
    for row in rows:
        p, m = float(row["predicted_s"]), float(row["measured_s"])
        assert float(row["rel_error"]) == pytest.approx((p - m) / m, rel=1e-9)
        assert m > 0 and p > 0
        if row["model"] == "maxplus":  # a static model: its band, and the error at the sweep's largest size
            assert int(row["evidence_size"]) == max(small)
            assert float(row["interval_low_s"]) <= float(row["calibrated_low_s"]) <= p
            assert p <= float(row["calibrated_high_s"]) <= float(row["interval_high_s"])
    summary = read_csv(out / "summary.csv")
    assert {s["model"] for s in summary} == {"fractal", "maxplus"}
    assert {"cases", "mape", "median_abs_error", "max_abs_error", "inside_interval",
            "median_interval_width", "inside_calibrated", "median_calibrated_width"} <= set(summary[0])
    text = (out / "report.md").read_text()
    assert "plots/predicted_vs_measured.png" in text and (out / "plots" / "errors.png").stat().st_size > 0
    assert "pipeline: not run, it models NVIDIA GPUs" in text and "every measurement taken by this run" in text
    assert f"[1/{3 * len(measured)}]" in r.stderr and "left" in r.stderr and "(visit 3 of 3)" in r.stderr


@pytest.mark.slow
def test_killed_run_resumes_without_repeating(tmp_path, pocl):
    suite = make_suite(tmp_path / "suite", names=("one", "two"), target=4194304)
    out = tmp_path / "out"
    env_cmd = [sys.executable, "-m", "gpuprofiler", *map(str, args(suite, out))]
    proc = subprocess.Popen(env_cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    log = out / "measurements.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    before = [json.loads(x) for x in log.read_text().splitlines()]
    assert 3 <= len(before) < 36, "the run was not stopped midway"
    r = run_cli(*args(suite, out))
    assert r.returncode == 0, r.stderr
    after = [json.loads(x) for x in log.read_text().splitlines()]
    keys = [(x["validate_digest"], x["size"], x["validate_visit"]) for x in after]
    assert len(keys) == len(set(keys)) == 36  # 2 items x 6 sizes x 3 visits, none measured twice
    assert [x["checked"] for x in after] == [x["validate_visit"] == 0 for x in after]  # checked on the first visit
    first = [x["validate_digest"] for x in after if x["validate_visit"] == 0]
    assert [x["validate_digest"] for x in after if x["validate_visit"] == 2][-6:] == first[-6:]  # items in turn
    assert after[:len(before)] == before
    assert f"reusing {len(before)} finished measurement(s)" in r.stderr


def test_bad_suite_and_models_exit_cleanly(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run_cli("validate", "--suite", tmp_path / "empty", "-o", tmp_path / "o")
    assert r.returncode == 2 and "no kernel specs" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("validate", "--models", "fractal,astrology", "-o", tmp_path / "o")
    assert r.returncode == 2 and "astrology" in r.stderr


def test_summary_statistics():
    rows = [{"model": "m", "rel_error": e, "measured_s": 1.0, "interval_low_s": lo, "interval_high_s": hi}
            for e, lo, hi in ((0.1, 0.5, 1.5), (-0.3, 1.1, 2.0), (0.5, math.nan, math.nan))]
    (s,) = summarize(rows)
    assert s["cases"] == 3 and s["mape"] == pytest.approx(0.3) and s["median_abs_error"] == pytest.approx(0.3)
    assert s["max_abs_error"] == pytest.approx(0.5) and s["inside_interval"] == 0.5 and s["cases_with_interval"] == 2
    assert s["median_interval_width"] == pytest.approx((3.0 + 2.0 / 1.1) / 2)  # hi/lo: 3 and 1.82
