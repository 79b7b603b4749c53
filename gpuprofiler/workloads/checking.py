"""Output checking: poison the outputs, run once, compare with the spec's numpy reference."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from gpuprofiler.errors import CheckError
from gpuprofiler.workloads.safe_eval import PROMOTING, evaluate_array, names_in
from gpuprofiler.workloads.spec import CheckSpec

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


ELEMENTWISE = {"minimum", "maximum", "ceil", "floor", "log2", "log", "abs", "sqrt", "exp", "sin", "cos", "where"}


def _elementwise(check: CheckSpec, before: dict[str, Any], after: dict[str, Any]) -> tuple[int, ...] | None:
    """The common shape when ``got`` is one array and ``expect`` combines same-shape arrays and scalars
    element by element (so both can be taken in chunks); None otherwise."""
    try:
        got, expect = ast.parse(check.got, mode="eval").body, ast.parse(check.expect, mode="eval")
    except SyntaxError:
        return None
    if not isinstance(got, ast.Name) or not isinstance(after.get(got.id), np.ndarray):
        return None
    shape = after[got.id].shape
    for node in ast.walk(expect):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in ELEMENTWISE) or node.keywords:
                return None
        elif isinstance(node, ast.Name):
            value = before.get(node.id)
            if isinstance(value, np.ndarray) and value.shape != shape and value.ndim:
                return None
        elif isinstance(node, ast.MatMult) or not isinstance(
                node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop, ast.Load)):
            return None
    return shape


def _promotes_itself(expect: str) -> bool:
    """Whether ``expect`` is one call, on plain names, of a function that sums in float64 itself
    (:data:`PROMOTING`)."""
    try:
        body = ast.parse(expect, mode="eval").body
    except SyntaxError:
        return False
    return (isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id in PROMOTING
            and not body.keywords and all(isinstance(a, ast.Name) for a in body.args))


def _chunks(check: CheckSpec, before: dict[str, Any], sizes: dict[str, Any], size: int):
    """The reference ``expect`` in flat chunks, evaluated on float64 copies of each chunk only."""
    used = names_in(check.expect)
    for start in range(0, size, CHUNK):
        env = dict(sizes)
        for k, v in before.items():
            if k in used and isinstance(v, np.ndarray) and v.ndim:
                v = v.ravel()[start:start + CHUNK]
            env[k] = _promote(v) if k in used else v
        yield start, np.broadcast_to(np.asarray(evaluate_array(check.expect, env, f"{check.where}.expect"), float),
                                     (min(CHUNK, size - start),))


def _errors(got: np.ndarray, expect: np.ndarray, atol: float, rtol: float):
    """|got - expect|, the allowed bound, and where it is exceeded (NaN, poison left behind, counts as bad)."""
    with np.errstate(over="ignore", invalid="ignore"):  # an infinite error is a failed element, not a warning
        err = np.abs(got.astype(np.float64) - expect)
        bound = atol + rtol * np.abs(expect)
    return err, bound, ~(err <= bound)


def _fail(check: CheckSpec, total: int, size: int, idx, got, expect, atol: float) -> CheckError:
    return CheckError(
        f"{check.where}: {check.got} differs from {check.expect} in {total} of {size} elements; "
        f"first at {tuple(int(i) for i in idx)}: got {got!r}, expected {expect!r} (rtol {check.rtol:g}, atol {atol:g})")


def compare(checks: list[CheckSpec], before: dict[str, Any], after: dict[str, Any], sizes: dict[str, Any]) -> float:
    """Run every check; return the worst error relative to the tolerance, raise CheckError on a mismatch.

    Element-by-element checks over large arrays run in chunks, so no full-size float64 copy is made.
    """
    worst = 0.0
    for check in checks:
        shape = _elementwise(check, before, after)
        if shape is not None:
            got = after[check.got.strip()].ravel()
            size = got.size
            # two passes over the reference (its largest value sets atol), instead of one full-size copy
            scale = max((float(np.max(np.abs(e))) for _, e in _chunks(check, before, sizes, size) if e.size), default=0.0)
            atol = check.atol if check.atol is not None else check.rtol * scale
            total, first = 0, None
            for start, e in _chunks(check, before, sizes, size):
                err, bound, bad = _errors(got[start:start + e.size], e, atol, check.rtol)
                if bad.any():
                    total += int(bad.sum())
                    if first is None:
                        k = int(np.argmax(bad))
                        first = (np.unravel_index(start + k, shape), got[start + k], e[k])
                elif err.size:
                    worst = max(worst, float(np.max(err / np.where(bound > 0, bound, 1.0))))
            if first is not None:
                raise _fail(check, total, size, first[0], first[1], first[2], atol)
            continue
        got = np.asarray(evaluate_array(check.got, {**sizes, **after}, f"{check.where}.got"))
        used = set() if _promotes_itself(check.expect) else names_in(check.expect)
        promoted = {k: (_promote(v) if k in used else v) for k, v in before.items()}
        expect = np.asarray(evaluate_array(check.expect, {**sizes, **promoted}, f"{check.where}.expect"))
        if got.shape != expect.shape:
            raise CheckError(f"{check.where}: {check.got!r} has shape {got.shape} but {check.expect!r} has {expect.shape}")
        scale = float(np.max(np.abs(expect))) if expect.size else 0.0
        atol = check.atol if check.atol is not None else check.rtol * scale
        g, e = got.ravel(), expect.ravel()
        total, first = 0, None
        for start in range(0, e.size, CHUNK):  # chunks keep the float64 temporaries in cache
            err, bound, bad = _errors(g[start:start + CHUNK], e[start:start + CHUNK], atol, check.rtol)
            if bad.any():
                total += int(bad.sum())
                if first is None:
                    idx = np.unravel_index(start + int(np.argmax(bad)), expect.shape) if expect.ndim else ()
                    first = (idx, got[idx], expect[idx])
            elif err.size:
                worst = max(worst, float(np.max(err / np.where(bound > 0, bound, 1.0))))
        if first is not None:
            raise _fail(check, total, e.size, first[0], first[1], first[2], atol)
    return worst
