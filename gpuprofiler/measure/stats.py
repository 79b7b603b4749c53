"""Summary statistics of timing samples: median with a distribution-free interval, spread, and the modes of a
timing distribution that is a mix (a shared device: fast runs and runs slowed by other work)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
from scipy.special import bdtr

# The figure the models fit and predict: the 10th percentile of the device times. On a shared device the other
# tenants only ever slow a run down, so the fast runs are the kernel's own time; their figure reproduces between
# runs minutes apart where the median, a mix of fast and slowed runs, moves by tens of percent (README,
# "Which figure is modelled").
MODEL_QUANTILE = 0.10
MODEL_STATISTIC = "p10"
MODEL_DESCRIPTION = "10th percentile of the device times (the runs no other work slowed), linearly interpolated"


@lru_cache(maxsize=4096)
def _order_bounds(n: int, q: float, confidence: float) -> tuple[int, int, float]:
    """The 1-based order statistics (i, j) that bound the ``q`` quantile of ``n`` samples, and their coverage."""
    tail = (1 - confidence) / 2
    cdf = bdtr(np.arange(n + 1), n, q)  # cdf[k]: P(at most k samples below the quantile)
    i = max(1, int(np.count_nonzero(cdf <= tail)))  # 1-based; P(X_(i) above the quantile) = cdf[i-1]
    j = min(n, int(np.count_nonzero(cdf < 1 - tail)) + 1)  # P(X_(j) below the quantile) = 1 - cdf[j-1]
    return i, j, float(cdf[j - 1] - cdf[i - 1])


def quantile_interval(samples, q: float, confidence: float = 0.95) -> tuple[float, float, float]:
    """Order-statistic interval of the ``q`` quantile and its exact coverage (binomial, no distribution assumed).

    Each end is the order statistic with at most (1 - confidence)/2 binomial probability beyond it; with too few
    samples for that, the extreme order statistics are returned with their (lower) coverage."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), 0.0
    i, j, coverage = _order_bounds(n, q, confidence)
    return float(x[i - 1]), float(x[j - 1]), coverage


def tight(samples, statistic: str, rel: float, confidence: float) -> bool:
    """``summarize(samples, confidence).tight(statistic, rel, confidence)`` without the rest of the summary: the
    timing loop asks it after every round, and a whole summary cost more than a short kernel's run."""
    n = len(samples)
    if n == 0:
        return False
    q = 0.5 if statistic == "median" else MODEL_QUANTILE
    i, j, coverage = _order_bounds(n, q, confidence)
    if coverage < confidence:
        return False
    x = sorted(map(float, samples))
    return _rel_halfwidth(_sorted_quantile(x, q), x[i - 1], x[j - 1]) <= rel


def _sorted_quantile(x: list[float], q: float) -> float:
    """``np.quantile(x, q)`` (linear, as numpy rounds it) of a sorted list, without numpy's cost per call: the
    check runs after every round of a timing loop, and numpy's quantile took a second of a calibration's CPU."""
    at = (len(x) - 1) * q
    lo = int(at)
    hi = min(lo + 1, len(x) - 1)
    t = at - lo
    d = x[hi] - x[lo]
    return x[hi] - d * (1 - t) if t >= 0.5 else x[lo] + d * t


def median_interval(samples, confidence: float = 0.95) -> tuple[float, float, float]:
    """Order-statistic interval of the median and its exact coverage (binomial, no normality assumed).

    With fewer than 6 samples no pair of order statistics reaches 95%; the
    minimum and maximum are returned with their (lower) coverage.
    """
    return quantile_interval(samples, 0.5, confidence)


def model_value(samples) -> float:
    """The modelling figure (:data:`MODEL_STATISTIC`) of the samples."""
    x = np.asarray(samples, dtype=float)
    return float(np.quantile(x, MODEL_QUANTILE)) if len(x) else float("nan")


@dataclass
class Summary:
    """Median, minimum, IQR, CV and the median's interval of a sample set, and the modelling figure ``model``
    (:data:`MODEL_STATISTIC`) with its interval."""

    n: int
    median: float
    minimum: float
    maximum: float
    mean: float
    q1: float
    q3: float
    iqr: float
    cv: float
    ci_low: float
    ci_high: float
    ci_coverage: float
    model: float = float("nan")
    model_ci_low: float = float("nan")
    model_ci_high: float = float("nan")
    model_ci_coverage: float = 0.0

    @property
    def rel_halfwidth(self) -> float:
        """Largest distance from the median to an interval end, relative to the median."""
        return _rel_halfwidth(self.median, self.ci_low, self.ci_high)

    @property
    def model_rel_halfwidth(self) -> float:
        """Largest distance from the modelling figure to an end of its interval, relative to the figure."""
        return _rel_halfwidth(self.model, self.model_ci_low, self.model_ci_high)

    def tight(self, statistic: str, rel: float, confidence: float) -> bool:
        """Whether the interval of ``statistic`` ("model" or "median") reaches ``confidence`` within ``rel``."""
        if statistic == "median":
            return self.ci_coverage >= confidence and self.rel_halfwidth <= rel
        return self.model_ci_coverage >= confidence and self.model_rel_halfwidth <= rel

    def to_dict(self) -> dict:
        return asdict(self)


def _rel_halfwidth(value: float, low: float, high: float) -> float:
    if not value > 0:
        return float("inf")
    return max(value - low, high - value) / value


def summarize(samples, confidence: float = 0.95) -> Summary:
    x = np.asarray(samples, dtype=float)
    if len(x) == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0.0)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    lo, hi, cov = median_interval(x, confidence)
    mlo, mhi, mcov = quantile_interval(x, MODEL_QUANTILE, confidence)
    mean = float(np.mean(x))
    cv = float(np.std(x, ddof=1) / mean) if len(x) > 1 and mean > 0 else 0.0
    return Summary(len(x), float(med), float(x.min()), float(x.max()), mean, float(q1), float(q3),
                   float(q3 - q1), cv, lo, hi, cov, model_value(x), mlo, mhi, mcov)


MIN_MODE_SAMPLES = 10   # fewer samples than this are one mode
MIN_MODE_SHARE = 0.05   # a mode holds at least this share of the samples
PEAK_FLOOR = 0.1        # and its density peak reaches at least this share of the highest one


def _density(y: np.ndarray, grid: np.ndarray, chunk: int = 4096) -> np.ndarray | None:
    """A Gaussian kernel density of ``y`` on ``grid`` with Silverman's bandwidth, as scipy's ``gaussian_kde(y,
    "silverman")`` gives it in one dimension (here in numpy: a measuring worker then does not import scipy.stats,
    1.2 s); None where the samples have no spread."""
    h2 = float(np.var(y, ddof=1)) * (0.75 * len(y)) ** -0.4
    if not (np.isfinite(h2) and h2 > 0):
        return None
    d = np.zeros(len(grid))
    for start in range(0, len(y), chunk):
        part = y[start:start + chunk]
        d += np.exp(-0.5 * (grid[:, None] - part[None, :]) ** 2 / h2).sum(axis=1)
    return d / (len(y) * np.sqrt(2 * np.pi * h2))


def modes(samples) -> list[dict[str, float]]:
    """The modes of the samples' distribution, fastest first: each ``{"median_s", "share", "low_s", "high_s"}``.

    A Gaussian kernel density of log(time) (Silverman's bandwidth) is cut at the lowest point between each
    pair of neighbouring peaks; a peak below ``PEAK_FLOOR`` of the highest, or holding under
    ``MIN_MODE_SHARE`` of the samples, joins its neighbour. One mode is a unimodal distribution."""
    x = np.sort(np.asarray(samples, dtype=float))
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) == 0:
        return []
    cuts: list[float] = []
    y = np.log(x)
    if len(x) >= MIN_MODE_SAMPLES and np.ptp(y) > 0:
        grid = np.linspace(y[0], y[-1], 512)
        d = _density(y, grid)
        if d is not None:
            peaks = [i for i in range(1, len(d) - 1) if d[i] > d[i - 1] and d[i] >= d[i + 1]]
            peaks = [i for i in peaks if d[i] >= PEAK_FLOOR * d.max()]
            cuts = [float(grid[a + int(np.argmin(d[a:b + 1]))]) for a, b in zip(peaks, peaks[1:])]
    groups = np.split(x, np.searchsorted(y, cuts)) if cuts else [x]
    merged: list[np.ndarray] = []
    for g in groups:
        if merged and (len(g) < MIN_MODE_SHARE * len(x) or len(merged[-1]) < MIN_MODE_SHARE * len(x)):
            merged[-1] = np.concatenate([merged[-1], g])
        elif len(g):
            merged.append(g)
    return [{"median_s": float(np.median(g)), "share": len(g) / len(x), "low_s": float(g[0]),
             "high_s": float(g[-1])} for g in merged]


def spread(samples) -> float:
    """How far the slow runs sit from the fast ones: the 90th over the 10th percentile (1: all alike)."""
    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) == 0:
        return float("nan")
    p10, p90 = np.percentile(x, [10, 90])
    return float(p90 / p10)
