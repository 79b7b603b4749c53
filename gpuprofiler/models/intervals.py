"""Prediction intervals calibrated on each predictor's own out-of-sample errors.

A model's own interval says how uncertain its inputs are, not how wrong the model is on a kernel it was not built
on. Here the interval comes from the model's errors on measured cases (split conformal prediction on the log
error ``r = ln(measured / predicted)``): with the residuals of other kernels, the interval holding a share
``level`` of them is ``[predicted * e^q_lo, predicted * e^q_hi]`` with q the finite-sample conformal quantiles.
Each kernel weighs the same whatever its count of cases, and a kernel's own family (the kernels of the same
access pattern, or of the same code up to constants) is always left out, so an interval never learns from the
kernel it is about: that is what makes the coverage of a validation an out-of-sample figure.

Residuals are kept per predictor and kind of device (a CPU's, a GPU's). A prediction whose inputs lie outside
what the calibration saw says so and widens: a kind of device with no residuals of its own takes every kind's,
widened by :data:`UNSEEN_WIDEN`, and as far below the prediction as above it (the sign of a model's errors on
one device need not carry to another: a leave-one-kind-out check of the calibration's own residuals is in
``docs/intervals.md``); a target past a regime boundary of its sweep (a cache level, the device
filling) takes the residuals of such crossings where there are :data:`MIN_CASES` of them, else everyone's,
widened by :data:`CROSSING_WIDEN`.

Where the same kernel was measured at a smaller size (a validation's sweep, a replayed log), a static model's
interval also reaches the model's error there when that error lies outside the calibrated band (:func:`anchored`):
a model that misreads a kernel misreads it at every size, which no calibration over other kernels can know.

The calibration is data (:data:`DEFAULT_FILE`, written by ``gpuprofiler validate --fit-intervals``) and carries
what it was computed from: the runs, the devices, the code's version, the residuals themselves.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from gpuprofiler.errors import UserError

DEFAULT_FILE = Path(__file__).with_name("intervals.json")
LEVEL = 0.8  # the share of out-of-sample cases an interval is made to hold
MIN_CASES = 8  # residuals (of distinct kernels) below which a group is too small to calibrate on
UNSEEN_WIDEN = 2.0  # log-width factor for a kind of device the calibration has no residuals of
CROSSING_WIDEN = 1.5  # log-width factor for a regime crossing without crossings to calibrate on
MAX_LOG = math.log(1e3)  # no interval reaches past 1000x either way


@dataclass(frozen=True)
class Residual:
    """One measured case of a predictor: ``log_error`` = ln(measured / predicted); ``crossing``: the target was past
    a regime boundary of what the prediction was fitted on."""

    model: str
    kind: str
    kernel: str
    family: str
    size: int
    log_error: float
    crossing: bool = False
    source: str = ""
    device: str = ""  # the device's name ("" where the run did not say)


@dataclass
class Interval:
    """A calibrated interval and how it was made."""

    low: float
    high: float
    cases: int
    kernels: int
    level: float
    notes: list[str] = field(default_factory=list)
    method: str = "conformal"

    def details(self) -> dict[str, Any]:
        return {"interval_method": self.method, "interval_level": self.level, "interval_cases": self.cases,
                "interval_kernels": self.kernels, "interval_notes": list(self.notes)}


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The conformal upper quantile of weighted scores: the smallest value whose weight at or below it reaches ``q``
    of the total plus one more case of a mean weight (the finite-sample correction); +inf where none does."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    total = float(w.sum()) + float(w.mean())
    idx = int(np.searchsorted(np.cumsum(w), q * total - 1e-12))
    return float(v[idx]) if idx < len(v) else math.inf


def conformal(residuals: Iterable[Residual], level: float = LEVEL) -> tuple[float, float, int, int]:
    """(q_lo, q_hi, cases, kernels): log bounds holding ``level`` of new cases, each kernel weighing one."""
    rs = list(residuals)
    if not rs:
        return -math.inf, math.inf, 0, 0
    counts: dict[str, int] = {}
    for r in rs:
        counts[r.kernel] = counts.get(r.kernel, 0) + 1
    values = np.array([r.log_error for r in rs], float)
    weights = np.array([1.0 / counts[r.kernel] for r in rs], float)
    tail = (1.0 - level) / 2.0
    hi = _weighted_quantile(values, weights, 1.0 - tail)
    lo = -_weighted_quantile(-values, weights, 1.0 - tail)
    return lo, hi, len(rs), len(counts)


@dataclass
class Calibration:
    """Residuals of every predictor and where they came from."""

    residuals: list[Residual] = field(default_factory=list)
    level: float = LEVEL
    sources: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def interval(self, model: str, kind: str | None, seconds: float, family: str | None = None,
                 crossing: bool = False, device: str | None = None) -> Interval:
        """The calibrated interval of a ``model`` prediction of ``seconds`` for a kernel of ``family``
        (:func:`gpuprofiler.models.identity.family`) on a device of ``kind`` (``cpu``/``gpu``), that family's
        residuals left out; ``crossing``: the target lies past a regime boundary of what it was fitted on;
        ``device``: the device's name (one the calibration holds no errors of widens the interval)."""
        mine = [r for r in self.residuals if r.model == model and (family is None or r.family != family)]
        notes: list[str] = []
        widen, unseen = 1.0, False
        pool = [r for r in mine if r.kind == kind]
        if len({r.kernel for r in pool}) < MIN_CASES:
            seen = sorted({r.kind for r in mine})
            notes.append(f"the interval calibration has no {kind or 'such'} device's {model} errors "
                         f"({', '.join(seen) or 'none'} only): calibrated on "
                         f"{'every kind' if seen else 'nothing'}, widened {UNSEEN_WIDEN:g}x")
            pool, widen, unseen = mine, UNSEEN_WIDEN, True
        elif device and device not in {r.device for r in pool}:
            seen = sorted({r.device for r in pool if r.device})
            notes.append(f"the interval calibration has no errors of {model} on this device ({device}; its {kind} "
                         f"devices: {', '.join(seen) or 'unnamed'}): widened {UNSEEN_WIDEN:g}x")
            widen, unseen = UNSEEN_WIDEN, True
        if crossing:
            across = [r for r in pool if r.crossing]
            if len({r.kernel for r in across}) >= MIN_CASES:
                pool = across
                notes.append("the target crosses a regime boundary of its sweep: calibrated on such crossings")
            else:
                widen *= CROSSING_WIDEN
                notes.append(f"the target crosses a regime boundary of its sweep and the calibration holds too few "
                             f"such crossings: widened {CROSSING_WIDEN:g}x")
        kernels_in = len({r.kernel for r in pool})
        level = min(self.level, 1.0 - 2.0 / (kernels_in + 1)) if kernels_in else self.level
        if level < self.level:  # finite bounds need at least 2 / (1 - level) - 1 kernels
            notes.append(f"the calibration holds {kernels_in} kernel(s) for this case: an interval of level "
                         f"{level:.2f}, not {self.level:g}")
        lo, hi, cases, kernels = conformal(pool, level) if level > 0 else (-math.inf, math.inf, len(pool), kernels_in)
        if unseen and cases:  # the direction of its errors on the devices seen need not carry to another one
            q = conformal([replace(r, log_error=abs(r.log_error)) for r in pool], max(2.0 * level - 1.0, 0.0))[1]
            lo, hi = min(lo, -q), max(hi, q)
        if not math.isfinite(lo) or not math.isfinite(hi):
            lo, hi = -MAX_LOG, MAX_LOG
        if not cases:
            lo, hi = -MAX_LOG, MAX_LOG
            notes.append(f"no calibration of {model} at all: the widest interval")
        lo, hi = max(lo * widen, -MAX_LOG), min(hi * widen, MAX_LOG)
        low, high = seconds * math.exp(min(lo, 0.0)), seconds * math.exp(max(hi, 0.0))
        return Interval(low, high, cases, kernels, level, notes)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "sources": self.sources, "meta": self.meta,
                "residuals": [asdict(r) for r in self.residuals]}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    @staticmethod
    def from_dict(data: Any, where: str = "calibration") -> "Calibration":
        if not isinstance(data, dict) or not isinstance(data.get("residuals"), list):
            raise UserError(f"{where}: not an interval calibration (no residuals)")
        try:
            residuals = [Residual(**r) for r in data["residuals"]]
            level = float(data.get("level", LEVEL))
        except (TypeError, ValueError) as exc:
            raise UserError(f"{where}: a malformed residual ({exc})") from None
        if not 0.5 <= level < 1.0 or not all(math.isfinite(r.log_error) for r in residuals):
            raise UserError(f"{where}: the level must lie in [0.5, 1) and every residual be finite")
        return Calibration(residuals, level, list(data.get("sources") or []), dict(data.get("meta") or {}))


@lru_cache(maxsize=4)
def _load(path: str) -> Calibration:
    from gpuprofiler.textfile import read_text

    text = read_text(path, "interval calibration", 64 << 20)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from None
    return Calibration.from_dict(data, str(path))


def load(path: str | Path | None = None) -> Calibration:
    """The calibration at ``path`` (default: the one shipped with the package; none there: an empty one)."""
    p = Path(path) if path is not None else DEFAULT_FILE
    if path is None and not p.is_file():
        return Calibration()
    return _load(str(p))


def calibrate(prediction, kind: str | None, family: str | None, crossing: bool = False,
              calibration: Calibration | None = None, device: str | None = None):
    """``prediction`` (a :class:`~gpuprofiler.models.base.Prediction`) with its interval calibrated: the model's own
    interval kept in ``details["model_interval_s"]``, how the interval was made in ``details``."""
    cal = calibration if calibration is not None else load()
    if not cal.residuals:  # no calibration installed: the model's own interval
        return prediction
    got = cal.interval(prediction.model, kind, prediction.seconds, family, crossing, device)
    details = dict(prediction.details)
    details["model_interval_s"] = [prediction.low, prediction.high]
    details.update(got.details())
    if got.notes:
        details["warnings"] = list(details.get("warnings", [])) + [f"interval: {n}" for n in got.notes]
    return replace(prediction, low=got.low, high=got.high, details=details)


def _reach(low: float, high: float, seconds: float, r: float) -> tuple[float, float, bool]:
    """``[low, high]`` also reaching ``[low, high] * e^r`` where ``seconds * e^r`` lies outside it."""
    if low <= seconds * math.exp(r) <= high:
        return low, high, False
    return min(low, low * math.exp(r)), max(high, high * math.exp(r)), True


def anchored(prediction, at, measured: float, phases: dict[str, float] | None = None):
    """``prediction`` of a static model with its interval also reaching the model's error on the same kernel at a
    smaller size that was measured: ``at``, the model's prediction there, ``measured`` the time measured there
    (``phases``: each phase's). A model whose error on a kernel lies outside what its calibration holds at the
    measured sizes is, to first order, as far off at the next: the interval then holds both the calibrated band
    around the prediction and that band moved by the error seen (``r = ln(measured / at)``), and says so. The
    calibrated interval stays in ``details["calibrated_interval_s"]``."""
    if not (at.seconds > 0 and measured > 0 and math.isfinite(measured)):
        return prediction
    r = math.log(measured / at.seconds)
    details = dict(prediction.details)
    details.update(calibrated_interval_s=[prediction.low, prediction.high], evidence_size=int(at.size),
                   evidence_log_error=r)
    low, high, moved = _reach(prediction.low, prediction.high, prediction.seconds, r)
    if moved:
        details["warnings"] = list(details.get("warnings", [])) + [
            f"interval: {prediction.model} is off by {math.exp(-r) - 1:+.0%} on this kernel at its measured size "
            f"{int(at.size)}, outside its calibration: the interval also reaches that error"]
    ours, theirs = details.get("phases"), (at.details or {}).get("phases")
    if isinstance(ours, dict) and isinstance(theirs, dict):
        ours = {name: dict(ph) if isinstance(ph, dict) else ph for name, ph in ours.items()}
        for name, ph in ours.items():
            there, seen = theirs.get(name), (phases or {}).get(name)
            if not (isinstance(ph, dict) and isinstance(there, dict) and "interval_s" in ph and seen
                    and there.get("predicted_s", 0) > 0 and math.isfinite(seen) and seen > 0):
                continue
            lo, hi = ph["interval_s"]
            ph["calibrated_interval_s"] = [lo, hi]
            lo, hi, _ = _reach(lo, hi, float(ph["predicted_s"]), math.log(seen / float(there["predicted_s"])))
            ph["interval_s"] = [lo, hi]
        details["phases"] = ours
    return replace(prediction, low=low, high=high, details=details)


def residuals_from_rows(rows: Iterable[dict], source: str, kind: str | None = None,
                        device: str = "") -> list[Residual]:
    """Residuals from validation rows (``predictions.csv``: kernel, size, model, predicted_s, measured_s, and the
    ``family``, ``crossing`` and ``device_kind`` each prediction reported; ``kind`` where the rows have none)."""
    out = []
    for r in rows:
        try:
            pred, meas = float(r["predicted_s"]), float(r["measured_s"])
        except (KeyError, TypeError, ValueError):
            continue
        if not (pred > 0 and meas > 0 and math.isfinite(pred) and math.isfinite(meas)):
            continue
        crossing = str(r.get("crossing", "")).strip().lower() in ("true", "1", "yes")
        row_kind = str(r.get("device_kind") or kind or "")
        family = str(r.get("family") or "") or f"kernel:{r['kernel']}"
        out.append(Residual(str(r["model"]), row_kind, str(r["kernel"]), family, int(float(r["size"])),
                            math.log(meas / pred), crossing, source, str(r.get("device_name") or device)))
    return out


def stamp() -> dict[str, Any]:
    """When and by which version a calibration was written."""
    from gpuprofiler import __version__

    return {"written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "version": __version__}


def calibrate_all(prediction, kind: str | None, family: str, crossing: bool = False,
                  calibration: Calibration | None = None, device: str | None = None):
    """:func:`calibrate` for a prediction and, where it predicts a program's phases (``details["phases"]``), for
    each phase (family ``FAMILY/PHASE``); the family, the crossing and the device kind go into the details."""
    cal = calibration if calibration is not None else load()
    phases = prediction.details.get("phases")
    if isinstance(phases, dict):
        for name, ph in phases.items():
            if not isinstance(ph, dict) or "predicted_s" not in ph:
                continue
            fam = f"{family}/{name}"
            ph.update(family=fam, crossing=crossing, device_kind=kind, device_name=device)
            if cal.residuals:
                got = cal.interval(prediction.model, kind, float(ph["predicted_s"]), fam, crossing, device)
                ph["model_interval_s"] = list(ph.get("interval_s", [got.low, got.high]))
                ph["interval_s"] = [got.low, got.high]
    prediction.details.update(family=family, crossing=crossing, device_kind=kind, device_name=device)
    return calibrate(prediction, kind, family, crossing, cal, device)


def leave_family_out(cal: Calibration, model: str, kind: str | None = None) -> list[dict[str, Any]]:
    """Every residual of ``model`` (on ``kind``'s devices) against the interval the calibration gives it with its
    family left out: the out-of-sample coverage and widths the intervals reach on the calibration's own cases."""
    out = []
    for r in cal.residuals:
        if r.model != model or (kind is not None and r.kind != kind):
            continue
        got = cal.interval(model, r.kind, 1.0, r.family, r.crossing)
        measured = math.exp(r.log_error)
        out.append({"kernel": r.kernel, "family": r.family, "size": r.size, "kind": r.kind,
                    "inside": got.low <= measured <= got.high, "width": got.high / got.low,
                    "log_error": r.log_error, "source": r.source})
    return out


def summary(cal: Calibration) -> list[dict[str, Any]]:
    """Per predictor and kind of device: cases, kernels, families, the median |error| and the leave-family-out
    coverage and median width of the calibrated intervals (each kernel weighing one)."""
    rows = []
    for model, kind in sorted({(r.model, r.kind) for r in cal.residuals}):
        checks = leave_family_out(cal, model, kind)
        counts: dict[str, int] = {}
        for c in checks:
            counts[c["kernel"]] = counts.get(c["kernel"], 0) + 1
        w = np.array([1.0 / counts[c["kernel"]] for c in checks])
        inside = np.array([c["inside"] for c in checks], float)
        widths = np.array([c["width"] for c in checks])
        errs = np.abs(np.expm1(-np.array([c["log_error"] for c in checks])))
        rows.append({"model": model, "kind": kind, "cases": len(checks), "kernels": len(counts),
                     "families": len({c["family"] for c in checks}),
                     "median_abs_error": float(np.median(errs)),
                     "inside": float(w @ inside / w.sum()), "median_width": float(np.median(widths))})
    return rows
