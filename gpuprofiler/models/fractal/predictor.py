"""The fractal extrapolator as a predictor: fitted on a sweep of an item's small sizes, it predicts its large
sizes (Escobar & Boppana's method and the laws past it, :mod:`.extrapolate`)."""

from __future__ import annotations

import functools
import math
import subprocess
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
from scipy import stats

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import (
    APPLIES,
    Applicability,
    NotApplicable,
    Prediction,
    Predictor,
    positive_time,
    refuse,
)
from gpuprofiler.models.fractal.extrap import evaluate_model, extrap_command, extrap_models
from gpuprofiler.models.fractal.extrapolate import Extrapolation, extrapolate
from gpuprofiler.models.fractal.laws import CONFIDENCE
from gpuprofiler.models.fractal.misses import miss_cost, regime_costs
from gpuprofiler.models.fractal.regimes import (
    cache_boundaries,
    concurrency,
    crosses_regime,
    filling,
    regime_warnings,
    roofline,
    work_function,
)
from gpuprofiler.models.identity import family
from gpuprofiler.models.intervals import calibrate
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.apps import App
from gpuprofiler.workloads.spec import KernelSpec
from gpuprofiler.workloads.sweep import Sweep, work_count, work_items, working_set


def size_functions(item: Any, probe: int):
    """The item's working-set and work-item counts as functions of size (None where it declares none)."""
    ws = (lambda n: working_set(item, n)) if working_set(item, probe) is not None else None
    wi = (lambda n: work_items(item, n)) if work_items(item, probe) is not None else None
    return ws, wi


RIVALS_WARN = 1.5  # rival laws apart by more than this at a target get a warning
# a sweep whose time grows by less than this power of its work is launch-bound: the work's share of the small
# sizes' time is under a quarter, so no law's slope is measured there (d ln T / d ln W is that share)
FLAT_GROWTH = 0.25
# the device models a sweep defers to where its sizes leave the device partly idle and the target fills it, in order
DEVICE_MODELS = ("pipeline", "maxplus")
# what a device model raises for a kernel or a launch it cannot take (then the law stays)
MODEL_FAILURES = (UserError, ValueError, ArithmeticError, KeyError, RuntimeError, OSError)


class FractalPredictor(Predictor):
    """Fits each major phase of a small-size sweep with the law leave-one-out picks, and extrapolates.

    Parameters: ``coverage``, the share of the run the major phases cover; ``extrap``, also run Extra-P's
    default model as a baseline (None: where it is installed); ``cache``, let the cache-miss law (the kernel's
    sampled address stream against the profile's caches) compete; ``device_model``, predict a target that fills
    the device from a model of the device (the PTX pipeline, else max-plus) where every small size leaves part of
    it idle and the target stays in the caches that held them (:meth:`defers_to_device`): no law fitted there can
    know how much faster a full device works; ``calibrated``, the interval from the chosen law's out-of-sample errors
    (:mod:`gpuprofiler.models.intervals`). A spec that declares no work has the bytes it touches for its work.
    """

    name = "fractal"
    min_sizes = 2  # a law with two parameters; the laws that need more are left out by the choice itself
    description = "fractal extrapolation from a small-size sweep (Escobar & Boppana) with overhead, work, cache laws"
    needs_measurements = True

    def __init__(self, coverage: float = 0.7, extrap: bool | None = None, cache: bool = True,
                 device_model: bool = True, calibrated: bool = True):
        self.coverage = coverage
        self.extrap = extrap
        self.cache = cache
        self.device_model = device_model
        self.calibrated = calibrated

    def applies_to(self, item: Any, profile: Any) -> Applicability:
        if not isinstance(item, (KernelSpec, App)):
            return refuse(f"it extrapolates kernel specs and apps, not {type(item).__name__}")
        return APPLIES

    def fit(self, item: Any, profile: Any = None, measurements: Sweep | None = None) -> "FractalPredictor":
        self._refuse_unless(item, profile)
        if measurements is None or len(measurements.sizes) < self.min_sizes:
            have = 0 if measurements is None else len(measurements.sizes)
            raise NotApplicable(f"fractal: needs a sweep of at least {self.min_sizes} small sizes (got {have})")
        hw = view(profile)
        self.item_ = item
        self.profile_ = profile
        self.working_set_, self.work_items_ = size_functions(item, max(measurements.sizes))
        c0 = hw.figure("launch.event_s").value
        work = (work_function(item, profile, max(measurements.sizes)) if isinstance(item, KernelSpec)
                else work_count(item))
        self.work_proxy_ = work is None and isinstance(item, KernelSpec) and self.working_set_ is not None
        if self.work_proxy_:  # no declared work: the bytes it touches, as a stream does (its exponent the kernel's)
            work = functools.cache(filling(self.working_set_, item, profile))
        self.misses_ = miss_cost(item, profile) if self.cache else None
        self.kind_ = hw.kind if profile is not None else None
        self.device_name_ = hw.name if profile is not None else None
        self.family_ = family(item)
        self.extrapolation_ = extrapolate(measurements, coverage=self.coverage, c0=c0, working_set=self.working_set_,
                                          curve=hw.bandwidth_curve or None, work=work,
                                          cache_cost=roofline(item, profile), misses=self.misses_)
        self.device_model_: tuple | None | bool = False  # fitted on first use (:meth:`_device_model`)
        self.flat_ = flat_sweep(item, self.extrapolation_.sweep.subset(self.extrapolation_.used), work,
                                self.working_set_, self.work_items_)
        self.extrap_models_: dict[str, str] | None = None
        self.extrap_error_: str | None = None
        if self.extrap or (self.extrap is None and extrap_command() is not None):
            try:
                self.extrap_models_ = extrap_models(measurements.subset(self.extrapolation_.used))
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
                self.extrap_error_ = f"Extra-P baseline skipped: {exc}"
        self.fitted_ = True
        return self

    @property
    def small_sizes_(self) -> list[int]:
        ex = self.extrapolation_
        return [ex.sweep.sizes[i] for i in ex.used]

    def target_warnings(self, sizes: Sequence[int]) -> list[str]:
        """The fit's own warnings, then targets on the other side of a regime boundary than the small sizes, and
        cache levels whose miss ratio the target raises, with what that costs."""
        out = list(self.extrapolation_.warnings) + regime_warnings(
            self.small_sizes_, list(sizes), self.working_set_, self.work_items_, self.profile_)
        if self.misses_ is not None:
            for t in sizes:
                out += regime_costs(self.misses_, self.small_sizes_, int(t), self._law_gap(int(t)))
        return out

    def _law_gap(self, target: int) -> float | None:
        """The cache-miss law's prediction minus the work law's at ``target`` (one-phase items)."""
        fits = list(self.extrapolation_.fits.values())
        if len(fits) != 1:
            return None
        model = fits[0].model
        laws = {m.name: m for m in [model] + list(getattr(model, "rivals_", []))}
        if "cache-miss" in laws and "work" in laws:
            return laws["cache-miss"].predict_value(target) - laws["work"].predict_value(target)
        return None

    def underfilled(self, target: int) -> tuple[float, float] | None:
        """(the most work-items of any small size, the device's concurrency) where every small size launches fewer
        work-items than the device runs at once (the profile's ``concurrency.work_items``) and ``target`` launches
        at least as many; else None. Below that count a GPU's time is a work-item's latency, not the work's
        throughput, and how much faster a full device works is not in the sweep (the H100's matmul_naive from 32..128
        to 1024: every law fitted there missed by +70% or more)."""
        if not isinstance(self.item_, KernelSpec) or self.work_items_ is None:
            return None
        conc = concurrency(self.profile_)
        if conc is None:
            return None
        try:
            most = max(float(self.work_items_(n)) for n in self.small_sizes_)
            at_target = float(self.work_items_(target))
        except (UserError, ValueError, ArithmeticError, TypeError):
            return None
        return (most, conc) if most < conc <= at_target else None

    def defers_to_device(self, target: int) -> tuple[float, float] | None:
        """:meth:`underfilled` where the device's filling is the only regime the target crosses: where its working
        set also leaves the last-level cache that holds the small sizes', the cache-miss law (which counts the
        filling too) prices that crossing from the sweep, and a device model alone is not trusted with it (on an
        H200, conv3d from 120..151 to 300, 26 MiB to 206 MiB: the PTX pipeline +150%, the cache-miss law +9%)."""
        idle = self.underfilled(target)
        bounds = cache_boundaries(self.profile_) if idle else []
        if idle and bounds and self.working_set_ is not None:
            llc = max(size for _, size in bounds)
            try:
                small = max(float(self.working_set_(n)) for n in self.small_sizes_)
                past = float(self.working_set_(target)) > llc >= small
            except (UserError, ValueError, ArithmeticError, TypeError):
                past = False
            if past:
                return None
        return idle

    def _device_model(self) -> tuple | None:
        """The first of :data:`DEVICE_MODELS` that takes the item on the profile's device, fitted, with the log of
        measured over predicted time at each small size (what its interval is made of); None where none does."""
        if self.device_model_ is not False:
            return self.device_model_
        from gpuprofiler.models import registry

        self.device_model_ = None
        sub = self.extrapolation_.sweep.subset(self.extrapolation_.used)
        for name in DEVICE_MODELS:
            try:
                model = registry.create(name).fit(self.item_, self.profile_)
                small = np.array([p.seconds for p in model.predict(sub.sizes)], float)
            except MODEL_FAILURES:  # not this one
                continue
            if np.all(np.isfinite(small) & (small > 0)):
                self.device_model_ = (name, model, np.log(sub.figures() / small))
                break
        return self.device_model_

    def predict(self, sizes: Sequence[int]) -> list[Prediction]:
        """One prediction per target; its details are the ``extrapolate --json`` record without the check. The
        interval is calibrated on the chosen law's out-of-sample errors (:mod:`gpuprofiler.models.intervals`)."""
        self._fitted()
        warnings = self.target_warnings(sizes)
        out = []
        for t in sizes:
            pred = self._predict_one(int(t), warnings)
            flat = self.flat_ is not None and "device_model" not in pred.details  # the filling rule knows more
            if flat:
                pred = self._launch_bound(int(t), pred)
            crossing = crosses_regime(self.small_sizes_, int(t), self.working_set_, self.work_items_, self.profile_)
            pred.details.update(crossing=crossing, family=self.family_, device_kind=self.kind_,
                                device_name=self.device_name_)
            if self.calibrated:
                own = (pred.low, pred.high)
                pred = calibrate(pred, self.kind_, self.family_, crossing, device=self.device_name_)
                if flat:  # the floor and the proportional bound stand: no residual knows them
                    pred = replace(pred, low=min(pred.low, own[0]), high=max(pred.high, own[1]))
            out.append(pred)
        return out

    def _launch_bound(self, t: int, law: Prediction) -> Prediction:
        """A target of a launch-bound sweep (:func:`flat_sweep`): at least the largest small size's time, at most
        that time scaled by the work (all of it proportional to the work); the prediction is that time plus what a
        model of the device adds from the largest small size to the target, or the time itself without one."""
        growth, measure, last_size, last_s = self.flat_
        ratio = max(float(measure(t)) / float(measure(last_size)), 1.0)
        low, high = last_s, last_s * ratio
        seconds, how = last_s, "the largest small size's time (no model of the device applies)"
        device = self._device_model() if self.device_model else None
        if device is not None:
            try:
                at_t, at_last = (p.seconds for p in device[1].predict([t, last_size]))
                seconds = last_s + max(0.0, at_t - at_last)
                how = f"the largest small size's time plus the work the {device[0]} model adds to the target"
            except MODEL_FAILURES:
                pass
        seconds = min(max(seconds, low), high)
        rec = dict(law.details)
        rec.update({"law_s": law.seconds, "law": law.summary, "law_interval_s": [law.low, law.high],
                    "predicted_s": seconds, "interval_s": [low, high], "model": "launch floor",
                    "flat_sweep": {"growth": growth, "work_ratio": ratio, "floor_s": last_s}})
        rec["warnings"] = list(rec.get("warnings", [])) + [
            f"target {t}: the small sizes are launch-bound (their time grows as the work to the power {growth:.2f}: "
            f"the work is under {FLAT_GROWTH:.0%} of their time), so no law's slope is measured; predicted from "
            f"{how}: {seconds:.4g} s, between {low:.4g} s (the floor) and {high:.4g} s (all of the time proportional "
            f"to the work, {ratio:.3g}x)"]
        return Prediction(t, seconds, low, high, self.name, "launch floor", rec)

    def _predict_one(self, t: int, warnings: list[str]) -> Prediction:
        ex: Extrapolation = self.extrapolation_
        chosen = ex.predict(t)
        positive_time(chosen.seconds, f"extrapolation to {t}")
        frac = ex.predict(t, which="fractal")
        rec: dict[str, Any] = {"size": t, "predicted_s": chosen.seconds, "interval_s": [chosen.low, chosen.high],
                               "model": chosen.summary, **chosen.details,
                               "fractal_s": frac.seconds, "fractal_interval_s": [frac.low, frac.high],
                               "baselines_s": ex.baselines(t)}
        if self.extrap_models_:
            key = "total" if "total" in self.extrap_models_ else next(iter(self.extrap_models_))
            try:
                rec["baselines_s"]["extrap"] = evaluate_model(self.extrap_models_[key], "n", t)
                rec["extrap_model"] = self.extrap_models_[key]
            except Exception as exc:  # noqa: BLE001 - an expression we cannot evaluate is reported, not fatal
                rec["extrap_error"] = str(exc)
        rec["small_sizes"] = self.small_sizes_
        rec["warnings"] = list(warnings)
        seconds, low, high, summary = chosen.seconds, chosen.low, chosen.high, chosen.summary
        idle = self.defers_to_device(t) if self.device_model else None
        device = self._device_model() if idle else None
        got = None
        if device is not None:
            try:
                got = device[1].predict([t])[0]
            except MODEL_FAILURES:
                pass  # the model cannot take the target: the law stays
        if got is not None and math.isfinite(got.seconds) and got.seconds > 0:
            name, _, logs = device
            # the model's own misses at the small sizes make its interval: a t interval on their log ratios
            half = (float(stats.t.ppf(0.5 + CONFIDENCE / 2, max(len(logs) - 1, 1)))
                    * math.sqrt(float(np.mean(logs**2))))
            rec.update({"law_s": seconds, "law": summary, "law_interval_s": [low, high], "device_model": name,
                        "device_model_small_errors": [float(v) for v in np.expm1(-logs)]})
            seconds, summary = got.seconds, f"{name} (device filled only at the target)"
            low, high = seconds * math.exp(-half), seconds * math.exp(half)
            rec.update({"predicted_s": seconds, "interval_s": [low, high], "model": summary})
            rlo, rhi = rec.get("rivals_s", [rec["law_s"], rec["law_s"]])
            rec["rivals_s"] = [min(rlo, seconds), max(rhi, seconds)]
            rec["warnings"].append(
                f"target {t}: every small size leaves the device partly idle (at most {idle[0]:.0f} work-items of the "
                f"{idle[1]:.0f} it runs at once) and the target fills it: predicted by the {name} model of the device "
                f"({seconds:.4g} s; it missed the small sizes by {_percent_range(rec['device_model_small_errors'])}), "
                f"not by the {rec['law']} law fitted to them ({rec['law_s']:.4g} s)")
        lo, hi = rec.get("rivals_s", [seconds, seconds])
        if lo > 0 and hi / lo > RIVALS_WARN:
            rec["warnings"].append(f"target {t}: the small sizes cannot tell the scaling laws apart: they predict "
                                   f"{lo:.4g} .. {hi:.4g} s ({hi / lo:.2g}x); the interval is the chosen law's own "
                                   "(measure more or larger small sizes to decide)")
        return Prediction(t, seconds, low, high, self.name, summary, rec)


def flat_sweep(item: Any, sweep: Sweep, work, working_set_fn, work_items_fn) -> tuple | None:
    """(growth, the work measure, the largest small size, its time) where the sweep's time grows by less than
    :data:`FLAT_GROWTH` powers of its work (the declared work, else the working set, the work-items or the size:
    the slope of ln T on ln W over the small sizes); None where it grows with the work, or cannot be told."""
    sizes = list(sweep.sizes)
    if len(sizes) < 3:
        return None
    times = sweep.figures()
    for measure in (work, working_set_fn, work_items_fn, float):
        if measure is None:
            continue
        try:
            w = np.array([float(measure(n)) for n in sizes])
        except (UserError, ValueError, ArithmeticError, TypeError):
            continue
        if np.all(w > 0) and np.all(np.isfinite(w)) and w.max() / w.min() >= 1.5:
            break
    else:
        return None
    growth = float(np.polyfit(np.log(w), np.log(np.maximum(times, 1e-300)), 1)[0])
    if growth >= FLAT_GROWTH:
        return None
    last = int(np.argmax(sizes))
    return growth, measure, sizes[last], float(times[last])


def _percent_range(errors: Sequence[float]) -> str:
    lo, hi = min(errors) * 100, max(errors) * 100
    return f"{lo:+.0f}%" if round(lo) == round(hi) else f"{lo:+.0f}% .. {hi:+.0f}%"


def check_record(record: dict[str, Any], measured: Sweep) -> dict[str, Any]:
    """The record of a prediction with the measured target beside it: its modelling figure and interval (and its
    median), and the signed relative errors (predicted - measured) / measured of the chosen, pure fractal and
    baseline predictions."""
    s = measured.total_summary()
    med = s.model
    rec = dict(record)
    rec["measured_s"] = med
    rec["measured_interval_s"] = [s.model_ci_low, s.model_ci_high]
    rec["measured_median_s"] = s.median
    rec["error"] = (rec["predicted_s"] - med) / med
    rec["fractal_error"] = (rec["fractal_s"] - med) / med
    rec["inside_interval"] = rec["interval_s"][0] <= med <= rec["interval_s"][1]
    rec["baseline_errors"] = {k: (None if v is None else (v - med) / med) for k, v in rec["baselines_s"].items()}
    return rec
