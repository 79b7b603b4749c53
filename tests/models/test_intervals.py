"""Intervals calibrated on out-of-sample errors (:mod:`gpuprofiler.models.intervals`): the split-conformal
quantiles against brute force, each kernel weighing one, a kernel's family always left out, wider for a kind of
device or a regime crossing the calibration has not seen, a program's phases calibrated too, and the file's
validation and round trip; the ``intervals`` command fits and shows one; a static model's interval that also
reaches its error on the kernel at a measured smaller size."""

import csv
import json
import math

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import Prediction
from gpuprofiler.models.intervals import (
    CROSSING_WIDEN,
    MIN_CASES,
    UNSEEN_WIDEN,
    Calibration,
    Residual,
    anchored,
    calibrate,
    calibrate_all,
    conformal,
    leave_family_out,
)


def residuals(errors, model="fractal", kind="cpu", family=None, crossing=False):
    return [Residual(model, kind, f"k{i}", family or f"f{i}", 100, float(e), crossing, "test")
            for i, e in enumerate(errors)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=60), st.sampled_from([0.5, 0.8, 0.9, 0.95]))
def test_conformal_bounds_are_the_finite_sample_order_statistics(errors, level):
    """One case per kernel: the upper bound is the ceil((n + 1)(1 + level) / 2)-th smallest error (infinite past
    n), the lower one the mirror image; so a new exchangeable case falls inside with probability >= level."""
    lo, hi, cases, kernels = conformal(residuals(errors), level)
    n, v = len(errors), np.sort(errors)
    k = math.ceil((n + 1) * (1 - (1 - level) / 2) - 1e-9)
    assert hi == (v[k - 1] if k <= n else math.inf)
    assert lo == (v[n - k] if k <= n else -math.inf)
    assert (cases, kernels) == (n, n)


def test_each_kernel_weighs_one_whatever_its_count_of_cases():
    many = [Residual("fractal", "cpu", "big", "fb", s, 2.0, False, "t") for s in range(50)]
    few = residuals(np.linspace(-0.1, 0.1, 19))
    lo, hi, cases, kernels = conformal(many + few, 0.9)
    assert (cases, kernels) == (69, 20) and hi == 2.0  # the one kernel far out is one of 20, not 50 of 69
    lo2, hi2, _, _ = conformal(few, 0.9)
    assert hi2 < 0.2


def test_a_kernels_family_is_left_out_and_the_interval_holds_the_prediction():
    cal = Calibration(residuals(np.linspace(-0.2, 0.2, 30)) + [Residual("fractal", "cpu", "mine", "fam", 1, 3.0)])
    got = cal.interval("fractal", "cpu", 2.0, family="fam")
    assert got.kernels == 30 and got.low < 2.0 < got.high and got.high < 2.0 * math.exp(0.25)
    with_it = cal.interval("fractal", "cpu", 2.0, family="other")
    assert with_it.kernels == 31 and with_it.high > got.high
    errs = np.linspace(0.1, 0.3, 30)
    biased = Calibration(residuals(errs))  # always under-predicted: the interval sits above
    b = biased.interval("fractal", "cpu", 1.0)
    k = math.ceil(31 * (1 + biased.level) / 2 - 1e-9)  # the conformal order statistic
    assert b.low == 1.0 and b.high == pytest.approx(math.exp(errs[k - 1]))


def test_an_unseen_kind_of_device_or_crossing_widens_and_says_so():
    errs = np.linspace(-0.3, 0.3, 30)
    cal = Calibration(residuals(errs, kind="cpu"))
    cpu = cal.interval("fractal", "cpu", 1.0)
    gpu = cal.interval("fractal", "gpu", 1.0)
    assert math.log(gpu.high) == pytest.approx(UNSEEN_WIDEN * math.log(cpu.high))
    assert any("no gpu device's fractal errors" in n for n in gpu.notes)
    cross = cal.interval("fractal", "cpu", 1.0, crossing=True)
    assert math.log(cross.high) == pytest.approx(CROSSING_WIDEN * math.log(cpu.high)) and cross.notes
    seen = Calibration(residuals(errs) + residuals(np.linspace(-1, 1, MIN_CASES), crossing=True, family="x"))
    assert any("calibrated on such crossings" in n for n in seen.interval("fractal", "cpu", 1.0, crossing=True).notes)


def test_calibrate_keeps_the_models_own_interval_and_a_program_gets_its_phases_calibrated():
    cal = Calibration(residuals(np.linspace(-0.5, 0.5, 40), model="maxplus"))
    p = Prediction(10, 1.0, 0.999, 1.001, "maxplus", "", {"phases": {"spmv": {"predicted_s": 0.6,
                                                                              "interval_s": [0.59, 0.61]}}})
    got = calibrate_all(p, "cpu", "app:cg", calibration=cal)
    assert got.details["model_interval_s"] == [0.999, 1.001] and got.low < 0.8 and got.high > 1.3
    ph = got.details["phases"]["spmv"]
    assert ph["family"] == "app:cg/spmv" and ph["model_interval_s"] == [0.59, 0.61]
    assert ph["interval_s"][0] < 0.5 < 0.6 < 0.8 < ph["interval_s"][1]
    assert calibrate(p, "cpu", "x", calibration=Calibration()) is p  # nothing installed: the model's own


def test_leave_family_out_is_the_out_of_sample_check_of_a_calibration():
    rng = np.random.default_rng(1)
    cal = Calibration(residuals(rng.normal(0, 0.2, 200)))
    checks = leave_family_out(cal, "fractal")
    assert len(checks) == 200 and cal.level - 0.05 <= np.mean([c["inside"] for c in checks]) <= cal.level + 0.08


def test_a_calibration_file_round_trips_and_bad_ones_are_refused(tmp_path):
    cal = Calibration(residuals([0.1, -0.2]), 0.8, [{"run": "r"}], {"version": "x"})
    back = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert back.residuals == cal.residuals and back.level == 0.8 and back.sources == [{"run": "r"}]
    for bad in ({}, {"residuals": [{"model": "x"}]}, {"residuals": [], "level": 1.5},
                {"residuals": [{**cal.to_dict()["residuals"][0], "log_error": float("nan")}]}):
        with pytest.raises(UserError):
            Calibration.from_dict(bad)


def test_the_intervals_command_fits_from_validation_rows_and_shows(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rng = np.random.default_rng(2)
    with open(run / "predictions.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["kernel", "size", "model", "predicted_s", "measured_s", "family", "crossing",
                                "device_kind"])
        w.writeheader()
        for k in range(24):
            w.writerow({"kernel": f"k{k}", "size": 10, "model": "fractal", "predicted_s": 1.0,
                        "measured_s": float(np.exp(rng.normal(0, 0.1))), "family": f"f{k % 12}",
                        "crossing": "False", "device_kind": "cpu"})
    out = tmp_path / "cal.json"
    done = run_cli("intervals", "fit", run, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "fractal" in done.stdout and "cpu" in done.stdout and len(json.loads(out.read_text())["residuals"]) == 24
    shown = run_cli("intervals", "show", out)
    assert shown.returncode == 0 and "leave-family-out" in shown.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = run_cli("intervals", "fit", empty, "-o", out)
    assert bad.returncode == 2 and "no predictions.csv" in bad.stderr and "Traceback" not in bad.stderr


def test_a_device_the_calibration_holds_no_errors_of_widens_and_says_so():
    errs = np.linspace(-0.3, 0.3, 30)
    cal = Calibration([Residual("pipeline", "gpu", f"k{i}", f"f{i}", 1, float(e), False, "t", "NVIDIA H100")
                       for i, e in enumerate(errs)])
    seen = cal.interval("pipeline", "gpu", 1.0, device="NVIDIA H100")
    new = cal.interval("pipeline", "gpu", 1.0, device="NVIDIA H200")
    assert not seen.notes and math.log(new.high) == pytest.approx(UNSEEN_WIDEN * math.log(seen.high))
    assert any("no errors of pipeline on this device (NVIDIA H200" in n for n in new.notes)


def test_on_an_unseen_device_the_interval_reaches_either_way():
    """Always under-predicted on the device seen: on it the interval sits above the prediction; on another device
    it reaches as far below as the errors' size (their sign need not carry), widened."""
    errs = np.linspace(0.1, 0.3, 30)
    cal = Calibration([Residual("maxplus", "gpu", f"k{i}", f"f{i}", 1, float(e), False, "t", "NVIDIA H100")
                       for i, e in enumerate(errs)])
    seen = cal.interval("maxplus", "gpu", 1.0, device="NVIDIA H100")
    new = cal.interval("maxplus", "gpu", 1.0, device="NVIDIA H200")
    assert seen.low == 1.0
    q = np.sort(errs)[math.ceil(31 * cal.level - 1e-9) - 1]  # the level's order statistic of |error|
    assert math.log(new.low) == pytest.approx(-UNSEEN_WIDEN * q)
    assert math.log(new.high) == pytest.approx(math.log(seen.high) * UNSEEN_WIDEN)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.2, 0.99), st.floats(1.01, 5.0), st.floats(-4, 4, allow_nan=False))
def test_an_anchored_interval_reaches_the_error_seen_only_where_the_calibration_does_not(lo, hi, r):
    """The calibrated band [lo, hi] around a prediction of 1 s, and the model off by e^r at a smaller size: the
    interval is the band where e^r lies inside it, else the band and the band moved by e^r together."""
    p = Prediction(100, 1.0, lo, hi, "maxplus")
    at = Prediction(50, 0.5, 0.4, 0.6, "maxplus")
    got = anchored(p, at, 0.5 * math.exp(r))
    assert got.details["calibrated_interval_s"] == [lo, hi]
    assert got.details["evidence_size"] == 50 and got.details["evidence_log_error"] == pytest.approx(r)
    if lo <= math.exp(r) <= hi:
        assert (got.low, got.high) == (lo, hi) and not got.details.get("warnings")
    else:
        assert got.low == pytest.approx(min(lo, lo * math.exp(r))) and got.high == pytest.approx(max(hi, hi * math.exp(r)))
        assert got.low <= math.exp(r) * lo and got.high >= math.exp(r) * hi  # the moved band inside, and
        assert got.low <= lo and got.high >= hi  # the calibrated one
        assert "off by" in got.details["warnings"][-1]
    assert got.check() and got.seconds == 1.0


def test_an_anchored_programs_phases_each_reach_their_own_error():
    phases = {"spmv": {"predicted_s": 0.6, "interval_s": [0.5, 0.7]}, "axpy": {"predicted_s": 0.4,
                                                                             "interval_s": [0.3, 0.5]}}
    p = Prediction(100, 1.0, 0.8, 1.2, "maxplus", "", {"phases": phases})
    at = Prediction(50, 0.5, 0.4, 0.6, "maxplus", "", {"phases": {"spmv": {"predicted_s": 0.3},
                                                                   "axpy": {"predicted_s": 0.2}}})
    got = anchored(p, at, 0.5, {"spmv": 0.9, "axpy": 0.2})  # spmv 3x off at 50, axpy exact
    spmv, axpy = got.details["phases"]["spmv"], got.details["phases"]["axpy"]
    assert spmv["calibrated_interval_s"] == [0.5, 0.7] and spmv["interval_s"] == pytest.approx([0.5, 2.1])
    assert axpy["interval_s"] == [0.3, 0.5]
    assert phases["spmv"]["interval_s"] == [0.5, 0.7]  # the prediction given is not changed
    assert (got.low, got.high) == (0.8, 1.2)  # the whole run exact at 50
    assert anchored(p, at, math.nan) is p and anchored(p, at, 0.0) is p  # nothing measured: as it was
