"""The microbenchmarks' least-squares fits against scipy.stats (which a calibration no longer imports)."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from gpuprofiler.microbench.common import linear_fit, origin_fit

points = st.lists(st.tuples(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3)), min_size=2, max_size=40)


@given(points, st.sampled_from([0.9, 0.95, 0.99]))
@settings(max_examples=300, deadline=None)
def test_linear_fit_is_scipys_linregress_with_t_intervals(xy, confidence):
    x, y = np.array(xy).T
    assume(np.ptp(x) > 1e-3 * max(1.0, np.abs(x).max()) and np.ptp(y) > 1e-6)
    got, ref = linear_fit(x, y, confidence), stats.linregress(x, y)
    t = stats.t.ppf(0.5 + confidence / 2, max(len(x) - 2, 1))
    scale = 1e-9 * (1 + np.abs(y).max()) / max(np.ptp(x), 1e-300)
    assert got.slope == pytest.approx(ref.slope, rel=1e-9, abs=scale)
    assert got.intercept == pytest.approx(ref.intercept, rel=1e-9, abs=1e-9 * (1 + np.abs(y).max()) * (1 + np.abs(x).max()))
    assert got.r2 == pytest.approx(ref.rvalue**2, rel=1e-7, abs=1e-9)
    half = t * ref.stderr
    assert got.slope_ci[1] - got.slope == pytest.approx(half, rel=1e-6, abs=scale)
    assert got.intercept_ci[1] - got.intercept == pytest.approx(t * ref.intercept_stderr, rel=1e-6,
                                                                abs=1e-8 * (1 + np.abs(y).max()) * (1 + np.abs(x).max()))
    assert got.n == len(x)


def test_a_fit_on_one_x_is_refused():
    with pytest.raises(ValueError):
        linear_fit([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])


def test_a_constant_y_is_fitted_exactly():
    fit = linear_fit([1.0, 2.0, 3.0], [5.0, 5.0, 5.0])
    assert (fit.slope, fit.intercept, fit.r2) == (0.0, 5.0, 1.0)
    assert fit.slope_ci == (0.0, 0.0) and fit.intercept_ci == (5.0, 5.0)


def test_an_exact_line_has_no_interval():
    fit = linear_fit([1.0, 2.0, 3.0, 4.0], [3.0, 5.0, 7.0, 9.0])
    assert fit.slope == pytest.approx(2.0) and fit.intercept == pytest.approx(1.0) and fit.r2 == pytest.approx(1.0)
    assert fit.slope_ci == pytest.approx((2.0, 2.0)) and fit.intercept_ci == pytest.approx((1.0, 1.0))


def test_origin_fit_interval_uses_students_t():
    x, y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.1, 1.9, 3.2, 3.9])
    slope, (lo, hi) = origin_fit(x, y)
    expect = np.sum(x * y) / np.sum(x * x)
    se = np.sqrt(np.sum((y - expect * x) ** 2) / 3 / np.sum(x * x))
    assert slope == pytest.approx(expect)
    assert (hi - lo) / 2 == pytest.approx(stats.t.ppf(0.975, 3) * se)


def test_calibrating_does_not_import_scipy_stats():
    """The calibration's modules leave scipy.stats out (half a second of every run)."""
    code = ("import sys, gpuprofiler.calibrate.driver, gpuprofiler.cli.calibrate; "
            "sys.exit('scipy.stats' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
