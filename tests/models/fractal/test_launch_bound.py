"""A launch-bound sweep (its time grows as a small power of its work): no law's slope is measured there, so the
prediction is the largest small size's time plus what a model of the device adds (or that time alone), inside
[that time, that time scaled by the work], and it says so; a sweep that grows with its work keeps its law."""

import numpy as np
import pytest
from conftest import toy_matmul
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models import registry
from gpuprofiler.models.base import APPLIES, Prediction, Predictor
from gpuprofiler.models.fractal import predictor as fractal_predictor
from gpuprofiler.models.fractal.predictor import FLAT_GROWTH, FractalPredictor, flat_sweep
from gpuprofiler.profile.file import Profile, entry
from gpuprofiler.workloads.sweep import Sweep

SMALL = [200, 240, 280, 320, 360]
LAUNCH = 20e-6


def times(sizes, per_flop):
    """A launch and the matrix product's 2 n^3 flops at ``per_flop`` seconds each, five equal samples a size."""
    return [np.array([LAUNCH + per_flop * 2 * n**3] * 5) for n in sizes]


def sweep(t, sizes=SMALL):
    return Sweep("mm", "kernel", list(sizes), {"mm": t}, t)


def profile():
    return Profile({"bandwidth": {"read_Bps": entry(2e10, "B/s", "test")}, "launch": {"event_s": entry(LAUNCH, "s", "t")},
                    "instructions": {"float_fma": {"throughput_ops_per_s": entry(1e10, "op/s", "test")}}})


class Device(Predictor):
    name = "fake_flat_device"

    def applies_to(self, item, profile):
        return APPLIES

    def fit(self, item, profile=None, measurements=None):
        self.fitted_ = True
        return self

    def predict(self, sizes):
        return [Prediction(int(n), 1e-6 + 1e-13 * 2 * n**3, 1e-6, 1e-6, self.name) for n in sizes]


@settings(max_examples=60, deadline=None)
@given(share=st.floats(0.001, 0.9))
def test_flat_is_the_works_share_of_the_time_under_a_quarter(share):
    """T = L + k W with the work a given share of the largest size's time: the slope of ln T on ln W is about the
    work's share, and the sweep is flat exactly where that slope is under FLAT_GROWTH."""
    k = share * LAUNCH / (1 - share) / (2 * max(SMALL) ** 3)
    t = [np.array([LAUNCH + k * 2 * n**3]) for n in SMALL]
    got = flat_sweep(None, sweep(t), lambda n: 2.0 * n**3, None, None)
    slope = np.polyfit(np.log([2.0 * n**3 for n in SMALL]), np.log([v[0] for v in t]), 1)[0]
    assert (got is not None) == (slope < FLAT_GROWTH)
    if got is not None:
        assert got[0] == pytest.approx(slope) and got[2] == max(SMALL) and got[3] == pytest.approx(t[-1][0])


def test_a_launch_bound_sweep_is_predicted_from_its_floor_and_the_device_model(tmp_path, monkeypatch):
    item = toy_matmul(tmp_path)
    flat = sweep(times(SMALL, 1e-16))
    registry.register(Device)
    monkeypatch.setattr(fractal_predictor, "DEVICE_MODELS", ("fake_flat_device",))
    try:
        fit = FractalPredictor(extrap=False, calibrated=False).fit(item, profile(), flat)
        [p] = fit.predict([4000])
    finally:
        registry.unregister("fake_flat_device")
    last = flat.totals[-1][0]
    added = (1e-6 + 1e-13 * 2 * 4000**3) - (1e-6 + 1e-13 * 2 * 360**3)
    assert p.summary == "launch floor" and p.seconds == pytest.approx(last + added)
    assert p.low == pytest.approx(last) and p.high == pytest.approx(last * (4000 / 360) ** 3, rel=0.02)
    assert "law_s" in p.details and any("launch-bound" in w for w in p.details["warnings"])
    without = FractalPredictor(extrap=False, calibrated=False, device_model=False).fit(item, profile(), flat)
    assert without.predict([4000])[0].seconds == pytest.approx(last)


def test_a_sweep_that_grows_with_its_work_keeps_its_law(tmp_path):
    item = toy_matmul(tmp_path)
    fit = FractalPredictor(extrap=False, calibrated=False).fit(item, profile(), sweep(times(SMALL, 1e-10)))
    assert fit.flat_ is None and fit.predict([4000])[0].summary != "launch floor"
