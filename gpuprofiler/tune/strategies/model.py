"""Model-guided search: rank every configuration by a cheap prediction, measure best-first, and stop when the best
measured configuration is statistically out of reach of every unmeasured one.

The cheap prediction is a static model's time for the configuration at the target (``Tuner.ranker``: with the
device's profile, the first registered static predictor that applies, max-plus on a CPU), else each
configuration's modelling figure at a small size (``Tuner.rank_size``, an eighth of the target by default). The target's figure is predicted from it by a line in log-log space fitted on the
configurations measured so far (log T = a + b log t_small; Theil-Sen's median of slopes, so that one measurement
a shared device slowed does not tilt it; with fewer than ``MIN_FOR_SLOPE`` measured, or small figures too alike to
fix a slope, b = 1: a common ratio). Each unmeasured configuration's prediction is a Student t law with the fit's
residual spread (from the median absolute residual with ``MIN_ROBUST`` or more points, else the root mean square;
at least the measured figures' own typical interval half-width, and ``MIN_SPREAD``) and the least-squares prediction variance (leverage included), on m - 2 degrees of
freedom (m - 1 for a ratio): a spread guessed from a few points is held loosely. The search stops when the chance
that any unmeasured configuration is more than ``tolerance`` faster than the best measured one (the upper end of
its interval; an indifference zone: configurations closer than that cannot be told apart on a noisy device) falls
below ``alpha`` (bounded by the sum of the chances, a union bound), after at least ``MIN_MEASURED`` measurements;
that chance is reported, with how much faster the most promising unmeasured configuration could be at 97.5%.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from gpuprofiler.tune.strategies.base import Strategy

MIN_MEASURED = 3
MIN_FOR_SLOPE = 4
MIN_ROBUST = 5
MIN_LOG_RANGE = 0.05  # the measured small figures must span this much (log units) to fix a slope
MIN_SPREAD = 0.01  # log units: no prediction is held tighter than this


class ModelGuided(Strategy):
    name = "model"

    def __init__(self, seed: int = 0, alpha: float = 0.05, tolerance: float = 0.05):
        super().__init__(seed)
        self.alpha = alpha
        self.tolerance = tolerance
        self.chance = math.nan  # at the stop: bound on the chance an unmeasured configuration beats the best
        self.reach = math.nan   # at the stop: how much faster (fraction) the most promising unmeasured one could be

    def search(self, tuner) -> None:
        ranked = []
        for config in tuner.candidates:
            small = tuner.rank(config)
            if math.isfinite(small) and small > 0:
                ranked.append((small, config))
            else:
                tuner.measure(config)  # fails at the small size: measured for the table (it will fail or tell)
        ranked.sort(key=lambda x: x[0])
        how = f"at size {tuner.rank_size}" if tuner.ranker == "sweep" else f"by {tuner.ranker} at {tuner.size}"
        tuner.say(f"ranked {len(ranked)} configuration(s) {how} in {tuner.rank_s:.1f} s")
        measured: list[tuple[float, float]] = []  # (small, target) of the measured ones
        widths: list[float] = []  # their figures' interval widths (log units)
        for i, (small, config) in enumerate(ranked):
            if tuner.exhausted:
                self.notes.append(f"budget reached after {tuner.measured_count} configuration(s)")
                return
            result = tuner.measure(config)
            if result.status == "ok":
                measured.append((small, result.seconds))
                rec = result.record
                widths.append(math.log(rec.get("model_ci_high_s") or result.seconds)
                              - math.log(rec.get("model_ci_low_s") or result.seconds))
            rest = [s for s, _ in ranked[i + 1:]]
            if len(measured) >= MIN_MEASURED and rest:
                self.chance, self.reach = self.out_of_reach(measured, rest, tuner.best(), self.tolerance,
                                                               float(np.median(widths)) / 2)
                if self.chance <= self.alpha:
                    self.notes.append(
                        f"stopped after {i + 1} of {len(ranked)} ranked configuration(s): the chance that one of the "
                        f"{len(rest)} unmeasured is more than {self.tolerance:.0%} faster than the best measured is at most "
                        f"{self.chance:.1%}; at 97.5% the most promising unmeasured one is "
                        + (f"at most {self.reach:.1%} faster" if self.reach > 0 else "no faster"))
                    return
        self.chance, self.reach = 0.0, 0.0
        self.notes.append(f"every one of the {len(ranked)} ranked configuration(s) measured")

    @staticmethod
    def out_of_reach(measured: list[tuple[float, float]], rest: list[float], best,
                     tolerance: float = 0.0, noise: float = 0.0) -> tuple[float, float]:
        """(bound on the chance that an unmeasured configuration is more than ``tolerance`` faster than the best
        measured figure's upper interval end, how much faster the most promising one could be at its 2.5%
        quantile). ``noise``: the measured figures' own spread (log units), a floor for the residual spread."""
        x = np.log([s for s, _ in measured])
        y = np.log([t for _, t in measured])
        x0 = np.log(rest)
        m = len(x)
        sxx = float(((x - x.mean()) ** 2).sum())
        if m >= MIN_FOR_SLOPE and np.ptp(x) >= MIN_LOG_RANGE:
            slope, intercept = (float(v) for v in stats.theilslopes(y, x)[:2])
            df = m - 2
            leverage = 1 / m + (x0 - x.mean()) ** 2 / sxx
        else:
            slope, df, leverage = 1.0, m - 1, np.full(len(x0), 1 / m)
            intercept = float(np.median(y - x))
        resid = y - (intercept + slope * x)
        if m >= MIN_ROBUST:
            spread = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
        else:
            spread = math.sqrt(float((resid ** 2).sum()) / df) if df > 0 else 0.0
        s = max(spread, noise, MIN_SPREAD)
        sd = s * np.sqrt(1 + leverage)
        predicted = intercept + slope * x0
        ceiling = float(best.record.get("model_ci_high_s") or best.seconds)
        law = stats.t(df=max(df, 1))
        chance = float(np.minimum(1.0, law.cdf((math.log(ceiling * (1 - tolerance)) - predicted) / sd).sum()))
        fastest = float(np.exp((predicted - law.ppf(0.975) * sd).min()))
        return chance, 1.0 - fastest / best.seconds
