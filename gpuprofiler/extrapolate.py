"""`gpuprofiler extrapolate`: predict a kernel's or a program's time at large sizes from a small-size sweep.

Follows the fractal method (Escobar & Boppana): rank the phases, keep the major ones (>= 70% of
the run by default) from the size where their shares are stable, fit each phase, extrapolate
each phase's share and the rest's, and total = sum(t_p) / sum(f_p). Per phase the model is
chosen by leave-one-out among the pure fractal law, an overhead-aware law and Extra-P's one-term
form; polynomial baselines of degree 1..4 are computed on the same points. With a hardware
profile the small sizes can be chosen on the target's side of the last-level cache, and a
target that crosses a regime boundary the small sizes do not is warned about.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuprofiler.models.scaling import Fractal, Polynomial, candidates, choose, rival_bounds
from gpuprofiler.sweep import Sweep

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

    def predict(self, target: int, which: str = "chosen") -> dict[str, Any]:
        """Whole-run prediction at ``target`` with the chosen per-phase models (or ``fractal`` only)."""
        sub = self.sweep.subset(self.used)
        shares = sub.shares()
        phase_out = []
        t_sum = lo_sum = hi_sum = 0.0
        for p in self.phases:
            fit = self.fits[p]
            model = fit.model if which == "chosen" else fit.fractal
            pred = model.predict(target)
            frac = fit.fractal.predict(target)
            if which == "chosen":  # laws the data could not tell apart widen the interval
                lo, hi = rival_bounds(model, target)
                pred = replace(pred, low=min(pred.low, lo), high=max(pred.high, hi))
            phase_out.append({"name": p, "model": pred.model, "m": frac.params["m"], "d": frac.params["d"],
                              "r2": frac.params["r2"], "predicted_s": pred.value,
                              "interval_s": [pred.low, pred.high], "params": pred.params,
                              "loo_error": fit.scores})
            t_sum += pred.value
            lo_sum += pred.low
            hi_sum += pred.high
        if self.rest and which == "chosen" and self.rest_fit is not None:
            # beyond the paper: the minor phases' time is a series of its own, fitted and chosen like a phase,
            # instead of dividing by extrapolated shares (a power law on a slowly drifting share amplifies noise)
            rest = self.rest_fit.predict(target)
            lo, hi = rival_bounds(self.rest_fit, target)
            rest = replace(rest, low=min(rest.low, lo), high=max(rest.high, hi))
            fsum = t_sum / (t_sum + rest.value)
            for ph in phase_out:
                ph["share"] = ph["predicted_s"] / (t_sum + rest.value)
            return {"size": int(target), "predicted_s": t_sum + rest.value,
                    "interval_s": [lo_sum + rest.low, hi_sum + rest.high],
                    "model": "+".join(sorted({ph["model"] for ph in phase_out} | {f"rest:{rest.model}"})),
                    "major_share": fsum, "rest_s": rest.value, "phases": phase_out}
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
        return {"size": int(target), "predicted_s": t_sum / fsum, "interval_s": [lo_sum / fsum, hi_sum / fsum],
                "model": which if which != "chosen" else "+".join(sorted({ph["model"] for ph in phase_out})),
                "major_share": fsum, "phases": phase_out}

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
                working_set=None, profile=None, work=None) -> Extrapolation:
    """Choose phases and sizes, fit every major phase (model by leave-one-out). With a profile that has a
    bandwidth-versus-working-set curve and the item's working-set function, the cache-aware law competes too."""
    curve = (profile.data.get("bandwidth") or {}).get("working_set_curve") if profile is not None else None
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
        model, scores = choose(sub.sizes, samples, c0, working_set, curve, phase_work)
        ex.fits[p] = PhaseFit(p, model, Fractal().fit(sub.sizes, samples), scores)
    if ex.rest:
        rest = [np.maximum(tot - sum(sub.phases[p][i] for p in phases), 1e-12)
                for i, tot in enumerate(sub.totals)]
        ex.rest_fit, _ = choose(sub.sizes, rest, c0)
    if start > 0:
        ex.warnings.append(f"phase shares are stable from size {sweep.sizes[start]}: the {start} smaller size(s) "
                           "are not used")
    return ex


def cache_boundaries(profile) -> list[tuple[str, float]]:
    """Cache sizes that bound a regime: the latency knees, and the streaming knee (the last-level cache as a
    stream sees it, which on CPUs with a large shared cache lies well past the latency knee)."""
    out = [(f"L{c['level']} cache ({c['size_bytes'] / 2**20:.1f} MiB, latency knee)", float(c["size_bytes"]))
           for c in (profile.data.get("caches") or [])]
    stream = profile.get("bandwidth.streaming_llc_bytes", None)
    if stream:
        out.append((f"the last-level cache as streams see it ({stream / 2**20:.0f} MiB)", float(stream)))
    return out


def regime_warnings(small: list[int], targets: list[int], working_set, work_items, profile) -> list[str]:
    """Warnings for targets on the other side of a cache size or of the device's concurrency than the small sizes."""
    if profile is None:
        return []
    out = []
    bounds = [(name, size, working_set) for name, size in cache_boundaries(profile)]
    conc = profile.get("concurrency.work_items", None)
    if conc:
        bounds.append((f"the device's concurrency ({conc:.0f} work-items at once)", float(conc), work_items))
    for name, limit, measure in bounds:
        if measure is None:
            continue
        try:
            small_vals = [measure(s) for s in small]
        except Exception:  # noqa: BLE001 - a size the item cannot evaluate
            continue
        if any(v is None for v in small_vals):
            continue
        small_min, small_max = min(small_vals), max(small_vals)
        what = "working set" if measure is working_set else "work-items"
        for t in targets:
            tv = measure(t)
            if tv is None:
                continue
            if tv > limit >= small_max:
                out.append(f"target {t}: its {what} ({_fmt(tv, what)}) exceeds {name}, which the small sizes "
                           f"(at most {_fmt(small_max, what)}) stay within: expect a regime change the fit cannot see")
            elif tv > limit and small_min <= limit < small_max:
                out.append(f"target {t}: the small sizes' {what} ({_fmt(small_min, what)} .. "
                           f"{_fmt(small_max, what)}) straddles {name}, which the target ({_fmt(tv, what)}) is "
                           "past: the fit mixes two regimes and its slope need not hold past the boundary")
    return out


def _fmt(v: float, what: str) -> str:
    return f"{v / 2**20:.1f} MiB" if what == "working set" else f"{v:.0f}"


def hardware_sizes(target: int, working_set, profile, count: int = 6, ratio: float = 8.0,
                   margin: float = 1.5) -> tuple[list[int], list[str]]:
    """Small sizes up to target/ratio whose working sets are on the target's side of the last-level cache."""
    notes = []
    hi = max(2, int(target / ratio))
    bounds = cache_boundaries(profile) if profile is not None else []
    lo = max(1, hi // 16)
    if bounds and working_set is not None:
        llc = max(size for _, size in bounds)
        if working_set(target) > llc:
            n = 1
            while working_set(n) <= margin * llc and n < target:
                n *= 2
            # bisect down to the smallest size past margin * LLC
            a, b = n // 2, n
            while b - a > 1:
                mid = (a + b) // 2
                if working_set(mid) > margin * llc:
                    b = mid
                else:
                    a = mid
            lo = b
            if lo * 2 > hi:
                hi = max(hi, lo * 4)
                notes.append(f"to keep the small sizes past the last-level cache ({llc / 2**20:.1f} MiB) the largest "
                             f"small size is {hi}, only {target / hi:.1f}x below the target")
    grid = np.unique(np.round(np.geomspace(lo, hi, count)).astype(int))
    return [int(g) for g in grid], notes


def measured_total(sweep: Sweep) -> tuple[float, float, float]:
    """Median whole-run device time at the sweep's only size, with its interval."""
    from gpuprofiler.stats import summarize

    s = summarize(sweep.totals[0])
    return s.median, s.ci_low, s.ci_high


def report(ex: Extrapolation, targets: list[int], checks: dict[int, Sweep] | None = None,
           extrap: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One JSON-ready record per target: the chosen prediction, the pure fractal one, baselines, and with
    ``checks`` the measured time and the signed relative errors (predicted - measured) / measured."""
    from gpuprofiler.extrap_io import evaluate_model

    out = []
    for t in targets:
        rec = ex.predict(t)
        frac = ex.predict(t, which="fractal")
        rec["fractal_s"] = frac["predicted_s"]
        rec["fractal_interval_s"] = frac["interval_s"]
        rec["baselines_s"] = ex.baselines(t)
        if extrap:
            key = "total" if "total" in extrap else next(iter(extrap))
            try:
                rec["baselines_s"]["extrap"] = evaluate_model(extrap[key], "n", t)
                rec["extrap_model"] = extrap[key]
            except Exception as exc:  # noqa: BLE001 - an expression we cannot evaluate is reported, not fatal
                rec["extrap_error"] = str(exc)
        rec["small_sizes"] = [ex.sweep.sizes[i] for i in ex.used]
        rec["warnings"] = list(ex.warnings)
        if checks and t in checks:
            med, lo, hi = measured_total(checks[t])
            rec["measured_s"] = med
            rec["measured_interval_s"] = [lo, hi]
            rec["error"] = (rec["predicted_s"] - med) / med
            rec["fractal_error"] = (rec["fractal_s"] - med) / med
            rec["inside_interval"] = rec["interval_s"][0] <= med <= rec["interval_s"][1]
            rec["baseline_errors"] = {k: (None if v is None else (v - med) / med) for k, v in rec["baselines_s"].items()}
        out.append(rec)
    return out


def size_functions(item: Any, probe: int):
    """The item's working-set and work-item counts as functions of size (None where it declares none)."""
    from gpuprofiler.sweep import work_items, working_set

    ws = (lambda n: working_set(item, n)) if working_set(item, probe) is not None else None
    wi = (lambda n: work_items(item, n)) if work_items(item, probe) is not None else None
    return ws, wi


def analyse(item: Any, sweep: Sweep, targets: list[int], profile=None, coverage: float = 0.7,
            checks: dict[int, Sweep] | None = None, notes: list[str] | None = None, use_extrap: bool = True,
            say=None) -> tuple[Extrapolation, list[dict[str, Any]]]:
    """Fit a sweep of ``item`` and report every target: the one path shared by the CLI and the comparison script."""
    import subprocess

    from gpuprofiler.extrap_io import extrap_models
    from gpuprofiler.sweep import work_count

    ws, wi = size_functions(item, targets[0])
    c0 = profile.get("launch.event_s", None) if profile is not None else None
    ex = extrapolate(sweep, coverage=coverage, c0=c0, working_set=ws, profile=profile, work=work_count(item))
    ex.warnings += list(notes or []) + regime_warnings([sweep.sizes[i] for i in ex.used], targets, ws, wi, profile)
    extrap = None
    if use_extrap:
        try:
            extrap = extrap_models(ex.sweep.subset(ex.used))
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
            if say:
                say(f"Extra-P baseline skipped: {exc}")
    return ex, report(ex, targets, checks, extrap)
