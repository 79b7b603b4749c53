"""Output checking: poison the outputs, run once, compare with the spec's numpy reference."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuprofiler.errors import CheckError
from gpuprofiler.safe_eval import evaluate_array
from gpuprofiler.spec import CheckSpec


def poison(array: np.ndarray) -> np.ndarray:
    """An array like ``array`` filled with a value no correct kernel writes by accident (NaN, max int)."""
    if array.dtype.kind == "f":
        return np.full_like(array, np.nan)
    return np.full_like(array, np.iinfo(array.dtype).max)


def _promote(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(np.float64)
    if isinstance(value, np.floating):
        return np.float64(value)
    return value


def compare(checks: list[CheckSpec], before: dict[str, Any], after: dict[str, Any], sizes: dict[str, Any]) -> float:
    """Run every check; return the worst error relative to the tolerance, raise CheckError on a mismatch."""
    worst = 0.0
    for check in checks:
        got = np.asarray(evaluate_array(check.got, {**sizes, **after}, f"{check.where}.got"))
        expect = np.asarray(evaluate_array(check.expect, {**sizes, **{k: _promote(v) for k, v in before.items()}},
                                           f"{check.where}.expect"))
        if got.shape != expect.shape:
            raise CheckError(f"{check.where}: {check.got!r} has shape {got.shape} but {check.expect!r} has {expect.shape}")
        scale = float(np.max(np.abs(expect))) if expect.size else 0.0
        atol = check.atol if check.atol is not None else check.rtol * scale
        err = np.abs(got.astype(np.float64) - expect)
        bound = atol + check.rtol * np.abs(expect)
        bad = ~(err <= bound)  # NaN (poison left behind) counts as bad
        if bad.any():
            idx = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
            raise CheckError(
                f"{check.where}: {check.got} differs from {check.expect} in {int(bad.sum())} of {bad.size} elements; "
                f"first at {tuple(int(i) for i in idx)}: got {got[idx]!r}, expected {expect[idx]!r} "
                f"(rtol {check.rtol:g}, atol {atol:g})")
        if err.size:
            worst = max(worst, float(np.max(err / np.where(bound > 0, bound, 1.0))))
    return worst
