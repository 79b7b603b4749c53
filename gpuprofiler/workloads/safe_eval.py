"""Safe evaluation of the arithmetic in spec files: an AST walk over a whitelist, never ``eval``.

Size expressions (``"n*n + 1"``, ``"ceil(n/256)*256"``) use :func:`evaluate`;
check expressions over numpy arrays use :func:`evaluate_array`, which adds
subscripts (slices, integer and boolean index arrays), ``@``, element-wise comparisons, the bitwise operators
``& | ^ ~ << >>`` and the numpy functions of :data:`ARRAY_FUNCTIONS` that a reference needs.

Evaluation is bounded, so that no expression can hang the tool or exhaust its memory: the text's
length, the parsed tree's depth and node count (checked before anything is evaluated), the magnitude of
every integer (past 2^63 is refused, a power is refused *before* it is computed when its result would be
larger), floats must stay finite, complex results are refused, array results are limited in elements
(checked before the operation that would allocate them), and the evaluation has a time limit. Each
failure is a :class:`~gpuprofiler.errors.UserError` naming the field (``where``) and the limit.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
import time
from typing import Any, Callable, Mapping

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.sparse import pair_sell_matvec, sell_matvec, var_sell_matvec

MAX_LENGTH = 2000            # characters of one expression
MAX_DEPTH = 64               # levels of the parsed tree (a sum of 30 terms is 31 levels deep)
MAX_NODES = 1000             # nodes of the parsed tree (the largest builtin check has about 400)
MAX_POWER_EXPONENT = 256     # |exponent| of a power
MAX_INT = 2 ** 63            # |integer| results past this are refused
MAX_ARRAY_ELEMENTS = 1 << 28  # elements of one array a check expression may create (2 GiB as float64)
MAX_SECONDS = 2.0            # a size expression's time limit
MAX_ARRAY_SECONDS = 600.0    # a check expression's time limit (checked between operations)

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
# comparisons and `and` / `or` / `not` (a tuning space's restrictions): 1 for true, 0 for false, numbers only
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                                                   ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
# check expressions only: bitwise operators (on integers and booleans; `&` and `|` combine comparisons of arrays)
_BITOPS: dict[type, Callable[[Any, Any], Any]] = {ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
                                                  ast.BitXor: operator.xor, ast.LShift: operator.lshift,
                                                  ast.RShift: operator.rshift}
MAX_SHIFT = 63               # a shift count past this is refused (1 << 10**9 would build a huge integer)


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


def _axis(axis):
    """An axis argument: None or a whole number (ValueError otherwise, which the evaluator reports)."""
    if axis is None:
        return None
    if np.ndim(axis) != 0 or float(axis) != int(axis):
        raise ValueError(f"the axis must be a whole number, got {axis!r}"[:200])
    return int(axis)


def _sum(a, axis=None):
    return np.sum(a, axis=_axis(axis))


def _sort(a, axis=-1):
    return np.sort(a, axis=_axis(axis))


def _cumsum(a, axis=None):
    return np.cumsum(a, axis=_axis(axis))


def _cumprod(a, axis=None):
    return np.cumprod(a, axis=_axis(axis))


def _flip(a, axis=None):
    return np.flip(a, axis=_axis(axis))


def _take(a, index, axis=None):
    return np.take(a, index, axis=_axis(axis))


def _bincount(a, minlength=0, weights=None):
    """numpy's bincount, its arguments in this order: counts of each value of ``a`` (or sums of ``weights``)."""
    a = np.asarray(a)
    if a.dtype.kind not in "biu":
        raise TypeError(f"the values counted must be integers, not {a.dtype}")
    return np.bincount(a.astype(np.int64, copy=False), weights, minlength=_axis(minlength))


def _to_int(a):
    """C's ``(long)x``: truncation toward zero to int64 (non-finite values and |x| >= 2^63 refused)."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and a.size and not (np.all(np.isfinite(a)) and float(np.max(np.abs(a))) < MAX_INT):
        raise ValueError("only finite values below 2^63 in magnitude convert to integers")
    out = a.astype(np.int64)
    return out if out.ndim else out[()]


def _arange_count(args) -> int:
    """How many elements ``arange(*args)`` has, computed before it is built."""
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if any(np.ndim(v) != 0 for v in (start, stop, step)):
        raise ValueError("arange() takes single numbers")
    if step == 0:
        raise ValueError("arange() step must not be zero")
    return max(0, math.ceil((float(stop) - float(start)) / float(step)))


def csr_matvec(rowptr, cols, vals, x):
    """y = A @ x for A in CSR form (rowptr, cols, vals); rows may be empty. Each row summed on its own by SciPy's
    compiled product (a spec's reference check at 268M non-zeros: 4 s, where prefix sums in numpy took 42), float
    values in float64 a block of rows at a time: no float64 copy of all the values (2 GiB of fresh memory at 268M,
    7 s on a 2-vCPU VM)."""
    import scipy.sparse

    rowptr, cols, vals, x = np.asarray(rowptr), np.asarray(cols), np.asarray(vals), np.asarray(x)
    rowptr, cols = (a if a.dtype.kind in "iu" else a.astype(np.int64) for a in (rowptr, cols))
    if rowptr.ndim != 1 or cols.ndim != 1 or vals.ndim != 1 or x.ndim != 1 or len(rowptr) < 1:
        raise ValueError("rowptr, cols, vals and x must be 1-D arrays, rowptr of at least one entry")
    if len(cols) != len(vals):
        raise ValueError(f"cols has {len(cols)} entries and vals {len(vals)}")
    if rowptr[0] != 0 or np.any(np.diff(rowptr) < 0) or rowptr[-1] > len(cols):
        raise ValueError(f"rowptr must rise from 0 to at most {len(cols)} (the non-zeros)")
    if len(cols) and (cols.min() < 0 or cols.max() >= len(x)):
        raise IndexError(f"index {int(cols.max() if cols.max() >= len(x) else cols.min())} is out of bounds for x "
                         f"of {len(x)}")
    # SciPy's product takes 32-bit indices as they are: no 64-bit copy of 268M columns (2 GiB of fresh memory)
    index = np.int32 if max(len(cols), len(x), len(rowptr)) < 2**31 - 1 else np.int64
    rowptr, cols = rowptr.astype(index, copy=False), cols.astype(index, copy=False)

    def wide(a):
        return a.astype(np.float64) if a.dtype.kind == "f" else a

    xw, rows, out = wide(x), len(rowptr) - 1, None
    for r0 in range(0, max(rows, 1), CSR_ROWS):
        r1 = min(rows, r0 + CSR_ROWS)
        p0, p1 = int(rowptr[r0]), int(rowptr[r1])
        block = scipy.sparse.csr_matrix((wide(vals[p0:p1]), cols[p0:p1], rowptr[r0:r1 + 1] - rowptr[r0]),
                                        shape=(r1 - r0, len(x)))
        part = block @ xw
        if out is None:
            out = np.empty(rows, part.dtype)
        out[r0:r1] = part
    return out


CSR_ROWS = 1 << 18  # rows of csr_matvec's float64 block
# array functions that sum their float arguments in float64 themselves: a check calling one is not given float64
# copies of its arrays
PROMOTING = frozenset(["csr_matvec"])


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
    "cumsum": _cumsum,
    "cumprod": _cumprod,
    "flip": _flip,
    "take": _take,
    "arange": np.arange,
    "bincount": _bincount,
    "int": _to_int,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "logical_not": np.logical_not,
    "csr_matvec": csr_matvec,
    "sell_matvec": sell_matvec,
    "pair_sell_matvec": pair_sell_matvec,
    "var_sell_matvec": var_sell_matvec,
}
# array functions whose arguments broadcast against each other (the result has the broadcast shape)
_BROADCASTING = frozenset(["minimum", "maximum", "where", "logical_and", "logical_or", "logical_xor"])


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``a @ b`` would have (None where numpy itself will refuse the operands)."""
    if not a or not b:
        return None
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        return None
    shape = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b) == 1:
        shape = shape[:-1]
    return shape


def _elements(shape: tuple[int, ...]) -> int:
    count = 1
    for s in shape:
        count *= int(s)
    return count


def _index_shape(shape: tuple[int, ...], index: Any) -> tuple[int, ...] | None:
    """The shape ``array[index]`` will have (numpy's rules for whole numbers, slices and integer or boolean index
    arrays), so that a fancy index is refused before it allocates; None where numpy itself will refuse the index."""
    items = index if isinstance(index, tuple) else (index,)
    fancy = any(isinstance(i, np.ndarray) for i in items)
    parts: list[tuple[str, Any]] = []  # ("basic", extent) or ("fancy", shape), in the index's order
    dim = 0
    for item in items:
        if isinstance(item, slice):
            if dim >= len(shape):
                return None
            parts.append(("basic", len(range(*item.indices(shape[dim])))))
            dim += 1
        elif isinstance(item, np.ndarray):
            if item.dtype.kind == "b":
                if item.ndim == 0 or dim + item.ndim > len(shape):
                    return None
                parts.append(("fancy", (int(np.count_nonzero(item)),)))
                dim += item.ndim
            else:
                parts.append(("fancy", item.shape))
                dim += 1
        else:  # a whole number: drops its axis (taken as a 0-d index array beside index arrays)
            if fancy:
                parts.append(("fancy", ()))
            dim += 1
    if dim > len(shape):
        return None
    kinds = "".join("f" if kind == "fancy" else "b" for kind, _ in parts)
    try:
        together = tuple(np.broadcast_shapes(*[p for kind, p in parts if kind == "fancy"])) if fancy else ()
    except ValueError:
        return None
    basics = [p for kind, p in parts if kind == "basic"]
    if not fancy:
        return tuple(basics) + tuple(shape[dim:])
    first = kinds.index("f")
    if "b" in kinds[first:kinds.rindex("f")]:  # index arrays apart: their shape comes first
        return together + tuple(basics) + tuple(shape[dim:])
    before = kinds[:first].count("b")
    return tuple(basics[:before]) + together + tuple(basics[before:]) + tuple(shape[dim:])


def _take_shape(args: list[Any]) -> tuple[int, ...] | None:
    a, index = np.shape(args[0]), np.shape(args[1])
    axis = args[2] if len(args) > 2 else None
    if axis is None:
        return index
    if np.ndim(axis) != 0 or not -len(a) <= int(axis) < len(a):
        return None
    axis = int(axis) % len(a)
    return a[:axis] + index + a[axis + 1:]


# numpy's ufuncs take an output array after their inputs: a third argument to maximum() would be written into
_ARRAY_ARITY = {**{f: (1, 1) for f in ("ceil", "floor", "log2", "log", "abs", "sqrt", "exp", "sin", "cos", "int",
                                       "logical_not")},
                **{f: (2, 2) for f in ("minimum", "maximum", "matmul", "logical_and", "logical_or", "logical_xor")},
                **{f: (1, 2) for f in ("cumsum", "cumprod", "flip", "sort")},
                "where": (3, 3), "transpose": (1, 1), "arange": (1, 3), "take": (2, 3), "bincount": (1, 3)}


class _Evaluator:
    def __init__(self, names: Mapping[str, Any], functions: Mapping[str, Callable], arrays: bool, where: str):
        self.names = names
        self.functions = functions
        self.arrays = arrays
        self.where = where
        self.limit_s = MAX_ARRAY_SECONDS if arrays else MAX_SECONDS
        self.deadline = time.monotonic() + self.limit_s
        # an operation may make arrays as large as the spec's own arrays, or up to MAX_ARRAY_ELEMENTS
        self.max_elements = max([MAX_ARRAY_ELEMENTS] + [int(v.size) for v in names.values() if isinstance(v, np.ndarray)])

    def fail(self, message: str) -> UserError:
        return UserError(f"{self.where}: {message}")

    # -- bounds ------------------------------------------------------------------------------
    @staticmethod
    def _what(what: str | ast.AST) -> str:
        return what if isinstance(what, str) else f"the result of {ast.unparse(what)[:80]!r}"

    def bounded(self, value: Any, what: str | ast.AST) -> Any:
        """``value`` if it is within the limits (integers up to 2^63, finite real floats, arrays of at most
        ``max_elements`` real elements); a UserError naming ``what`` (a text, or the expression's node, formatted
        only on failure) otherwise."""
        if isinstance(value, (bool, np.bool_)):
            return value
        if isinstance(value, numbers.Integral):
            if abs(int(value)) > MAX_INT:
                raise self.fail(f"{self._what(what)} is larger than 2^63 in magnitude (integers are limited to +-2^63)")
            return value
        if isinstance(value, numbers.Real):
            if not math.isfinite(value):
                raise self.fail(f"{self._what(what)} is not a finite number ({value})")
            return value
        if isinstance(value, (numbers.Complex, np.complexfloating)):
            raise self.fail(f"{self._what(what)} is a complex number ({value}): only real results are allowed")
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "c":
                raise self.fail(f"{self._what(what)} is complex: only real results are allowed")
            if value.dtype.kind not in "biuf":
                raise self.fail(f"{self._what(what)} is not numeric (dtype {value.dtype})")
            if value.size > self.max_elements:
                raise self.fail(f"{self._what(what)} has {value.size} elements: more than the limit of "
                                f"{self.max_elements}")
            return value
        raise self.fail(f"{self._what(what)} is not a number ({type(value).__name__})")

    def check_elements(self, shape: tuple[int, ...], what: str) -> None:
        count = _elements(shape)
        if count > self.max_elements:
            raise self.fail(f"{what} would have {count} elements (shape {shape}): more than the limit of "
                            f"{self.max_elements}")

    def broadcast(self, values: list[Any], what: str) -> None:
        """Refuse, before computing it, an operation on arrays whose broadcast result would be too large."""
        shapes = [np.shape(v) for v in values if isinstance(v, np.ndarray)]
        if len(shapes) < 2:  # one array (or none): the result is no larger than the operand
            return
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise self.fail(f"{what}: shapes {' and '.join(str(s) for s in shapes)} do not broadcast") from None
        self.check_elements(tuple(shape), what)

    def _check_size(self, name: str, args: list[Any]) -> None:
        """Refuse, before it is built, the result of a function that can be larger than its arguments."""
        try:
            if name == "arange":
                self.check_elements((_arange_count(args),), "arange()")
            elif name == "take":
                shape = _take_shape(args)
                if shape is not None:
                    self.check_elements(shape, "take()")
            elif name == "bincount" and np.size(args[0]) and np.asarray(args[0]).dtype.kind in "iu":
                minlength = args[1] if len(args) > 1 and np.ndim(args[1]) == 0 else 0
                self.check_elements((max(int(np.max(args[0])) + 1, int(minlength)),), "bincount()")
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.fail(f"{name}(): {exc}") from None

    def shift(self, left: Any, right: Any, node: ast.AST) -> None:
        """Refuse a shift by a negative count or by more than :data:`MAX_SHIFT` bits (a Python integer would grow)."""
        counts = np.asarray(right)
        if counts.size and counts.dtype.kind in "iub" and (int(np.min(counts)) < 0 or int(np.max(counts)) > MAX_SHIFT):
            raise self.fail(f"{ast.unparse(node)[:80]!r}: shift counts must lie in 0 .. {MAX_SHIFT}")

    def power(self, left: Any, right: Any) -> None:
        """Refuse a power whose result would be past the integer limit, before it is computed."""
        if np.ndim(right) == 0 and abs(float(right)) > MAX_POWER_EXPONENT:
            raise self.fail(f"exponent {right} is too large (the limit is {MAX_POWER_EXPONENT})")
        if (isinstance(left, numbers.Integral) and isinstance(right, numbers.Integral)
                and not isinstance(left, (bool, np.bool_)) and int(right) > 0 and abs(int(left)) > 1):
            bits = math.log2(abs(int(left))) * int(right)
            if bits > 63:
                raise self.fail(f"{left} ** {right} would be about 2^{bits:.0f}: larger than 2^63 in magnitude "
                                "(integers are limited to +-2^63)")

    # -- the walk ----------------------------------------------------------------------------
    def visit(self, node: ast.AST) -> Any:
        if time.monotonic() > self.deadline:
            raise self.fail(f"evaluation took longer than the limit of {self.limit_s:g} s")
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise self.fail(f"only numbers are allowed, not {node.value!r}")
            return self.bounded(node.value, f"the number {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.bounded(self.names[node.id], f"the value of {node.id}")
            raise self.fail(f"unknown name {node.id!r} (known: {', '.join(sorted(self.names)) or 'none'})")
        if isinstance(node, ast.BinOp):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(node.op, ast.MatMult) and self.arrays:
                if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
                    shape = _matmul_shape(left.shape, right.shape)
                    if shape is not None:
                        self.check_elements(shape, repr(ast.unparse(node)[:80]))
                return self.bounded(self._apply(np.matmul, left, right, node), node)
            op = _BINOPS.get(type(node.op)) or (_BITOPS.get(type(node.op)) if self.arrays else None)
            if op is None:
                raise self.fail(f"operator {type(node.op).__name__} is not allowed")
            if isinstance(node.op, ast.Pow):
                self.power(left, right)
            if isinstance(node.op, (ast.LShift, ast.RShift)):
                self.shift(left, right, node)
            if self.arrays:
                self.broadcast([left, right], repr(ast.unparse(node)[:80]))
            return self.bounded(self._apply(op, left, right, node), node)
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp)
                                                             and isinstance(node.op, ast.Not)):
            return self._logic(node)
        if isinstance(node, ast.UnaryOp):
            op = _UNARY.get(type(node.op))
            if op is None and self.arrays and isinstance(node.op, ast.Invert):
                op = operator.invert
            if op is None:
                raise self.fail(f"operator {type(node.op).__name__} is not allowed")
            operand = self.visit(node.operand)
            try:
                return self.bounded(op(operand), node)
            except TypeError as exc:  # ~ of a float
                raise self.fail(f"{ast.unparse(node)[:80]!r}: {exc}") from None
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in self.functions:
                name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)[:80]
                raise self.fail(f"function {name!r} is not allowed (allowed: {', '.join(sorted(self.functions))})")
            if node.keywords:
                raise self.fail("keyword arguments are not allowed")
            name = node.func.id
            args = [self.visit(a) for a in node.args]
            if self.arrays:
                low, high = _ARRAY_ARITY.get(name, (0, len(args)))
                if not low <= len(args) <= high:
                    want = str(low) if low == high else f"{low} to {high}"
                    raise self.fail(f"{name}() takes {want} argument(s), got {len(args)}")
                if name in _BROADCASTING:
                    self.broadcast(args, f"{name}()")
                elif name == "matmul" and len(args) == 2 and all(isinstance(a, np.ndarray) for a in args):
                    shape = _matmul_shape(args[0].shape, args[1].shape)
                    if shape is not None:
                        self.check_elements(shape, "matmul()")
                self._check_size(name, args)
            try:
                result = self.functions[name](*args)
            except (ValueError, TypeError, OverflowError, ZeroDivisionError, IndexError) as exc:
                raise self.fail(f"{name}(): {exc}") from None
            return self.bounded(result, node)
        if isinstance(node, ast.Subscript) and self.arrays:
            value = self.visit(node.value)
            index = self._index(node.slice)
            if not isinstance(value, np.ndarray):
                raise self.fail(f"bad subscript: {ast.unparse(node.value)[:80]!r} is not an array")
            shape = _index_shape(value.shape, index)
            if shape is not None:
                self.check_elements(shape, repr(ast.unparse(node)[:80]))
            try:
                result = value[index]
            except (IndexError, TypeError, ValueError, OverflowError) as exc:
                raise self.fail(f"bad subscript: {exc}") from None
            return self.bounded(result, node)
        raise self.fail(f"{type(node).__name__} is not allowed in an expression")

    def _truth(self, value: Any, node: ast.AST) -> bool:
        if isinstance(value, np.ndarray) and value.size != 1:
            raise self.fail(f"{ast.unparse(node)[:80]!r}: and/or/not need single numbers, not arrays (on arrays: "
                            "& | ~ or logical_and, logical_or, logical_not)")
        return bool(value)

    def _logic(self, node: ast.AST) -> Any:
        """A comparison (chains too), ``and``, ``or`` or ``not``, short-circuited as in Python: 1 or 0. In a check
        expression a comparison involving an array is element by element (a boolean array, a chain's links joined
        by ``&``)."""
        if isinstance(node, ast.UnaryOp):
            return int(not self._truth(self.visit(node.operand), node))
        if isinstance(node, ast.BoolOp):
            want = isinstance(node.op, ast.Or)  # `or` stops at the first true operand, `and` at the first false
            for value in node.values:
                if self._truth(self.visit(value), node) == want:
                    return int(want)
            return int(not want)
        left, together = self.visit(node.left), None
        for op, right_node in zip(node.ops, node.comparators):
            fn = _COMPARE.get(type(op))
            if fn is None:
                raise self.fail(f"operator {type(op).__name__} is not allowed")
            right = self.visit(right_node)
            if self.arrays and (isinstance(left, np.ndarray) or isinstance(right, np.ndarray)):
                what = repr(ast.unparse(node)[:80])
                self.broadcast([left, right] if together is None else [together, left, right], what)
                link = self.bounded(self._apply(fn, left, right, node), node)
                together = link if together is None else np.logical_and(together, link)
            elif not self._truth(fn(left, right), node):
                return 0
            left = right
        return 1 if together is None else together

    def _apply(self, op: Callable[[Any, Any], Any], left: Any, right: Any, node: ast.AST) -> Any:
        try:
            return op(left, right)
        except ZeroDivisionError:
            raise self.fail("division by zero") from None
        except (OverflowError, ValueError, TypeError) as exc:
            raise self.fail(f"{ast.unparse(node)[:80]!r}: {exc}") from None

    def _index(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Tuple):
            return tuple(self._index(e) for e in node.elts)
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self._int(self.visit(p)) for p in (node.lower, node.upper, node.step)]
            return slice(*parts)
        value = self.visit(node)
        if np.ndim(value) > 0:
            if value.dtype.kind not in "biu":
                raise self.fail(f"an index array must hold integers or booleans, not {value.dtype}")
            return value
        return self._int(value)

    def _int(self, value: Any) -> int:
        if np.ndim(value) != 0 or isinstance(value, (bool, np.bool_)):
            raise self.fail(f"an index or slice bound must be a single whole number, got {value!r}"[:200])
        if float(value) != int(value):
            raise self.fail(f"index {value} is not an integer")
        return int(value)


def _tree_size(tree: ast.AST) -> tuple[int, int]:
    """Depth and node count of a parsed tree, without recursion (a deep tree cannot overflow the stack)."""
    depth, nodes = 0, 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            break
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return depth, nodes


def parse(text: Any, where: str) -> ast.Expression:
    """Parse an expression (syntax and size limits only); raises UserError naming ``where``."""
    if isinstance(text, bool):
        raise UserError(f"{where}: expected a number or an expression, got {text!r}")
    if isinstance(text, float) and not math.isfinite(text):
        raise UserError(f"{where}: {text} is not a finite number")
    if isinstance(text, (int, float)):
        if isinstance(text, int) and abs(text) > MAX_INT:
            raise UserError(f"{where}: the number is larger than 2^63 in magnitude (integers are limited to +-2^63)")
        text = repr(text)
    if not isinstance(text, str):
        raise UserError(f"{where}: expected a number or an expression string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise UserError(f"{where}: expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UserError(f"{where}: cannot parse {text[:200]!r}: {exc.msg}") from None
    except ValueError as exc:  # Python 3.11: "source code string cannot contain null bytes"
        raise UserError(f"{where}: cannot parse {text[:200]!r}: {exc}") from None
    except (RecursionError, MemoryError):
        raise UserError(f"{where}: expression nested too deeply to parse (the depth limit is {MAX_DEPTH})") from None
    depth, nodes = _tree_size(tree)
    if nodes > MAX_NODES:
        raise UserError(f"{where}: expression has more than {MAX_NODES} parts (numbers, names and operators)")
    if depth > MAX_DEPTH:
        raise UserError(f"{where}: expression nested more than {MAX_DEPTH} levels deep")
    return tree


def evaluate(text: Any, names: Mapping[str, Any] | None = None, where: str = "expression") -> int | float:
    """Value of an arithmetic expression over numbers and ``names``; raises UserError naming ``where``."""
    tree = parse(text, where)
    with np.errstate(all="ignore"):  # a non-finite or overflowing value is judged by bounded(), not warned of
        return _Evaluator(names or {}, SCALAR_FUNCTIONS, False, where).visit(tree)


def evaluate_int(text: Any, names: Mapping[str, Any] | None = None, where: str = "expression") -> int:
    """Like :func:`evaluate` but the value must be a whole number (sizes, shapes)."""
    value = evaluate(text, names, where)
    if isinstance(value, float):
        if not value.is_integer():
            raise UserError(f"{where}: {text!r} gives {value}, not a whole number")
        value = int(value)
        if abs(value) > MAX_INT:
            raise UserError(f"{where}: {text!r} gives {value:.3g}: larger than 2^63 in magnitude")
    return int(value)


def evaluate_array(text: Any, names: Mapping[str, Any], where: str = "check expression") -> Any:
    """Value of a check expression over numpy arrays (subscripts, ``@`` and numpy functions allowed)."""
    tree = parse(text, where)
    with np.errstate(all="ignore"):  # as in evaluate(): every value is judged, none warned of
        return _Evaluator(names, ARRAY_FUNCTIONS, True, where).visit(tree)


def names_in(text: Any) -> set[str]:
    """Names an expression refers to (functions excluded)."""
    tree = parse(text, "expression")
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called
