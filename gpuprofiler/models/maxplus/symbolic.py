"""Max-plus algebra over symbolic times (sympy): the paper's worked examples and ``--explain``.

Entries are sympy expressions in positive time symbols, epsilon is ``-oo``; (+) is ``Max`` and
(.) is ``+``, so sympy's own rules keep the results exact (``Max(x, -oo) = x``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sympy

EPS = sympy.S.NegativeInfinity
N, n = sympy.symbols("N n", positive=True, integer=True)
t, T, dt, dT, tau = sympy.symbols("t T dt dT tau", positive=True)


def matmul(a: Sequence[Sequence[Any]], b: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """(A (.) B)_ij = Max_k (a_ik + b_kj), skipping epsilon terms so sums stay small."""
    rows, inner_n, cols = len(a), len(b), len(b[0]) if b else 0
    out = []
    for i in range(rows):
        row = []
        for j in range(cols):
            terms = [a[i][k] + b[k][j] for k in range(inner_n) if a[i][k] != EPS and b[k][j] != EPS]
            row.append(sympy.Max(*terms) if terms else EPS)
        out.append(row)
    return out


def power(z: Sequence[Sequence[Any]], k: int) -> list[list[Any]]:
    """Z^(.)k, k >= 1, by repeated products (the matrices here are small)."""
    out = [list(r) for r in z]
    for _ in range(k - 1):
        out = matmul(out, z)
    return out


def apply(z: Sequence[Sequence[Any]], x: Sequence[Any]) -> list[Any]:
    return [row[0] for row in matmul(z, [[v] for v in x])]


def inner(u: Sequence[Any], v: Sequence[Any]):
    terms = [a + b for a, b in zip(u, v) if a != EPS and b != EPS]
    return sympy.Max(*terms) if terms else EPS


def unit(size: int, positions) -> list[Any]:
    pos = set(positions)
    return [sympy.Integer(0) if i in pos else EPS for i in range(size)]


def time(z: Sequence[Sequence[Any]], inputs, outputs, k: int):
    """<1_o, Z^(.)k (.) 1_i>: the paper's time from the inputs to the outputs."""
    size = len(z)
    return inner(unit(size, outputs), apply(power(z, k), unit(size, inputs)))


ORDER = ("T", "tau", "t", "dt", "dT")


def _coeff(c) -> str:
    """A coefficient polynomial in n as the paper writes it: 2*n - 1 -> 2n-1."""
    text = sympy.sstr(sympy.expand(c), order="lex")
    text = re.sub(r"(\d+)\*([A-Za-z])", r"\1\2", text).replace(" ", "")
    return text


def _key(sym) -> tuple:
    name = str(sym)
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def fmt(expr) -> str:
    """An expression as the paper writes it: ``.`` for epsilon, ``ceil(N/n)*(T + tau + t + (2n-1)*dt)``."""
    expr = sympy.sympify(expr)
    if expr == EPS:
        return "."
    if isinstance(expr, sympy.Max):
        return "max{" + ", ".join(sorted(fmt(a) for a in expr.args)) + "}"
    if expr.is_Mul:
        outer = [f for f in expr.args if f.has(sympy.ceiling) or f.is_Number]
        rest = sympy.Mul(*[f for f in expr.args if f not in outer])
        if outer and rest != 1:
            head = "*".join(fmt(f) if not f.is_Number else sympy.sstr(f) for f in outer)
            body = fmt(rest)
            return f"{head}*({body})" if rest.is_Add else f"{head}*{body}"
    if expr.is_Add and expr.has(sympy.Max):
        maxes = [a for a in expr.args if isinstance(a, sympy.Max)]
        linear = sympy.Add(*[a for a in expr.args if not isinstance(a, sympy.Max)])
        if len(maxes) == len([a for a in expr.args if a.has(sympy.Max)]):
            head = [fmt(linear)] if linear != 0 else []
            return " + ".join(head + [fmt(m) for m in maxes])
    if isinstance(expr, sympy.ceiling):
        return "ceil(" + sympy.sstr(expr.args[0]) + ")"
    syms = sorted((s for s in expr.free_symbols if str(s) not in ("n", "N")), key=_key)
    if not syms:
        return _coeff(expr)
    parts = sympy.collect(sympy.expand(expr), syms, evaluate=False)
    terms = []
    for s in syms + [sympy.S.One]:
        c = parts.get(s)
        if c is None or c == 0:
            continue
        if s == 1:
            terms.append(_coeff(c))
        elif c == 1:
            terms.append(str(s))
        else:
            cs = _coeff(c)
            terms.append(f"({cs})*{s}" if not re.fullmatch(r"[\w.]+", cs) else f"{cs}*{s}")
    if len(terms) != len([k for k in parts if parts[k] != 0]):  # a product of symbols: leave it to sympy
        return sympy.sstr(expr).replace("ceiling(", "ceil(").replace("Max(", "max{")
    return " + ".join(terms).replace("+ -", "- ")


def show_matrix(z: Sequence[Sequence[Any]], names: Sequence[str] | None = None) -> str:
    """The matrix as a table, epsilon printed as ``.``, rows = destinations, columns = sources."""
    cells = [[fmt(v) for v in row] for row in z]
    width = max([len(c) for row in cells for c in row] + [1])
    head = "      " + " ".join(f"{j + 1:>{width}}" for j in range(len(cells)))
    lines = [head]
    for i, row in enumerate(cells):
        label = f"{i + 1:>4}  "
        tail = f"   {names[i]}" if names else ""
        lines.append(label + " ".join(f"{c:>{width}}" for c in row) + tail)
    return "\n".join(lines)
