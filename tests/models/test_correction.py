"""The learned correction: exact ridge algebra, the 4x clip, leave-one-kernel-out honesty, and its file."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.models import correction as C


def samples(rng, kernels=5, per=6, weights=None, intercept=0.2, noise=0.0):
    """Cases whose log(measured / predicted) is ``intercept + sum(w * feature)`` (plus noise)."""
    weights = weights if weights is not None else {f: 0.0 for f in C.FEATURES}
    out = []
    for k in range(kernels):
        for _ in range(per):
            feats = {f: float(rng.uniform(0, 1)) for f in C.FEATURES}
            log = intercept + sum(weights[f] * feats[f] for f in C.FEATURES) + noise * rng.normal()
            pred = float(rng.uniform(1e-5, 1e-3))
            out.append({"kernel": f"k{k}", "features": feats, "predicted_s": pred, "measured_s": pred * math.exp(log)})
    return out


def test_ridge_recovers_an_exact_linear_law():
    rng = np.random.default_rng(1)
    w = dict(zip(C.FEATURES, (0.3, -0.2, 0.1, 0.25, -0.15, 0.05, 0.2, -0.1)))
    data = samples(rng, weights=w)
    c = C.fit(data, "m", alpha=1e-9)
    assert c.features == list(C.FEATURES)
    assert c.cases == len(data) and c.kernels == [f"k{i}" for i in range(5)]
    for s in data:
        assert c.apply(s["features"], s["predicted_s"]) == pytest.approx(s["measured_s"], rel=1e-6)
    # in raw units the standardised weights are the law's weights
    raw = np.array(c.weights) / np.array(c.scale)
    assert raw == pytest.approx([w[f] for f in C.FEATURES], abs=1e-6)


def test_constant_features_are_dropped_and_a_constant_ratio_is_the_intercept():
    rng = np.random.default_rng(2)
    data = samples(rng, intercept=math.log(1.5))
    for s in data:
        s["features"]["occupancy"] = 0.5
    c = C.fit(data, "m", alpha=1.0)
    assert "occupancy" not in c.features
    assert c.intercept == pytest.approx(math.log(1.5))
    assert c.weights == pytest.approx([0.0] * len(c.features), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.floats(-20, 20), st.lists(st.floats(-50, 50), min_size=8, max_size=8))
def test_a_correction_never_scales_more_than_four_times(intercept, feats):
    c = C.Correction("m", list(C.FEATURES), [0.0] * 8, [1.0] * 8, [1.0] * 8, intercept, 1.0)
    f = c.factor(dict(zip(C.FEATURES, feats)))
    assert 0.25 - 1e-12 <= f <= 4.0 + 1e-12


def test_leave_one_kernel_out_never_sees_the_kernel_it_corrects():
    rng = np.random.default_rng(3)
    data = samples(rng, weights={f: 0.2 for f in C.FEATURES}, noise=0.05)
    base = C.leave_one_kernel_out(data, "m")
    # any change to kernel k2's own measurements leaves k2's corrected predictions as they were
    changed = [dict(s, measured_s=s["measured_s"] * 7.0) if s["kernel"] == "k2" else s for s in data]
    again = C.leave_one_kernel_out(changed, "m")
    mine = [i for i, s in enumerate(data) if s["kernel"] == "k2"]
    assert again[mine] == pytest.approx(base[mine], rel=1e-12)
    others = [i for i, s in enumerate(data) if s["kernel"] != "k2"]
    assert not np.allclose(again[others], base[others])


def test_leave_one_kernel_out_learns_a_law_shared_by_kernels():
    rng = np.random.default_rng(4)
    data = samples(rng, kernels=6, weights={f: (0.4 if f == "dram_share" else 0.0) for f in C.FEATURES},
                   intercept=0.5, noise=0.01)
    corrected = C.leave_one_kernel_out(data, "m")
    meas = np.array([s["measured_s"] for s in data])
    static = np.array([s["predicted_s"] for s in data])
    assert np.mean(np.abs(corrected - meas) / meas) < 0.05 < np.mean(np.abs(static - meas) / meas)


def test_too_few_kernels_and_unusable_cases():
    rng = np.random.default_rng(5)
    data = samples(rng, kernels=3)
    with pytest.raises(UserError, match="3 kernels; it needs every case and at least 4 kernels"):
        C.fit_all(data, "m")
    assert C.unavailable(samples(rng, kernels=4)) is None
    bad = samples(rng, kernels=1, per=3)
    bad[0]["features"]["occupancy"] = math.nan
    bad[1]["predicted_s"] = 0.0
    del bad[2]["features"]["int_share"]
    assert C.usable(bad) == []


def test_saved_file_round_trips_and_records_where_it_came_from(tmp_path):
    rng = np.random.default_rng(6)
    data = samples(rng, weights={f: 0.1 for f in C.FEATURES}, noise=0.02)
    c = C.fit_all(data, "pipeline")
    path = C.save([c], tmp_path / "sub" / "correction.json", {"replay": "log.jsonl"})
    loaded = C.load(path, "pipeline")
    meta = json.loads(path.read_text())["meta"]
    assert {"version", "date", "replay"} <= set(meta) and loaded.meta == meta
    loaded.meta = {}
    assert loaded == c


@pytest.mark.parametrize("text, message", [
    (None, "file not found"),
    ("{not json", "not a correction file"),
    ('{"kind": "something else"}', "not a correction file"),
    ('{"kind": "gpuprofiler correction", "corrections": []}', "no correction for the pipeline model"),
    ('{"kind": "gpuprofiler correction", "corrections": [{"model": "pipeline"}]}', "malformed"),
    ('{"kind": "gpuprofiler correction", "corrections": [{"model": "pipeline", "features": ["x"], "mean": [0],'
     ' "scale": [1], "weights": [1], "intercept": 0, "alpha": 1}]}', "unknown features"),
    ('{"kind": "gpuprofiler correction", "corrections": [{"model": "pipeline", "features": ["occupancy"],'
     ' "mean": [0, 1], "scale": [1], "weights": [1], "intercept": 0, "alpha": 1}]}', "different lengths"),
    ('{"kind": "gpuprofiler correction", "corrections": [{"model": "pipeline", "features": ["occupancy"],'
     ' "mean": ["a"], "scale": [1], "weights": [1], "intercept": 0, "alpha": 1}]}', "finite"),
    ('{"kind": "gpuprofiler correction", "corrections": [{"model": "pipeline", "features": ["occupancy"],'
     ' "mean": [0], "scale": [0], "weights": [1], "intercept": 0, "alpha": 1}]}', "scales must be positive"),
    ('{"kind": "gpuprofiler correction", "corrections": [{"model": "pipeline", "features": ["occupancy"],'
     ' "mean": [0], "scale": [1], "weights": [NaN], "intercept": 0, "alpha": 1}]}', "finite"),
    ("[" * 100000, "not a correction file"),
])
def test_bad_correction_files_are_user_errors(tmp_path, text, message):
    path = tmp_path / "c.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserError, match=message):
        C.load(path, "pipeline")


def test_a_file_that_is_not_text_is_a_user_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(UserError, match="not a correction file"):
        C.load(path, "pipeline")


def test_kernels_with_the_same_code_are_left_out_together():
    rng = np.random.default_rng(7)
    data = samples(rng, kernels=6, weights={f: 0.2 for f in C.FEATURES}, noise=0.05)
    for s in data:  # k1 and k4 are one kernel under two names (an app's copy of a builtin)
        s["code"] = "same" if s["kernel"] in ("k1", "k4") else s["kernel"]
    assert set(C.kernel_groups(data)) == {"k0", "k1+k4", "k2", "k3", "k5"}
    base = C.leave_one_kernel_out(data, "m")
    changed = [dict(s, measured_s=s["measured_s"] * 7.0) if s["kernel"] == "k4" else s for s in data]
    again = C.leave_one_kernel_out(changed, "m")
    k1 = [i for i, s in enumerate(data) if s["kernel"] == "k1"]
    assert again[k1] == pytest.approx(base[k1], rel=1e-12)  # k1's figure never saw its copy k4
    # without the code, k4's measurements would have reached k1's correction
    plain = [{k: v for k, v in s.items() if k != "code"} for s in data]
    moved = [{k: v for k, v in s.items() if k != "code"} for s in changed]
    assert not np.allclose(C.leave_one_kernel_out(moved, "m")[k1], C.leave_one_kernel_out(plain, "m")[k1])
