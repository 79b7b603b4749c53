"""Output checking: poison the outputs, run once, compare with the spec's numpy reference."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from gpuprofiler.errors import CheckError
from gpuprofiler.safe_eval import evaluate_array
from gpuprofiler.spec import CheckSpec

CHUNK = 1 << 18  # elements compared at a time


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


def _names(expression: str) -> set[str]:
    """The names an expression reads (parsed, never evaluated), so only those arrays are promoted."""
    try:
        return {n.id for n in ast.walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return set()  # the evaluator reports the syntax error itself


def _errors(got: np.ndarray, expect: np.ndarray, atol: float, rtol: float):
    """|got - expect|, the allowed bound, and where it is exceeded (NaN, poison left behind, counts as bad)."""
    err = np.abs(got.astype(np.float64) - expect)
    bound = atol + rtol * np.abs(expect)
    return err, bound, ~(err <= bound)


def compare(checks: list[CheckSpec], before: dict[str, Any], after: dict[str, Any], sizes: dict[str, Any]) -> float:
    """Run every check; return the worst error relative to the tolerance, raise CheckError on a mismatch."""
    worst = 0.0
    for check in checks:
        got = np.asarray(evaluate_array(check.got, {**sizes, **after}, f"{check.where}.got"))
        used = _names(check.expect)
        promoted = {k: (_promote(v) if k in used else v) for k, v in before.items()}
        expect = np.asarray(evaluate_array(check.expect, {**sizes, **promoted}, f"{check.where}.expect"))
        if got.shape != expect.shape:
            raise CheckError(f"{check.where}: {check.got!r} has shape {got.shape} but {check.expect!r} has {expect.shape}")
        scale = float(np.max(np.abs(expect))) if expect.size else 0.0
        atol = check.atol if check.atol is not None else check.rtol * scale
        g, e = got.ravel(), expect.ravel()
        for start in range(0, e.size, CHUNK):  # chunks keep the float64 temporaries in cache
            err, bound, bad = _errors(g[start:start + CHUNK], e[start:start + CHUNK], atol, check.rtol)
            if bad.any():
                total = int(bad.sum()) + sum(int(_errors(g[k:k + CHUNK], e[k:k + CHUNK], atol, check.rtol)[2].sum())
                                             for k in range(start + CHUNK, e.size, CHUNK))
                idx = np.unravel_index(start + int(np.argmax(bad)), expect.shape) if expect.ndim else ()
                raise CheckError(
                    f"{check.where}: {check.got} differs from {check.expect} in {total} of {e.size} elements; "
                    f"first at {tuple(int(i) for i in idx)}: got {got[idx]!r}, expected {expect[idx]!r} "
                    f"(rtol {check.rtol:g}, atol {atol:g})")
            if err.size:
                worst = max(worst, float(np.max(err / np.where(bound > 0, bound, 1.0))))
    return worst
