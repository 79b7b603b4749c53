"""The fractal predictor's chosen law is reported beside the laws it was compared with, on the same targets."""

import math

import numpy as np
import pytest

from gpuprofiler.models.base import Prediction
from gpuprofiler.models.fractal.extrap import text_format
from gpuprofiler.validate.suite import baseline_rows, summarize_baselines
from gpuprofiler.workloads.sweep import Sweep


def target(seconds):
    samples = np.full(40, seconds)
    return Sweep("k", "kernel", [1000], {"k": [samples]}, [samples])


def test_rows_hold_every_law_against_the_same_measured_figure():
    p = Prediction(1000, 1.1, 1.0, 1.2, "fractal", "work",
                   {"fractal_s": 0.8, "fractal_interval_s": [0.5, 1.3], "baselines_s": {"extrap": 2.0, "poly1": 9.0}})
    rows = baseline_rows("k", "fractal", p, target(1.0))
    assert [(r["law"], r["predicted_s"]) for r in rows] == [("chosen", 1.1), ("fractal", 0.8), ("Extra-P", 2.0)]
    assert [r["rel_error"] for r in rows] == pytest.approx([0.1, -0.2, 1.0])
    assert {r["measured_s"] for r in rows} == {1.0}
    assert math.isnan(rows[2]["interval_low_s"]) and rows[1]["interval_high_s"] == 1.3


def test_a_predictor_without_baselines_and_a_missing_extrap_give_fewer_rows():
    assert baseline_rows("k", "maxplus", Prediction(1000, 1.0, 1.0, 1.0, "maxplus"), target(1.0)) == []
    p = Prediction(1000, 1.0, 0.9, 1.1, "fractal", "", {"fractal_s": 1.0, "fractal_interval_s": [0.9, 1.1],
                                                         "baselines_s": {"extrap": None}})
    assert [r["law"] for r in baseline_rows("k", "fractal", p, target(1.0))] == ["chosen", "fractal"]


def test_laws_are_summarised_on_the_targets_every_law_predicted():
    rows = []
    for kernel, errs in (("a", {"chosen": 0.1, "fractal": -0.3, "Extra-P": 2.0}), ("b", {"chosen": -0.05,
                                                                                          "fractal": 0.2})):
        for law, e in errs.items():
            iv = (math.nan, math.nan) if law == "Extra-P" else (0.9 + e, 1.2 + e)
            rows.append({"kernel": kernel, "size": 1, "law": law, "rel_error": e, "measured_s": 1.0,
                         "predicted_s": 1 + e, "interval_low_s": iv[0], "interval_high_s": iv[1]})
    out = {s["law"]: s for s in summarize_baselines(rows)}
    assert {s["cases"] for s in out.values()} == {1}  # b lacks Extra-P: only a is common to all three
    assert out["chosen"]["median_abs_error"] == pytest.approx(0.1) and out["Extra-P"]["max_abs_error"] == 2.0
    assert out["chosen"]["inside_interval"] == 1.0 and out["fractal"]["inside_interval"] == 0.0
    assert math.isnan(out["Extra-P"]["inside_interval"]) and math.isnan(out["Extra-P"]["median_interval_width"])
    assert out["chosen"]["median_interval_width"] == pytest.approx(1.3 / 1.0)


def test_extrap_is_given_the_modelling_figure_or_every_repeat():
    samples = np.arange(1.0, 11.0)
    sweep = Sweep("k", "kernel", [10, 20], {"k": [samples, 2 * samples]}, [samples, 2 * samples])
    figures = [line for line in text_format([sweep], figures=True).splitlines() if line.startswith("DATA")]
    assert figures == ["DATA 1.9", "DATA 3.8"]  # the 10th percentile of 1..10, linearly interpolated
    every = [line for line in text_format([sweep]).splitlines() if line.startswith("DATA")]
    assert len(every[0].split()) == 11
