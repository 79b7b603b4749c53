"""Static models of whole programs: every kernel launch of an app's dry run, predicted and summed per phase.

A static model that predicts one launch (max-plus, the PTX pipeline) predicts an app by tracing it
(:func:`gpuprofiler.workloads.trace.trace_app`): each distinct launch is predicted once, and each kernel phase's
time is the sum over its launches, with the sum of their intervals. Copies between host and device are not
kernels: their phases are left out (a static kernel model says nothing of the bus).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import Prediction
from gpuprofiler.models.identity import kernel_code
from gpuprofiler.workloads.trace import TracedLaunch, trace_app

COPIES_NOTE = "copies between host and device are not modelled: only kernel phases are predicted"


@dataclass
class Bound:
    """A launch's arguments by parameter: scalar values, buffer sizes, and integer buffers' contents."""

    scalars: dict[Any, Any]
    buffers: dict[Any, int]
    contents: dict[Any, tuple[Callable[[np.ndarray], np.ndarray], np.dtype]]

    @property
    def bytes(self) -> int:
        return sum(self.buffers.values())


def _reader(data: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    flat = data.reshape(-1)

    def read(idx: np.ndarray) -> np.ndarray:
        return flat[np.clip(np.asarray(idx, dtype=np.int64), 0, max(flat.size - 1, 0))]
    return read


def bind(keys: Sequence[Any], args: Sequence[Any]) -> Bound:
    """The launch's positional ``args`` under the kernel's parameter ``keys`` (names or positions)."""
    if len(keys) != len(args):
        raise UserError(f"the kernel has {len(keys)} parameters and the launch passes {len(args)} arguments")
    out = Bound({}, {}, {})
    for key, value in zip(keys, args):
        if hasattr(value, "nbytes") and hasattr(value, "data") and not isinstance(value, np.generic):
            out.buffers[key] = int(value.nbytes)
            data = value.data
            if isinstance(data, np.ndarray) and data.dtype.kind in "iu" and data.size:
                out.contents[key] = (_reader(data), data.dtype)
        elif isinstance(value, (np.generic, int, float)):
            out.scalars[key] = value.item() if isinstance(value, np.generic) else value
        else:
            raise UserError(f"argument {key!r}: a {type(value).__name__} is neither a scalar nor a buffer")
    return out


def _key(launch: TracedLaunch) -> tuple:
    """Launches that any static model predicts alike: same kernel, grid, block, integer scalars, buffer sizes
    and the same integer contents (float values and float buffers do not change a static prediction)."""
    args = []
    for a in launch.args:
        if isinstance(a, np.generic) and a.dtype.kind == "f":
            args.append("f")
        elif isinstance(a, (np.generic, int)):
            args.append(int(a))
        else:
            data = getattr(a, "data", None)
            args.append((getattr(a, "nbytes", 0), id(data) if isinstance(data, np.ndarray) and
                         data.dtype.kind in "iu" else None))
    k = launch.kernel
    return (k.name, str(k.path), tuple(sorted(k.defines.items())), launch.global_size, launch.local_size,
            tuple(args))


def _mean_features(launches: list[tuple[float, dict | None]]) -> dict[str, float] | None:
    """A phase's features: its launches' features weighted by their predicted times (None if one has none)."""
    if not launches or any(f is None for _, f in launches):
        return None
    total = sum(t for t, _ in launches)
    weights = [t / total if total > 0 else 1 / len(launches) for t, _ in launches]
    keys = set.intersection(*(set(f) for _, f in launches))
    return {k: float(sum(w * f[k] for w, (_, f) in zip(weights, launches))) for k in sorted(keys)}


def predict_program(app: Any, size: int, kind: str, model: str,
                    predict_launch: Callable[[TracedLaunch], Prediction]) -> Prediction:
    """The app at ``size``: each kernel phase's predicted time (``details["phases"]``) and their sum."""
    launches = trace_app(app, size, kind)
    if not launches:
        raise UserError(f"{app.path}: the program launched no kernel at size {size}")
    done: dict[tuple, Prediction] = {}
    phases: dict[str, dict[str, Any]] = {}
    weighted: dict[str, list[tuple[float, dict | None]]] = {}
    codes: dict[str, set[str]] = {}
    for launch in launches:
        key = _key(launch)
        if key not in done:
            done[key] = predict_launch(launch)
        p = done[key]
        ph = phases.setdefault(launch.phase, {"predicted_s": 0.0, "interval_s": [0.0, 0.0], "calls": 0,
                                              "summary": p.summary, "features": None, "kernel_code": None})
        ph["predicted_s"] += p.seconds
        ph["interval_s"][0] += p.low
        ph["interval_s"][1] += p.high
        ph["calls"] += 1
        feats = p.details.get("features")
        weighted.setdefault(launch.phase, []).append((p.seconds, feats if isinstance(feats, dict) else None))
        codes.setdefault(launch.phase, set()).add(kernel_code(launch.kernel.source, launch.kernel.name))
    for name, ph in phases.items():
        ph["features"] = _mean_features(weighted[name])
        ph["kernel_code"] = "+".join(sorted(codes[name]))
    total = sum(ph["predicted_s"] for ph in phases.values())
    low = sum(ph["interval_s"][0] for ph in phases.values())
    high = sum(ph["interval_s"][1] for ph in phases.values())
    details = {"phases": phases, "launches": len(launches), "distinct_launches": len(done),
               "predicted_s": total, "interval_s": [low, high], "warnings": [],
               "notes": [COPIES_NOTE]}
    return Prediction(int(size), total, low, high, model, f"{model}: {len(launches)} launches traced", details)
