"""Safe evaluation of the arithmetic in spec files: an AST walk over a whitelist, never ``eval``.

Size expressions (``"n*n + 1"``, ``"ceil(n/256)*256"``) use :func:`evaluate`;
check expressions over numpy arrays use :func:`evaluate_array`, which adds
subscripts, ``@`` and a few numpy functions.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable, Mapping

import numpy as np

from gpuprofiler.errors import UserError

MAX_LENGTH = 2000
MAX_POWER_EXPONENT = 256

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def _ceil(x):
    return math.ceil(x)


def _floor(x):
    return math.floor(x)


SCALAR_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "ceil": _ceil,
    "floor": _floor,
    "log2": math.log2,
    "abs": abs,
    "sqrt": math.sqrt,
    "exp": math.exp,
}


def _reshape(a, *shape):
    return np.reshape(a, tuple(int(s) for s in shape))


def _sum(a, axis=None):
    return np.sum(a, axis=None if axis is None else int(axis))


def _sort(a, axis=-1):
    return np.sort(a, axis=int(axis))


def csr_matvec(rowptr, cols, vals, x):
    """y = A @ x for A in CSR form (rowptr, cols, vals); rows may be empty."""
    rowptr = np.asarray(rowptr, dtype=np.int64)
    products = np.asarray(vals) * np.asarray(x)[np.asarray(cols, dtype=np.int64)]
    sums = np.concatenate(([0], np.cumsum(products)))
    return sums[rowptr[1:]] - sums[rowptr[:-1]]


ARRAY_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": np.min,
    "max": np.max,
    "minimum": np.minimum,
    "maximum": np.maximum,
    "ceil": np.ceil,
    "floor": np.floor,
    "log2": np.log2,
    "log": np.log,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "sin": np.sin,
    "cos": np.cos,
    "sum": _sum,
    "reshape": _reshape,
    "transpose": np.transpose,
    "matmul": np.matmul,
    "where": np.where,
    "sort": _sort,
    "csr_matvec": csr_matvec,
}


class _Evaluator:
    def __init__(self, names: Mapping[str, Any], functions: Mapping[str, Callable], arrays: bool, where: str):
        self.names = names
        self.functions = functions
        self.arrays = arrays
        self.where = where

    def fail(self, message: str) -> UserError:
        return UserError(f"{self.where}: {message}")

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise self.fail(f"only numbers are allowed, not {node.value!r}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            raise self.fail(f"unknown name {node.id!r} (known: {', '.join(sorted(self.names)) or 'none'})")
        if isinstance(node, ast.BinOp):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(node.op, ast.MatMult) and self.arrays:
                return np.matmul(left, right)
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.fail(f"operator {type(node.op).__name__} is not allowed")
            if isinstance(node.op, ast.Pow) and np.ndim(right) == 0 and abs(float(right)) > MAX_POWER_EXPONENT:
                raise self.fail(f"exponent {right} is too large")
            try:
                return op(left, right)
            except ZeroDivisionError:
                raise self.fail("division by zero") from None
            except (OverflowError, ValueError, TypeError) as exc:
                raise self.fail(str(exc)) from None
        if isinstance(node, ast.UnaryOp):
            op = _UNARY.get(type(node.op))
            if op is None:
                raise self.fail(f"operator {type(node.op).__name__} is not allowed")
            return op(self.visit(node.operand))
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in self.functions:
                name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                raise self.fail(f"function {name!r} is not allowed (allowed: {', '.join(sorted(self.functions))})")
            if node.keywords:
                raise self.fail("keyword arguments are not allowed")
            args = [self.visit(a) for a in node.args]
            try:
                return self.functions[node.func.id](*args)
            except (ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
                raise self.fail(f"{node.func.id}(): {exc}") from None
        if isinstance(node, ast.Subscript) and self.arrays:
            value = self.visit(node.value)
            try:
                return value[self._index(node.slice)]
            except (IndexError, TypeError) as exc:
                raise self.fail(f"bad subscript: {exc}") from None
        raise self.fail(f"{type(node).__name__} is not allowed in an expression")

    def _index(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Tuple):
            return tuple(self._index(e) for e in node.elts)
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self._int(self.visit(p)) for p in (node.lower, node.upper, node.step)]
            return slice(*parts)
        value = self.visit(node)
        return value if np.ndim(value) > 0 else self._int(value)

    def _int(self, value: Any) -> int:
        if float(value) != int(value):
            raise self.fail(f"index {value} is not an integer")
        return int(value)


def parse(text: Any, where: str) -> ast.Expression:
    """Parse an expression (syntax only); raises UserError naming ``where``."""
    if isinstance(text, bool):
        raise UserError(f"{where}: expected a number or an expression, got {text!r}")
    if isinstance(text, (int, float)):
        text = repr(text)
    if not isinstance(text, str):
        raise UserError(f"{where}: expected a number or an expression string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise UserError(f"{where}: expression longer than {MAX_LENGTH} characters")
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UserError(f"{where}: cannot parse {text!r}: {exc.msg}") from None


def evaluate(text: Any, names: Mapping[str, Any] | None = None, where: str = "expression") -> int | float:
    """Value of an arithmetic expression over numbers and ``names``; raises UserError naming ``where``."""
    return _Evaluator(names or {}, SCALAR_FUNCTIONS, False, where).visit(parse(text, where))


def evaluate_int(text: Any, names: Mapping[str, Any] | None = None, where: str = "expression") -> int:
    """Like :func:`evaluate` but the value must be a whole number (sizes, shapes)."""
    value = evaluate(text, names, where)
    if isinstance(value, float):
        if not value.is_integer():
            raise UserError(f"{where}: {text!r} gives {value}, not a whole number")
        value = int(value)
    return int(value)


def evaluate_array(text: Any, names: Mapping[str, Any], where: str = "check expression") -> Any:
    """Value of a check expression over numpy arrays (subscripts, ``@`` and numpy functions allowed)."""
    return _Evaluator(names, ARRAY_FUNCTIONS, True, where).visit(parse(text, where))


def names_in(text: Any) -> set[str]:
    """Names an expression refers to (functions excluded)."""
    tree = parse(text, "expression")
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called
