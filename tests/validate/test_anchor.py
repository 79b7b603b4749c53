"""A static model's interval in ``validate`` also reaches its error on the kernel at the largest small size measured
below each case (:func:`gpuprofiler.validate.suite._anchor`): the size predicted where it was not, the error taken
from the sweep's modelling figure there, nothing changed where the model is right there or cannot predict it."""

import numpy as np
import pytest

from gpuprofiler.errors import UserError
from gpuprofiler.measure.stats import model_value
from gpuprofiler.models.base import Prediction
from gpuprofiler.validate.suite import _anchor, summarize
from gpuprofiler.workloads.sweep import Sweep


class Static:
    """A static model that predicts 1 us per unit of size, its calibrated band 0.8x to 1.25x."""

    needs_measurements = False

    def __init__(self, fail: bool = False):
        self.asked: list[list[int]] = []
        self.fail = fail

    def predict(self, sizes):
        self.asked.append(list(sizes))
        if self.fail:
            raise UserError("cannot")
        return [Prediction(n, 1e-6 * n, 0.8e-6 * n, 1.25e-6 * n, "static") for n in sizes]


def sweep(times: dict[int, float]) -> Sweep:
    sizes = sorted(times)
    totals = [np.array([times[s]] * 5) for s in sizes]
    return Sweep("k", "kernel", sizes, {"k": totals}, totals)


def test_a_target_reaches_the_models_error_at_the_largest_small_size():
    model = Static()
    small = sweep({100: 1e-4, 200: 2e-4, 400: 1.2e-3})  # right at 100 and 200, 3x too fast at 400
    (got,) = _anchor(model, model.predict([3200]), small)
    assert model.asked == [[3200], [400]]  # the largest small size below the target, predicted once more
    assert got.details["evidence_size"] == 400
    assert got.details["evidence_log_error"] == pytest.approx(np.log(model_value(small.totals[2]) / 4e-4))
    assert got.low == pytest.approx(0.8 * 3.2e-3) and got.high == pytest.approx(1.25 * 3.2e-3 * 3.0)
    assert got.details["calibrated_interval_s"] == pytest.approx([0.8 * 3.2e-3, 1.25 * 3.2e-3])


def test_an_error_inside_the_band_or_no_smaller_size_changes_nothing():
    model = Static()
    small = sweep({100: 1e-4, 200: 2.2e-4})  # 10% off at 200: inside 0.8x-1.25x
    (got,) = _anchor(model, model.predict([1600]), small)
    assert (got.low, got.high) == pytest.approx((0.8 * 1.6e-3, 1.25 * 1.6e-3)) and not got.details.get("warnings")
    # a replay predicts every size: each reaches the error at the small size below it, the smallest has none
    every = model.predict([100, 200, 1600])
    got = _anchor(model, every, sweep({100: 3e-4, 200: 2e-4}))
    assert model.asked[-1] == [100, 200, 1600]  # no size predicted twice
    assert "evidence_size" not in got[0].details
    assert got[1].details["evidence_size"] == 100 and got[1].high == pytest.approx(1.25 * 2e-4 * 3.0)
    assert got[2].details["evidence_size"] == 200 and got[2].high == pytest.approx(1.25 * 1.6e-3)


def test_a_model_that_cannot_predict_the_small_size_keeps_its_calibrated_interval():
    model = Static()
    target = model.predict([800])
    model.fail = True
    (got,) = _anchor(model, target, sweep({100: 1e-3, 200: 2e-3}))
    assert got is target[0]


def test_the_summary_gives_the_calibrated_intervals_coverage_beside_the_final_one():
    row = {"model": "static", "rel_error": -0.5, "predicted_s": 1.0, "measured_s": 2.0, "interval_low_s": 0.8,
           "interval_high_s": 3.0, "calibrated_low_s": 0.8, "calibrated_high_s": 1.25}
    plain = dict(row, kernel="b", interval_high_s=1.25, calibrated_low_s=float("nan"),
                 calibrated_high_s=float("nan"), measured_s=1.1)
    (s,) = summarize([dict(row, kernel="a"), plain])
    assert s["inside_interval"] == 1.0 and s["inside_calibrated"] == 0.5
    assert s["median_interval_width"] == pytest.approx((3.0 / 0.8 + 1.25 / 0.8) / 2)
    assert s["median_calibrated_width"] == pytest.approx(1.25 / 0.8)
