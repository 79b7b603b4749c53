"""Whether a kernel became slower than its baseline: a one-sided bootstrap test on the modelling figure.

The figure compared is the one the models use (the 10th percentile of the device times, :mod:`gpuprofiler.measure.
stats`): on a shared device other work only ever slows runs down, so the fast runs are the kernel's own time, and
their figure reproduces between runs minutes apart where a median, a mix of fast and slowed runs, moves by tens of
percent. The test: H0 "the current figure is at most (1 + threshold) x the baseline's". Each sample set is
resampled with replacement (``RESAMPLES`` times, a fixed seed, so a decision is reproducible), the ratio of the two
figures taken each time; H0 is rejected (a regression) when the ``alpha`` quantile of those ratios lies above
1 + threshold. The false-alarm rate is then at most ``alpha`` for a kernel whose true slowdown is within the
threshold, and a kernel that is unchanged is far inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprofiler.measure.stats import MODEL_QUANTILE
from gpuprofiler.testing.options import ALPHA

RESAMPLES = 2000
SEED = 20261125
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Comparison:
    """The current figure against the baseline's: their ratio with its bootstrap interval, and the verdict."""

    ratio: float
    low: float      # the ratio's one-sided lower bound at 1 - alpha
    high: float     # its upper bound at 1 - alpha
    threshold: float | None
    alpha: float
    verdict: str    # "regressed" (fails the test), "slower", "faster", "unchanged" or "too few samples"

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    def sentence(self) -> str:
        bound = (f"; fails past +{self.threshold:.0%} with a {self.alpha:g} false-alarm rate"
                 if self.threshold is not None else "")
        return (f"{self.change:+.1%} against the baseline (ratio {self.ratio:.3f}, one-sided {1 - self.alpha:.0%} "
                f"bounds {self.low:.3f} .. {self.high:.3f}): {self.verdict}{bound}")


def _figures(samples: np.ndarray, picks: np.ndarray) -> np.ndarray:
    return np.quantile(samples[picks], MODEL_QUANTILE, axis=1)


def _clean(samples) -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    return x[np.isfinite(x) & (x > 0)]


def compare(baseline, current, threshold: float | None = None, alpha: float = ALPHA,
            resamples: int = RESAMPLES, seed: int = SEED, sessions=None) -> Comparison:
    """The bootstrap test of ``current`` against ``baseline`` (raw device times of each). ``threshold`` (0.10: 10%)
    is the slowdown a regression must exceed with confidence 1 - ``alpha``; None reports without failing.

    ``sessions`` (the raw times of each of several baseline sessions, ``baseline`` ignored then) adds what moves
    a kernel between sessions: each resample takes one session's samples for the baseline, times the ratio of two
    sessions' figures for the current session's own unknown offset, so the ratio's spread holds the between-session
    variance twice (the baseline's and the current's), as the difference of two sessions does."""
    runs = [r for r in (_clean(x) for x in (sessions if sessions else [baseline])) if len(r) >= MIN_SAMPLES]
    cur = _clean(current)
    if threshold is not None and not (threshold >= 0 and np.isfinite(threshold)):
        raise ValueError(f"a slowdown threshold must be a non-negative fraction, got {threshold!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must lie between 0 and 0.5, got {alpha!r}")
    if not runs or len(cur) < MIN_SAMPLES:
        nan = float("nan")
        return Comparison(nan, nan, nan, threshold, alpha, "too few samples")
    figures = np.array([np.quantile(r, MODEL_QUANTILE) for r in runs])
    ratio = float(np.quantile(cur, MODEL_QUANTILE) / np.median(figures))
    rng = np.random.default_rng(seed)
    cur_figs = _figures(cur, rng.integers(0, len(cur), (resamples, len(cur))))
    pick = rng.integers(0, len(runs), resamples)
    base_figs = np.empty(resamples)
    for j, run in enumerate(runs):
        at = np.flatnonzero(pick == j)
        if len(at):
            base_figs[at] = _figures(run, rng.integers(0, len(run), (len(at), len(run))))
    offset = figures[rng.integers(0, len(runs), resamples)] / figures[rng.integers(0, len(runs), resamples)]
    ratios = cur_figs / base_figs * offset
    low, high = (float(v) for v in np.quantile(ratios, [alpha, 1.0 - alpha]))
    if threshold is not None and low > 1.0 + threshold:
        verdict = "regressed"
    elif low > 1.0:
        verdict = "slower"
    elif high < 1.0:
        verdict = "faster"
    else:
        verdict = "unchanged"
    return Comparison(ratio, low, high, threshold, alpha, verdict)
