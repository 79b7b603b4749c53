"""Index arithmetic of a kernel's code: integers, and affine forms in the thread ids.

The builder executes a kernel for one symbolic work-item; almost every index is affine in the local and group
ids (``(by*16 + ly)*n + k``) with the launch's scalar arguments already numbers, so it is kept as six integer
coefficients and a constant: adding, scaling and comparing them costs nanoseconds where sympy costs tens of
microseconds, which is what makes unrolling a thousand-iteration loop fast. The rare index that is not affine
(``gid % width`` with a thread id inside) falls back to a sympy expression.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import sympy

THREAD_NAMES = ("lx", "ly", "lz", "bx", "by", "bz")
THREAD = tuple(sympy.Symbol(s, integer=True, nonnegative=True) for s in THREAD_NAMES)
LX, LY, LZ, BX, BY, BZ = THREAD


class Affine:
    """c0 + sum(coef_k * thread_k): an index that moves with the work-item (at least one coefficient non-zero)."""

    __slots__ = ("coef", "const")

    def __init__(self, coef: tuple[int, ...], const: int = 0):
        self.coef = coef
        self.const = const

    @staticmethod
    def thread(k: int, scale: int = 1) -> "Affine":
        coef = [0] * 6
        coef[k] = scale
        return Affine(tuple(coef))

    @property
    def key(self) -> tuple:
        return self.coef + (self.const,)

    def sympy(self):
        return sympy.Add(*[c * s for c, s in zip(self.coef, THREAD) if c], sympy.Integer(self.const))

    def values(self, sample: dict[str, np.ndarray]) -> np.ndarray:
        out = np.full(len(sample["lx"]), self.const, dtype=np.int64)
        for c, name in zip(self.coef, THREAD_NAMES):
            if c:
                out += c * sample[name]
        return out

    def __repr__(self) -> str:
        terms = [f"{c}*{s}" if c != 1 else s for c, s in zip(self.coef, THREAD_NAMES) if c]
        text = "+".join(terms + ([str(self.const)] if self.const or not terms else []))
        return text.replace("+-", "-")


def _make(coef: tuple[int, ...], const: int):
    return Affine(coef, const) if any(coef) else const


def as_sympy(v):
    if isinstance(v, Affine):
        return v.sympy()
    return sympy.sympify(v)


def _from_sympy(e):
    """A sympy result back to an int where it is a number (sympy stays sympy otherwise)."""
    if isinstance(e, sympy.Integer):
        return int(e)
    if isinstance(e, sympy.Basic) and e.is_Rational:
        return e
    return e


def add(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, (int, Affine)) and isinstance(b, (int, Affine)):
        ca, ka = (a.coef, a.const) if isinstance(a, Affine) else ((0,) * 6, a)
        cb, kb = (b.coef, b.const) if isinstance(b, Affine) else ((0,) * 6, b)
        return _make(tuple(x + y for x, y in zip(ca, cb)), ka + kb)
    return _from_sympy(as_sympy(a) + as_sympy(b))


def neg(a):
    if isinstance(a, int):
        return -a
    if isinstance(a, Affine):
        return Affine(tuple(-c for c in a.coef), -a.const)
    return -a


def sub(a, b):
    return add(a, neg(b))


def mul(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, Affine) and isinstance(b, int):
        return _make(tuple(c * b for c in a.coef), a.const * b)
    if isinstance(b, Affine) and isinstance(a, int):
        return mul(b, a)
    return _from_sympy(sympy.expand(as_sympy(a) * as_sympy(b)))


def div(a, b):
    """C integer division (toward zero)."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("index division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if isinstance(a, Affine) and isinstance(b, int) and b and all(c % b == 0 for c in a.coef) and a.const % b == 0:
        return _make(tuple(c // b for c in a.coef), a.const // b)  # exact (thread ids are non-negative)
    q = as_sympy(a) / as_sympy(b)
    return _from_sympy(sympy.Piecewise((sympy.floor(q), q >= 0), (sympy.ceiling(q), True)))


def floordiv(a, b):
    """Division rounding down (an arithmetic right shift: ``a >> k`` is ``floordiv(a, 2**k)``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if isinstance(a, Affine) and isinstance(b, int) and b and all(c % b == 0 for c in a.coef) and a.const % b == 0:
        return _make(tuple(c // b for c in a.coef), a.const // b)
    return _from_sympy(sympy.floor(as_sympy(a) / as_sympy(b)))


def mod(a, b):
    """C remainder: the sign of the dividend, ``a - b * div(a, b)``."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ZeroDivisionError("index modulo by zero")
        return int(np.fmod(a, b))
    return _from_sympy(sympy.expand(as_sympy(a) - as_sympy(b) * as_sympy(div(a, b))))


def is_number(v) -> bool:
    return isinstance(v, (int, bool)) or (isinstance(v, sympy.Basic) and v.is_number)


def key(v) -> Any:
    """A hashable identity of an index (same key: same address for every work-item)."""
    if isinstance(v, Affine):
        return v.key
    if isinstance(v, int):
        return (0,) * 6 + (v,)
    return str(sympy.expand(v))


def thread_dependent(v) -> bool:
    """Whether an index differs between work-items (it holds a work-item or work-group id); anything that is not an
    index (a data value, a condition, a pointer) does not."""
    if isinstance(v, Affine):
        return True
    return isinstance(v, sympy.Basic) and bool(v.free_symbols & set(THREAD))


def thread_free_difference(a, b) -> bool:
    """Whether ``a - b`` is the same for every work-item (neighbouring addresses over the grid)."""
    if isinstance(a, (int, Affine)) and isinstance(b, (int, Affine)):
        ca = a.coef if isinstance(a, Affine) else (0,) * 6
        cb = b.coef if isinstance(b, Affine) else (0,) * 6
        return ca == cb
    return not ((as_sympy(a) - as_sympy(b)).free_symbols & set(THREAD))


def coefficients(v) -> tuple[list[Any], Any]:
    """The coefficients of (lx, ly, lz, bx, by, bz) and the constant; None where not a number."""
    if isinstance(v, int):
        return [0] * 6, v
    if isinstance(v, Affine):
        return list(v.coef), v.const
    e = sympy.expand(v)
    coef = []
    for s in THREAD:
        d = sympy.diff(e, s)
        coef.append(int(d) if d.is_Integer else None)
    const = e.subs({s: 0 for s in THREAD})
    return coef, (int(const) if const.is_Integer else None)


_FLOORDIV = sympy.Function("floordiv")
NUMERIC: dict[str, Any] = {}  # functions an index may hold that numpy evaluates (bitwise operators)


def register_numeric(functions: dict[str, Any]) -> None:
    """Name sympy functions that numpy evaluates at the sampled work-items (``bitand`` -> ``np.bitwise_and``)."""
    NUMERIC.update(functions)


def _exact_floors(e):
    """``floor(p/q)`` as the integer floor division ``p // q``: evaluated as written, ``p/q`` is a float and rounds
    (``floor(bz/3 + 1/3)`` at bz = 5 is floor(1.9999999999999998) = 1, not 2)."""
    def floordiv(arg):
        num, den = sympy.fraction(sympy.together(arg))
        return _FLOORDIV(num, den)

    return e.replace(sympy.floor, floordiv).replace(sympy.ceiling, lambda arg: -floordiv(-arg))


@lru_cache(maxsize=4096)
def _numeric(v):
    """``v`` as a numpy function of the six thread ids (compiled once per expression)."""
    return sympy.lambdify(THREAD, _exact_floors(v), modules=[{"floordiv": np.floor_divide, **NUMERIC}, "numpy"])


def values(v, sample: dict[str, np.ndarray]) -> np.ndarray | None:
    """The index at every sampled work-item (None where it depends on something else than the thread ids)."""
    n = len(sample["lx"])
    if isinstance(v, int):
        return np.full(n, v, dtype=np.int64)
    if isinstance(v, Affine):
        return v.values(sample)
    if isinstance(v, sympy.Basic):
        if v.free_symbols - set(THREAD):
            return None
        out = _numeric(v)(*(sample[s] for s in THREAD_NAMES))
        return np.broadcast_to(np.asarray(out, dtype=np.int64), (n,)).copy()
    return None


def pretty(v) -> str:
    if isinstance(v, (int, Affine)):
        return repr(v)
    return sympy.sstr(v).replace(" ", "")
