"""Loops too long to unroll: cut to a few passes, twice, every bound linear in the passes through the two."""

import math
import re

import pytest
from conftest import FIXTURES, H100_PROFILE, KERNELS, POCL_PROFILE, run_cli
from hypothesis import given
from hypothesis import strategies as st

from gpuprofiler.models.maxplus.builder import TooLarge, build_spec
from gpuprofiler.models.maxplus.cut import CUT_PASSES, _blend, predict_cut
from gpuprofiler.models.maxplus.models import parameters, predict
from gpuprofiler.models.maxplus.predictor import MaxPlusPredictor
from gpuprofiler.profile.file import load_profile
from gpuprofiler.workloads.spec import load_spec

CASES = [(FIXTURES / "kernels" / "rowsum.toml", 16384), (KERNELS / "covariance.toml", 64),
         (KERNELS / "mvt.toml", 256)]


def loop_lines(spec):
    text = open(spec.sources["opencl"]).read().splitlines()
    return tuple(i + 1 for i, line in enumerate(text) if re.search(r"\bfor\s*\(", line))


@pytest.mark.parametrize("profile", [H100_PROFILE, POCL_PROFILE], ids=["h100", "pocl"])
@pytest.mark.parametrize("path,size", CASES, ids=[p.stem for p, _ in CASES])
def test_the_cut_graphs_give_the_full_graphs_time(profile, path, size):
    """Where the whole graph builds, the time through two cuts is its time: each pass adds the same."""
    prof = load_profile(profile)
    spec = load_spec(path)
    inst = spec.instantiate(size)
    items = math.prod(inst.global_size)

    def at(kernel):
        return predict(kernel, parameters(prof, kernel), items, size)

    full = at(build_spec(inst, "opencl"))
    exc = TooLarge("too large")
    exc.loops = loop_lines(spec)
    kernel, cut = predict_cut(lambda caps: build_spec(inst, "opencl", caps=caps), at, exc)
    assert cut.seconds == pytest.approx(full.seconds, rel=1e-9)
    assert cut.details["limited_by"] == full.details["limited_by"]
    assert all(v > CUT_PASSES[1] for v in kernel.capped.values()) and "too long to unroll" in kernel.notes[-1]
    assert "features" not in cut.details and cut.low <= cut.seconds <= cut.high


@given(st.lists(st.floats(-1e3, 1e3), min_size=4, max_size=4), st.floats(-5, 50), st.floats(-5, 50))
def test_the_blend_is_exact_on_a_bilinear_function(coef, a, b):
    c0, c1, c2, c3 = coef

    def f(x, y):
        return c0 + c1 * x + c2 * y + c3 * x * y

    corners = {(i, j): f(i, j) for i in (0, 1) for j in (0, 1)}
    assert _blend(corners, [a, b]) == pytest.approx(f(a, b), rel=1e-9, abs=1e-6)


@pytest.mark.slow
def test_covariance_past_the_statement_limit_is_predicted_not_refused():
    """Its inner loop of n passes inside an outer one of up to m: past 131072 statements at n = m = 480."""
    spec = load_spec(KERNELS / "covariance.toml")
    pred = MaxPlusPredictor().fit(spec, load_profile(H100_PROFILE)).predict([480])[0]
    assert pred.seconds > 0 and pred.details["cut_loops"]["13"]["passes"] == 480
    assert any("too long to unroll" in n for n in pred.details["notes"])


@pytest.mark.slow
def test_the_command_says_it_cut_the_loop():
    r = run_cli("maxplus", KERNELS / "covariance.toml", "--size", 480, "--profile", H100_PROFILE)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "too long to unroll" in r.stderr + r.stdout
