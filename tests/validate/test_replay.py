"""``validate --replay``: stored measurements judged by the models without a device (no OpenCL or CUDA
module can even be imported in these runs)."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, H100_PROFILE, POCL_PROFILE, REPO

from gpuprofiler.errors import UserError

POCL_LOG = FIXTURES / "replay" / "measurements.jsonl"
H100_LOG = FIXTURES / "replay" / "h100_subset.jsonl"
NO_DEVICE = ("import sys; sys.modules.update(pyopencl=None, pycuda=None); "
             "from gpuprofiler.cli.main import main; sys.exit(main(sys.argv[1:]))")


def replay(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", NO_DEVICE, "validate", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def figures(log):
    """Each stored record's modelling figure (its samples' 10th percentile) and median."""
    out = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        name = r["kernel"] if r["kernel"] == r["phase"] else f"{r['kernel']}/{r['phase']}"
        out[(name, r["size"])] = float(np.quantile(r["samples_s"], 0.1)), r["median_s"]
    return out


def check_rows(found, log):
    measured = figures(log)
    for r in found:
        assert float(r["measured_spread"]) >= 1.0  # the run's own p90/p10, beside the error
        pred, meas = float(r["predicted_s"]), float(r["measured_s"])
        assert pred > 0 and float(r["interval_low_s"]) <= pred <= float(r["interval_high_s"])
        assert float(r["rel_error"]) == pytest.approx((pred - meas) / meas)
        if (r["kernel"], int(r["size"])) in measured:  # a whole app's time is the sum of its phases
            figure, median = measured[(r["kernel"], int(r["size"]))]
            assert meas == pytest.approx(figure) and float(r["measured_median_s"]) == pytest.approx(median)


@pytest.mark.slow
def test_pocl_log_replays_with_maxplus_and_fractal(tmp_path):
    out = tmp_path / "out"
    done = replay("--replay", POCL_LOG, "--profile", POCL_PROFILE, "--models", "maxplus,fractal,pipeline",
                  "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = rows(out / "predictions.csv")
    check_rows(found, POCL_LOG)
    cases = {(r["kernel"], r["model"]) for r in found}
    # every stored kernel and every kernel phase of the app by max-plus; the fractal fit from the stored sweep
    assert {("vadd", "maxplus"), ("matmul_naive", "maxplus"), ("cg/spmv", "maxplus"), ("cg/dot_partial", "maxplus"),
            ("cg/axpy", "maxplus"), ("cg/xpay", "maxplus"), ("vadd", "fractal"), ("cg", "fractal")} <= cases
    assert not any("memcpy" in r["kernel"] for r in found if r["model"] == "maxplus")
    assert sum(1 for r in found if r["kernel"] == "vadd" and r["model"] == "maxplus") == 4
    assert {r["model"] for r in rows(out / "summary.csv")} == {"maxplus", "fractal"}
    report = (out / "report.md").read_text()
    assert "pipeline: not run, it models NVIDIA GPUs" in report
    assert "no device was used" in report and "gpuprofiler measure" in report  # where the times came from
    assert "Largest size of each kernel" in report


@pytest.mark.slow  # over five seconds; a cheaper test of the same behaviour stays in the default run
@pytest.mark.nvcc
def test_h100_log_replays_with_both_static_models_and_the_correction(tmp_path):
    out = tmp_path / "out"
    done = replay("--replay", H100_LOG, "--profile", H100_PROFILE, "--models", "pipeline,maxplus", "-o", out,
                  "--fit-correction", out / "correction.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = rows(out / "predictions.csv")
    check_rows(found, H100_LOG)
    for model in ("pipeline", "maxplus"):
        mine = {(r["kernel"], int(r["size"])) for r in found if r["model"] == model}
        assert {("spmv_csr", 2097152), ("spmv_csr", 4194304), ("matmul_naive", 32), ("cg/spmv", 524288)} <= mine
        assert all(r["loko_corrected_s"] for r in found if r["model"] == model)
    data = json.loads((out / "correction.json").read_text())
    assert {c["model"] for c in data["corrections"]} == {"pipeline", "maxplus"}
    assert data["meta"]["version"]


def test_bad_replays_exit_cleanly(tmp_path):
    done = replay("--replay", tmp_path / "missing.jsonl", "-o", tmp_path / "o", cwd=tmp_path)
    assert done.returncode == 2 and "not found" in done.stderr and "Traceback" not in done.stderr
    done = replay("--replay", tmp_path, "-o", tmp_path / "o", cwd=tmp_path)  # a directory (or a pipe: <(cat ...))
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"hello": 1}\nnot json at all\n')
    done = replay("--replay", foreign, "--profile", POCL_PROFILE, "-o", tmp_path / "o", cwd=tmp_path)
    assert done.returncode == 2 and "no measurement records" in done.stderr and "Traceback" not in done.stderr
    other = tmp_path / "other.jsonl"
    record = json.loads(POCL_LOG.read_text().splitlines()[0])
    other.write_text(json.dumps(dict(record, kernel="nobody_knows_me", phase="nobody_knows_me")) + "\n")
    done = replay("--replay", other, "--profile", POCL_PROFILE, "-o", tmp_path / "o", cwd=tmp_path)
    assert done.returncode == 2 and "nobody_knows_me" in done.stderr and "Traceback" not in done.stderr
    out = tmp_path / "few"
    done = replay("--replay", POCL_LOG, "--profile", POCL_PROFILE, "--models", "maxplus", "--items", "vadd",
                  "-o", out, "--fit-correction", out / "c.json", cwd=tmp_path)
    assert done.returncode == 2 and "1 kernel spec(s) chosen" in done.stderr and "at least 4 kernels" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "predictions.csv").exists() and not (out / "c.json").exists()  # refused before writing


GOOD = {"kernel": "vadd", "phase": "vadd", "size": 1024, "samples_s": [1e-5, 2e-5], "device": {"id": "x"}}


@pytest.mark.parametrize("change, why", [
    ({"size": "abc"}, "size"), ({"size": None}, "size"), ({"size": 0}, "size"), ({"size": -5}, "size"),
    ({"size": 10.5}, "size"), ({"size": True}, "size"), ({"kernel": ["vadd"]}, "names"), ({"phase": ""}, "names"),
    ({"samples_s": []}, "samples_s"), ({"samples_s": 0.001}, "samples_s"), ({"samples_s": ["x"]}, "samples_s"),
    ({"samples_s": [0.0, 1e-5]}, "samples_s"), ({"samples_s": [float("inf")]}, "samples_s"),
    ({"device": "pocl"}, "device"), ({"work": "lots"}, "work"), ({"work": -1}, "work"),
    ({"samples_s": [1e308] * 5}, "between a picosecond and a day"),  # the audit's
    ({"samples_s": [5e-324] * 5}, "between a picosecond and a day"), ({"samples_s": [1e5]}, "samples_s"),
    ({"model_s": 1e308}, "model_s"), ({"median_s": float("nan")}, "median_s"), ({"min_s": "x"}, "min_s"),
])
def test_records_that_are_not_measurements_are_named(change, why):
    from gpuprofiler.validate.replay import problem

    assert problem(GOOD) is None and problem(dict(GOOD, size=2048.0)) is None
    assert why in problem(dict(GOOD, **change))


def test_a_log_keeps_its_good_records_and_says_what_it_skipped(tmp_path):
    from gpuprofiler.errors import UserError
    from gpuprofiler.validate.replay import logged_device, read_log

    log = tmp_path / "m.jsonl"
    log.write_text("\n".join([json.dumps(GOOD), json.dumps(dict(GOOD, size=0)), "[" * 5000, "{torn",
                              json.dumps(dict(GOOD, size=4096.0, device=None))]) + "\n")
    said = []
    records = read_log(log, said.append)
    assert [r["size"] for r in records] == [1024, 4096] and isinstance(records[1]["size"], int)
    assert said == ["replay: 1 line(s) skipped: 1 size is not a positive integer"]
    assert logged_device(records) == {"id": "x"}  # a record without a device is not another device
    log.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="cannot read"):
        read_log(log)


@pytest.mark.slow
def test_items_predicted_on_threads_give_the_rows_of_one_after_another(monkeypatch):
    """Once the measuring is over the items are predicted on the host's cores (threads: the cache analyses' numpy
    sorts release the GIL); the rows, notes and refusals are those of one item after another, in the same order."""
    from gpuprofiler.profile.file import load_profile
    from gpuprofiler.validate.replay import replay as replay_log
    from gpuprofiler.validate.suite import prediction_threads

    profile = load_profile(POCL_PROFILE)
    got = {}
    for threads in ("1", "3"):
        monkeypatch.setenv("GPUPROFILER_PREDICT_THREADS", threads)
        results = replay_log(POCL_LOG, profile, ["fractal", "maxplus"], items=["vadd", "matmul_naive"])
        got[threads] = [(r.name, r.rows, r.notes, r.refused, sorted(r.fitted)) for r in results]
    assert [name for name, *_ in got["1"]] == ["matmul_naive", "vadd"]
    assert got["3"] == got["1"]
    assert prediction_threads(2) == 2 and prediction_threads(1) == 1
    monkeypatch.setenv("GPUPROFILER_PREDICT_THREADS", "two")
    with pytest.raises(UserError, match="GPUPROFILER_PREDICT_THREADS"):
        prediction_threads(5)
