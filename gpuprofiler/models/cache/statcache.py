"""Miss ratios for any cache size from a sparse sample of reuse distances.

A sample is the forward reuse distances of randomly chosen accesses: the accesses between each and the next
access to its line (``inf`` where none follows inside what was looked at: the line is not reused in time).

* :func:`statcache` -- Hagersten's StatCache, the model in Monakov et al.: a cache of L lines with random
  replacement keeps a line through one miss with probability 1 - 1/L, so a line reused after d accesses survives
  the R*d misses in between with probability (1 - 1/L)^(R d); the miss ratio R solves
  R = mean over samples of 1 - (1 - 1/L)^(R d) (a non-reused sample always misses).
* :func:`statstack` -- the same sample turned into LRU stack distances (Eklov and Hagersten's StatStack): in a
  window of d accesses the expected number of distinct lines is sum_{k=0..d-1} P(RD >= k), each position being the
  window's last touch of its line with the probability that its own reuse lies past the window's end; an LRU
  cache of L lines misses a reuse whose stack distance is at least L. The stack distance is taken as normal around
  that mean (variance sum P(1 - P)) rather than as its mean, which biased random access near the cache's size
  (0.20 for 0.15 with 256 of 300 lines).

Both take the reuse distances of the sample and the cache sizes in lines, and return one miss ratio per size.
"""

from __future__ import annotations

import math

import numpy as np


def _clean(distances) -> np.ndarray:
    d = np.asarray(distances, dtype=float)
    if d.ndim != 1 or not len(d):
        raise ValueError("no reuse distances sampled")
    return np.where(np.isfinite(d) & (d >= 0), d, np.inf)


def _cold_share(d: np.ndarray, cold: float | None) -> tuple[float, float]:
    """The share of accesses never reused (the sample's own, or ``cold`` where it was counted exactly) and the
    weight of one reused sample."""
    finite = int(np.isfinite(d).sum())
    share = 1.0 - finite / len(d) if cold is None else float(cold)
    return share, (1.0 - share) / max(finite, 1)


def statcache(distances, cache_lines, cold: float | None = None) -> np.ndarray:
    """Random-replacement miss ratio for each cache size (lines) from sampled reuse distances (``cold``: the exact
    share of accesses never reused, where it was counted rather than sampled)."""
    d = _clean(distances)
    finite = d[np.isfinite(d)]
    cold, weight = _cold_share(d, cold)
    out = []
    for lines in np.atleast_1d(cache_lines):
        keep = math.log1p(-1.0 / max(float(lines), 1.0 + 1e-12)) if lines > 1 else -np.inf

        def excess(r: float) -> float:
            return cold + float(np.sum(-np.expm1(keep * r * finite))) * weight - r

        lo, hi = 0.0, 1.0  # excess(0) = cold >= 0, excess(1) <= 0: bisect for the largest root
        if excess(hi) >= 0:
            out.append(1.0)
            continue
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if excess(mid) > 0:
                lo = mid
            else:
                hi = mid
        # the trivial root R = 0 (no misses, nothing evicted) exists only without cold misses; the fixed point
        # reached from above is the physical one
        out.append(hi if cold > 0 or excess(hi) <= 0 else 0.0)
    return np.array(out)


def _stack_moments(distances) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sample's reuse distances sorted, and at each the mean and variance of its LRU stack distance: the lines
    touched in a window of d accesses, each position the last touch of its line with probability S(k), k positions
    from the window's end (S(k) = P(RD >= k) from the sample): mean sum S(k), variance sum S(k)(1 - S(k))."""
    d = np.sort(_clean(distances))
    finite = d[np.isfinite(d)]
    n = len(d)
    mean = np.full(n, np.inf)
    var = np.zeros(n)
    if not len(finite):
        return d, mean, var
    # S is a step function: for k in (v_{i-1}, v_i] it is (samples >= v_i) / n, v_0 = -1
    values, counts = np.unique(finite, return_counts=True)
    s = (n - np.concatenate([[0], np.cumsum(counts)[:-1]])) / n
    widths = np.diff(np.concatenate([[-1.0], values]))
    through_m = np.cumsum(widths * s)  # sum_{k=0..v_i} S(k)
    through_v = np.cumsum(widths * s * (1 - s))
    idx = np.searchsorted(values, finite)
    mean[: len(finite)] = (through_m - s)[idx]  # sum_{k=0..v_i - 1}: drop the k = v_i term
    var[: len(finite)] = np.maximum(through_v - s * (1 - s), 0.0)[idx]
    return d, mean, var


def expected_stack_distance(distances) -> tuple[np.ndarray, np.ndarray]:
    """The sample's reuse distances, sorted, and the expected LRU stack distance at each of them:
    sd(d) = sum_{k=0..d-1} S(k), S(k) = P(RD >= k) from the sample (a non-reused sample never comes back: inf)."""
    d, mean, _ = _stack_moments(distances)
    return d, mean


def miss_probability(distances, cache_lines: float) -> np.ndarray:
    """Per sample (in sorted order), the probability that an LRU cache of ``cache_lines`` lines misses its reuse:
    P(stack distance >= L), the stack distance taken as normal with the moments of :func:`_stack_moments` (exactly
    a step where the window's lines are certain, as in a cyclic sweep)."""
    from scipy.special import ndtr

    _, mean, var = _stack_moments(distances)
    out = np.ones(len(mean))
    finite = np.isfinite(mean)
    sd = np.sqrt(var[finite])
    z = np.where(sd > 0, (mean[finite] - (cache_lines - 0.5)) / np.maximum(sd, 1e-300),
                 np.where(mean[finite] >= cache_lines, np.inf, -np.inf))
    out[finite] = ndtr(z)
    return out


def stack_distance_of(distances) -> np.ndarray:
    """The expected LRU stack distance of each sampled reuse distance, in the sample's own order."""
    d = _clean(distances)
    order = np.argsort(d, kind="stable")
    _, sd_sorted = expected_stack_distance(d)
    out = np.empty(len(d))
    out[order] = sd_sorted
    return out


def statstack(distances, cache_lines, cold: float | None = None) -> np.ndarray:
    """LRU miss ratio for each cache size (lines) from sampled reuse distances (``cold`` as in :func:`statcache`)."""
    d = _clean(distances)
    share, weight = _cold_share(d, cold)
    reused = int(np.isfinite(d).sum())
    # miss_probability lists the reused samples first (sorted order), then the never reused
    return np.array([share + weight * float(np.sum(miss_probability(d, float(lines))[:reused]))
                     for lines in np.atleast_1d(cache_lines)])


def miss_ratio_curve(distances, max_lines: int, points: int = 64, model: str = "lru",
                     cold: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Miss ratio against cache size, sizes log-spaced from 1 line to ``max_lines`` (``cold`` as in
    :func:`statcache`)."""
    sizes = np.unique(np.round(np.geomspace(1, max(max_lines, 2), points)).astype(np.int64))
    fn = statstack if model == "lru" else statcache
    return sizes, fn(distances, sizes, cold=cold)
