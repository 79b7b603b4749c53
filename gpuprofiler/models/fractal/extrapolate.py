"""Predict a kernel's or a program's time at large sizes from a small-size sweep.

Follows the fractal method (Escobar & Boppana): rank the phases, keep the major ones (>= 70% of
the run by default) from the size where their shares are stable, fit each phase, extrapolate
each phase's share and the rest's, and total = sum(t_p) / sum(f_p). Per phase the law is chosen
by leave-one-out among the five laws of :mod:`.laws` (pure fractal, overhead-aware, Extra-P's
one-term form, the work law and, with a profile, the cache-aware law); polynomial baselines of
degree 1..4 are computed on the same points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.models.base import Prediction
from gpuprofiler.models.fractal.laws import Fractal, Polynomial, candidates, choose, rival_bounds
from gpuprofiler.workloads.sweep import Sweep

MIN_POINTS = 4


def major_phases(sweep: Sweep, coverage: float = 0.7) -> list[str]:
    """Phases by share of the run at the largest size, taken until they cover ``coverage``."""
    shares = {p: float(v[-1]) for p, v in sweep.shares().items()}
    chosen, total = [], 0.0
    for p in sorted(shares, key=lambda k: -shares[k]):
        if total >= coverage:
            break
        chosen.append(p)
        total += shares[p]
    return chosen


def stable_from(sweep: Sweep, phases: list[str], tolerance: float = 0.05, min_points: int = MIN_POINTS) -> int:
    """First size index from which every major phase's share stays within ``tolerance`` of its share at the
    largest size (kept to at least ``min_points`` sizes)."""
    shares = sweep.shares()
    n = len(sweep.sizes)
    start = n - 1
    for i in range(n - 1, -1, -1):
        if all(abs(shares[p][i] - shares[p][-1]) <= tolerance for p in phases):
            start = i
        else:
            break
    return max(0, min(start, n - min_points))


def _share_fit(sizes, shares, target) -> float:
    """A share extrapolated like a phase time (fractal law), kept within (0, 1]."""
    s = np.clip(np.asarray(shares, float), 1e-9, None)
    value = Fractal().fit(sizes, [[v] for v in s]).predict_value(target)
    return float(min(max(value, 1e-9), 1.0))


class SumOfLaws:
    """The minor phases' laws taken together: their predictions (and intervals, and rivals) added."""

    def __init__(self, parts: dict[str, Any]):
        self.parts = parts

    def predict(self, target: float) -> Prediction:
        preds = [m.predict(target) for m in self.parts.values()]
        laws = "+".join(sorted({p.model for p in preds}))
        return Prediction(target, sum(p.seconds for p in preds), sum(p.low for p in preds),
                          sum(p.high for p in preds), laws)

    def predict_value(self, target: float) -> float:
        return sum(m.predict_value(target) for m in self.parts.values())

    def rival_bounds(self, target: float) -> tuple[float, float]:
        bounds = [rival_bounds(m, target) for m in self.parts.values()]
        return sum(b[0] for b in bounds), sum(b[1] for b in bounds)


@dataclass
class PhaseFit:
    name: str
    model: Any
    fractal: Fractal
    scores: dict[str, float]


@dataclass
class Extrapolation:
    sweep: Sweep
    used: list[int]
    phases: list[str]
    fits: dict[str, PhaseFit] = field(default_factory=dict)
    rest: bool = False
    warnings: list[str] = field(default_factory=list)
    rest_fit: Any = None

    def predict(self, target: int, which: str = "chosen") -> Prediction:
        """Whole-run prediction at ``target`` with the chosen per-phase laws (or ``fractal`` only); its summary
        names the laws, its details hold the phases (``name, model, m, d, r2, predicted_s, interval_s, params,
        loo_error, share``), ``major_share`` and, where the minor phases were fitted, ``rest_s``."""
        sub = self.sweep.subset(self.used)
        shares = sub.shares()
        phase_out = []
        t_sum = lo_sum = hi_sum = rlo_sum = rhi_sum = 0.0
        for p in self.phases:
            fit = self.fits[p]
            model = fit.model if which == "chosen" else fit.fractal
            pred = model.predict(target)
            frac = fit.fractal.predict(target)
            # the laws the small sizes could not tell apart: their spread is reported beside the interval (the
            # chosen law's own uncertainty), not folded into it
            rlo, rhi = rival_bounds(model, target) if which == "chosen" else (pred.seconds, pred.seconds)
            phase_out.append({"name": p, "model": pred.model, "m": frac.details["m"], "d": frac.details["d"],
                              "r2": frac.details["r2"], "predicted_s": pred.seconds,
                              "interval_s": [pred.low, pred.high], "rivals_s": [rlo, rhi], "params": pred.details,
                              "loo_error": fit.scores})
            t_sum += pred.seconds
            lo_sum += pred.low
            hi_sum += pred.high
            rlo_sum += rlo
            rhi_sum += rhi
        if self.rest and which == "chosen" and self.rest_fit is not None:
            # beyond the paper: the minor phases' time is a series of its own, fitted and chosen like a phase,
            # instead of dividing by extrapolated shares (a power law on a slowly drifting share amplifies noise)
            rest = self.rest_fit.predict(target)
            rlo, rhi = self.rest_fit.rival_bounds(target)
            total = t_sum + rest.seconds
            for ph in phase_out:
                ph["share"] = ph["predicted_s"] / total
            laws = "+".join(sorted({ph["model"] for ph in phase_out} | {f"rest:{rest.model}"}))
            return Prediction(int(target), total, lo_sum + rest.low, hi_sum + rest.high, "fractal", laws,
                              {"major_share": t_sum / total, "rest_s": rest.seconds, "phases": phase_out,
                               "rivals_s": [rlo_sum + rlo, rhi_sum + rhi]})
        if self.rest:
            f = {p: _share_fit(sub.sizes, shares[p], target) for p in self.phases}
            rest_share = max(1.0 - sum(shares[p][-1] for p in self.phases), 1e-9)
            rest = np.clip(1.0 - sum(shares[p] for p in self.phases), 1e-9, None)
            f0 = _share_fit(sub.sizes, rest, target) if np.all(rest > 1e-6) else rest_share
            norm = sum(f.values()) + f0
            fsum = sum(f.values()) / norm
        else:
            fsum = 1.0
        for ph in phase_out:
            ph["share"] = ph["predicted_s"] / t_sum / (1.0 / fsum) if t_sum > 0 else None
        laws = which if which != "chosen" else "+".join(sorted({ph["model"] for ph in phase_out}))
        return Prediction(int(target), t_sum / fsum, lo_sum / fsum, hi_sum / fsum, "fractal", laws,
                          {"major_share": fsum, "phases": phase_out, "rivals_s": [rlo_sum / fsum, rhi_sum / fsum]})

    def baselines(self, target: int) -> dict[str, float | None]:
        """Whole-run totals predicted by polynomials of degree 1..4 and by each scaling law fitted to the totals
        (not per phase), on the same sizes."""
        sub = self.sweep.subset(self.used)
        out: dict[str, float | None] = {}
        for deg in (1, 2, 3, 4):
            if len(sub.sizes) > deg:
                out[f"poly{deg}"] = Polynomial(deg).fit(sub.sizes, sub.totals).predict_value(target)
            else:
                out[f"poly{deg}"] = None
        for name, factory in candidates().items():
            try:
                out[f"{name} (whole run)"] = factory().fit(sub.sizes, sub.totals).predict_value(target)
            except (ValueError, RuntimeError):
                out[f"{name} (whole run)"] = None
        return out


def counted_work_law(sizes: list[int], counts: list[float | None] | None, tolerance: float = 1e-3):
    """W(n) = a * n^p through a phase's counted work (bytes copied, work-items launched) at the small sizes, when
    every size has a count and the law holds to ``tolerance`` (relative) at each: counts are exact, so a law
    that does not fit them (iterations that depend on the data, say) is not one to extrapolate. Else None."""
    if not counts or len(counts) < 3 or any(c is None or c <= 0 for c in counts):
        return None
    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(counts, float))
    p, b = np.polyfit(x, y, 1)
    if np.max(np.abs(np.expm1(y - (b + p * x)))) > tolerance or p < 0.1:  # constant work: no law of the size
        return None
    return lambda n: math.exp(b) * float(n) ** p


def extrapolate(sweep: Sweep, coverage: float = 0.7, c0: float | None = None, tolerance: float = 0.05,
                working_set=None, curve=None, work=None, cache_cost=None, misses=None) -> Extrapolation:
    """Choose phases and sizes, fit every major phase (law by leave-one-out). With the profile's read bandwidth
    against working set (``curve``: (bytes, B/s) pairs) and the item's working-set function, the cache-aware
    law competes too."""
    phases = major_phases(sweep, coverage)
    start = stable_from(sweep, phases, tolerance)
    used = list(range(start, len(sweep.sizes)))
    sub = sweep.subset(used)
    ex = Extrapolation(sweep, used, phases, rest=len(phases) < len(sweep.phases))
    for p in phases:
        samples = [np.maximum(v, 1e-12) for v in sub.phases[p]]
        # the declared work count describes a single-kernel spec; a program's phases have the work the run
        # wrapper counted, where it follows an exact law of the size
        phase_work = work if len(sweep.phases) == 1 else counted_work_law(sub.sizes, sub.work.get(p))
        single = len(sweep.phases) == 1
        model, scores = choose(sub.sizes, samples, c0, working_set, curve, phase_work,
                               cache_cost if single else None, misses if single else None)
        ex.fits[p] = PhaseFit(p, model, Fractal().fit(sub.sizes, samples), scores)
    if ex.rest:
        # the minor phases one by one, each with the work the wrapper counted for it where that follows a law (a
        # copy's bytes): their sum fitted as one series bent to a size-specific jump (a page-faulting copy) and
        # went 7x wrong 8x further out
        parts = {}
        for p in sweep.phases:
            if p not in phases:
                samples = [np.maximum(v, 1e-12) for v in sub.phases[p]]
                parts[p], _ = choose(sub.sizes, samples, c0, work=counted_work_law(sub.sizes, sub.work.get(p)))
        ex.rest_fit = SumOfLaws(parts)
    if start > 0:
        ex.warnings.append(f"phase shares are stable from size {sweep.sizes[start]}: the {start} smaller size(s) "
                           "are not used")
    return ex
