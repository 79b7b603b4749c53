"""A learned correction of a static model (Zhang, Chen and Ming's learned part), made honest.

A small model -- ridge regression of ``log(measured / predicted)`` on features the static analysis already
has (the shares of the prediction each bound holds, the launch's size, coalescing, occupancy, instruction
mix) -- is fitted on measured cases. It is judged only by **leave-one-kernel-out**: every kernel's cases are
corrected by a fit on the other kernels, its ridge penalty chosen by a leave-one-kernel-out search inside
those other kernels, so no figure of a kernel ever sees that kernel. A kernel is its code, not its name: cases
whose kernels have the same canonical code (:mod:`gpuprofiler.models.identity`: an app's copy of a builtin
kernel) are left out together. A fit on every case is what ``validate --fit-correction`` writes and
``--correction`` applies.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler import __version__
from gpuprofiler.errors import UserError

# what every static model reports in ``details["features"]`` for the correction
FEATURES = ("launch_share", "dram_share", "cache_share", "compute_share", "log_work_items", "sectors_per_request",
            "occupancy", "int_share")
# candidate feature sets, smallest first: which one is used is chosen like the penalty, by leave-one-kernel-out
FEATURE_SETS = (FEATURES[:5], FEATURES)
ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
MAX_LOG_FACTOR = math.log(4.0)  # a correction never scales a prediction by more than 4x either way
MIN_KERNELS = 4  # leave-one-kernel-out then trains every fold on at least 3 kernels


@dataclass
class Correction:
    """A ridge fit: corrected = predicted * exp(intercept + sum(weight * (feature - mean) / scale))."""

    model: str
    features: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    intercept: float
    alpha: float
    kernels: list[str] = field(default_factory=list)
    cases: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def factor(self, feats: dict[str, float]) -> float:
        x = np.array([float(feats.get(f, m)) for f, m in zip(self.features, self.mean)])
        z = (x - np.array(self.mean)) / np.array(self.scale)
        log = float(np.clip(self.intercept + z @ np.array(self.weights), -MAX_LOG_FACTOR, MAX_LOG_FACTOR))
        return math.exp(log)

    def apply(self, feats: dict[str, float], predicted: float) -> float:
        return predicted * self.factor(feats)


def _matrix(samples: list[dict], names: list[str]) -> np.ndarray:
    return np.array([[float(s["features"].get(f, math.nan)) for f in names] for s in samples], dtype=float)


def _target(samples: list[dict]) -> np.ndarray:
    return np.log(np.array([s["measured_s"] / s["predicted_s"] for s in samples], dtype=float))


def usable(samples: list[dict]) -> list[dict]:
    """Cases with a positive prediction and measurement and every feature finite."""
    out = []
    for s in samples:
        f = s.get("features") or {}
        if s.get("predicted_s", 0) > 0 and s.get("measured_s", 0) > 0 and all(
                isinstance(f.get(k), (int, float)) and math.isfinite(f[k]) for k in FEATURES):
            out.append(s)
    return out


def fit(samples: list[dict], model: str, alpha: float, features: tuple[str, ...] = FEATURES) -> Correction:
    """Ridge on standardised ``features`` (constant ones dropped), the intercept unpenalised."""
    x = _matrix(samples, list(features))
    y = _target(samples)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    keep = scale > 1e-12
    names = [f for f, k in zip(features, keep) if k]
    z = (x[:, keep] - mean[keep]) / scale[keep]
    yc = y - y.mean()
    w = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ yc) if z.shape[1] else np.zeros(0)
    return Correction(model, names, mean[keep].tolist(), scale[keep].tolist(), w.tolist(), float(y.mean()),
                      float(alpha), sorted({s["kernel"] for s in samples}), len(samples))


def _groups(samples: list[dict]) -> list[str]:
    return sorted({s["kernel"] for s in samples})


def kernel_groups(samples: list[dict]) -> list[str]:
    """Each case's kernel for leave-one-kernel-out: names that share a code digest (``code``) are one kernel,
    labelled by its names joined with '+'."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for s in samples:
        root(s["kernel"])
        if s.get("code"):
            a, b = root(s["kernel"]), root("code:" + str(s["code"]))
            if a != b:
                parent[a] = b
    members: dict[str, set[str]] = {}
    for s in samples:
        members.setdefault(root(s["kernel"]), set()).add(s["kernel"])
    return ["+".join(sorted(members[root(s["kernel"])])) for s in samples]


def by_kernel(samples: list[dict]) -> list[dict]:
    """The cases with ``kernel`` replaced by their leave-one-kernel-out group."""
    return [dict(s, kernel=g) for s, g in zip(samples, kernel_groups(samples))]


def unavailable(samples: list[dict]) -> str | None:
    """Why no correction can be fitted and judged on these cases (None if one can)."""
    good = usable(samples)
    kernels = len(_groups(by_kernel(good)))
    if len(good) < len(samples) or kernels < MIN_KERNELS:
        return (f"{len(good)} of {len(samples)} cases with its features, {kernels} kernels; it needs every case "
                f"and at least {MIN_KERNELS} kernels")
    return None


def _loko_factors(samples: list[dict], model: str, alpha: float, features: tuple[str, ...]) -> np.ndarray:
    """Each case's correction factor from a fit on the other kernels at a fixed penalty and feature set."""
    out = np.ones(len(samples))
    for k in _groups(samples):
        train = [s for s in samples if s["kernel"] != k]
        if len({s["kernel"] for s in train}) < 2:
            continue
        c = fit(train, model, alpha, features)
        for i, s in enumerate(samples):
            if s["kernel"] == k:
                out[i] = c.factor(s["features"])
    return out


def _mape(samples: list[dict], factors: np.ndarray) -> float:
    pred = np.array([s["predicted_s"] for s in samples]) * factors
    meas = np.array([s["measured_s"] for s in samples])
    return float(np.mean(np.abs(pred - meas) / meas))


def choose(samples: list[dict], model: str) -> tuple[float, tuple[str, ...]]:
    """The penalty and feature set with the lowest leave-one-kernel-out MAPE on ``samples`` (ties: the smaller
    feature set, then the larger penalty)."""
    grid = [(a, f) for f in FEATURE_SETS for a in ALPHAS]
    return min(grid, key=lambda af: (_mape(samples, _loko_factors(samples, model, *af)), len(af[1]), -af[0]))


def leave_one_kernel_out(samples: list[dict], model: str) -> np.ndarray:
    """Each case's corrected prediction from a correction that never saw its kernel: fitted on the other kernels,
    with its penalty and feature set chosen by leave-one-kernel-out among those other kernels only (nested)."""
    samples = by_kernel(samples)
    out = np.array([s["predicted_s"] for s in samples], dtype=float)
    for k in _groups(samples):
        train = [s for s in samples if s["kernel"] != k]
        if len(_groups(train)) < 3:
            continue
        c = fit(train, model, *choose(train, model))
        for i, s in enumerate(samples):
            if s["kernel"] == k:
                out[i] = c.apply(s["features"], s["predicted_s"])
    return out


def fit_all(samples: list[dict], model: str) -> Correction:
    """The correction fitted on every case (penalty and features by leave-one-kernel-out), for --fit-correction."""
    why = unavailable(samples)
    if why:
        raise UserError(f"{model}: no learned correction ({why})")
    samples = by_kernel(samples)
    return fit(samples, model, *choose(samples, model))


def save(corrections: list[Correction], path: str | Path, meta: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = {"version": __version__, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), **meta}
    data = {"kind": "gpuprofiler correction", "meta": stamp, "corrections": [asdict(c) for c in corrections]}
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def load(path: str | Path, model: str) -> Correction:
    """The correction of ``model`` in a file written by ``validate --fit-correction`` (read as data)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"--correction: file not found: {path}") from None
    except (OSError, ValueError, RecursionError) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise UserError(f"--correction {path}: not a correction file ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("kind") != "gpuprofiler correction":
        raise UserError(f"--correction {path}: not a correction file (write one with validate --fit-correction)")
    corrections = data.get("corrections", [])
    if not isinstance(corrections, list):
        raise UserError(f"--correction {path}: corrections must be a list")
    for c in corrections:
        if isinstance(c, dict) and c.get("model") == model:
            try:
                corr = Correction(**c)
                if not corr.meta and isinstance(data.get("meta"), dict):
                    corr.meta = dict(data["meta"])  # the file's: device, profile, command
                if not (len(corr.features) == len(corr.mean) == len(corr.scale) == len(corr.weights)):
                    raise ValueError("feature lists of different lengths")
                if not all(isinstance(f, str) and f in FEATURES for f in corr.features):
                    raise ValueError(f"unknown features {sorted(map(str, set(corr.features) - set(FEATURES)))}")
                numbers = [*corr.mean, *corr.scale, *corr.weights, corr.intercept, corr.alpha]
                if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                           for v in numbers):
                    raise ValueError("its numbers must be finite")
                if not all(v > 0 for v in corr.scale):
                    raise ValueError("its feature scales must be positive")
                if not isinstance(corr.meta, dict):
                    raise ValueError("meta must be a table")
                return corr
            except (TypeError, ValueError, AttributeError) as exc:
                raise UserError(f"--correction {path}: the {model} correction is malformed ({exc})") from None
    raise UserError(f"--correction {path}: no correction for the {model} model in the file")


def apply_file(path: str | Path, model: str, profile: Any, features: dict[str, float] | None,
               predicted_s: float) -> dict[str, Any]:
    """``--correction FILE`` on one prediction: the corrected time, the file, what it was fitted on, and a
    warning when it was fitted on another device than the profile's."""
    corr = load(path, model)
    if not features:
        raise UserError(f"--correction: this {model} prediction reports no features for the correction")
    out = {"corrected_s": corr.apply(features, predicted_s), "file": str(path), "fitted_on": corr.kernels,
           "cases": corr.cases}
    fitted_device = corr.meta.get("device")
    device = ((getattr(profile, "data", None) or {}).get("device") or {}).get("name")
    if fitted_device and device and fitted_device != device:
        out["warning"] = (f"the correction was fitted on {fitted_device}, the profile is of {device}: "
                          "it may not carry over")
    return out
