"""Summary statistics of timing samples: median with a distribution-free interval, spread."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


def median_interval(samples, confidence: float = 0.95) -> tuple[float, float, float]:
    """Order-statistic interval of the median and its exact coverage (binomial, no normality assumed).

    With fewer than 6 samples no pair of order statistics reaches 95%; the
    minimum and maximum are returned with their (lower) coverage.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), 0.0
    cdf = stats.binom.cdf(np.arange(n), n, 0.5)
    j = max(1, int(np.count_nonzero(cdf <= (1 - confidence) / 2)))  # 1-based order statistic
    coverage = 1.0 - 2.0 * float(stats.binom.cdf(j - 1, n, 0.5))
    return float(x[j - 1]), float(x[n - j]), float(coverage)


@dataclass
class Summary:
    """Median, minimum, IQR, CV and the median's interval of a sample set."""

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

    @property
    def rel_halfwidth(self) -> float:
        """Largest distance from the median to an interval end, relative to the median."""
        if not self.median > 0:
            return float("inf")
        return max(self.median - self.ci_low, self.ci_high - self.median) / self.median

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples, confidence: float = 0.95) -> Summary:
    x = np.asarray(samples, dtype=float)
    if len(x) == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0.0)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    lo, hi, cov = median_interval(x, confidence)
    mean = float(np.mean(x))
    cv = float(np.std(x, ddof=1) / mean) if len(x) > 1 and mean > 0 else 0.0
    return Summary(len(x), float(med), float(x.min()), float(x.max()), mean, float(q1), float(q3),
                   float(q3 - q1), cv, lo, hi, cov)
