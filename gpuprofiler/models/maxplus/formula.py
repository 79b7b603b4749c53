"""The symbolic form of a max-plus prediction (sympy), for ``--explain`` and the paper's worked examples.

The numbers never come from here (:mod:`~gpuprofiler.models.maxplus.models` computes them directly); this
writes the same model as a formula in the paper's symbols: t, T, t_c, t_l, dt, dT, tau, n, N.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import sympy

from gpuprofiler.models.maxplus.graph import Kernel, KernelGraph, levels
from gpuprofiler.models.maxplus.models import _on_bus, bus_ids, op_names, step_name
from gpuprofiler.models.maxplus.symbolic import EPS, N, T, fmt, n, t

SYMBOLIC_ARCS = 400  # larger graphs get no formula: sympy's Max over thousands of paths is slow


def _step_symbol(kind: str, info: dict) -> sympy.Symbol:
    """The serialization step of one access: dt (unit stride), dt_line (strided) or dt_gather."""
    return sympy.Symbol(step_name(kind, info), positive=True)


def _counted(counts: Counter):
    """sum(count * symbol) as one sympy expression."""
    return sympy.Add(*[c * sym for sym, c in counts.items() if c])


def arc_symbols(g: KernelGraph, model: str) -> dict[int, Any]:
    """Each arc's symbolic time under ``model``, by index in ``g.arcs``."""
    sym: dict[int, Any] = {}
    if model in ("serial", "cache"):
        for ids, base in zip(bus_ids(g, model), (t, T)):
            steps = [_step_symbol(g.arcs[i].kind, g.arcs[i].info) for i in ids]
            total = _counted(Counter(steps))
            before: Counter = Counter()
            for j, i in enumerate(ids):  # prefix sums kept as counts per step symbol: O(arcs), not O(arcs^2)
                sym[i] = base + (n - 1) * total + _counted(before)
                before[steps[j]] += 1
    tc, tl = sympy.Symbol("t_c", positive=True), sympy.Symbol("t_l", positive=True)
    for i, a in enumerate(g.arcs):
        if i in sym:
            continue
        if a.kind == "read":
            sym[i] = tc if (model in ("cache", "overlap") and not a.info.get("first", True)) else t
        elif a.kind == "write":
            sym[i] = T
        elif a.kind in ("local_read", "local_write"):
            sym[i] = tl
        elif a.kind == "time":
            sym[i] = sympy.Symbol(a.info["symbol"], positive=True)
        else:
            sym[i] = sympy.S.Zero
    return sym


def loop_symbols(g: KernelGraph, model: str, kernel: Kernel) -> dict[int, Any]:
    """Each operation node's latency symbol (none in the naive model, which counts data moves only)."""
    if model == "naive":
        return {}
    op_name = op_names(kernel)
    return {node: sympy.Symbol(op_name(info), positive=True) for node, info in g.loops.items()}


def bus_symbol(g: KernelGraph, model: str) -> Any:
    """Time one batch of n work-items holds the serialized memory: n * (sum of its steps)."""
    return n * sum((_step_symbol(a.kind, a.info) for a in g.arcs if _on_bus(a, model)), sympy.S.Zero)


def symbolic_text(sym, batches: str) -> str:
    """The total as text: ``ceil(N/n)*(batch)`` or ``(ceil(N/n) - 1)*max{bus, ops} + batch``."""
    if batches == "sequential":
        return fmt(sym)
    parts = sympy.Add.make_args(sym)
    piped = [p for p in parts if p.has(sympy.ceiling)]
    rest = sympy.Add(*[p for p in parts if not p.has(sympy.ceiling)])
    if len(piped) == 1 and piped[0].is_Mul:
        per = sympy.Mul(*[f for f in piped[0].args if not f.has(sympy.ceiling)])
        body = fmt(per)
        body = f"({body})" if " + " in body and not isinstance(per, sympy.Max) else body
        return f"(ceil(N/n) - 1)*{body} + {fmt(rest)}"
    return fmt(sym)


def fragment_symbol(g: KernelGraph, arcs: dict[int, Any], loops: dict[int, Any]):
    """The fragment's symbolic time: <1_o, (I (+) Z)^k (.) 1_i> propagated along the levels."""
    if not g.outputs:
        return sympy.S.Zero
    has_loop = np.zeros(g.size, dtype=bool)
    has_loop[list(g.loops)] = True
    level, _ = levels(g.size, [a.dst for a in g.arcs], [a.src for a in g.arcs], has_loop)
    x: list[Any] = [EPS] * g.size
    for i in g.inputs:
        x[i] = sympy.S.Zero
    incoming: dict[int, list[int]] = {}
    for i, a in enumerate(g.arcs):
        incoming.setdefault(a.dst, []).append(i)
    for node in sorted(range(g.size), key=lambda v: level[v]):
        terms = [x[g.arcs[i].src] + arcs[i] for i in incoming.get(node, []) if x[g.arcs[i].src] != EPS]
        if terms:
            x[node] = sympy.Max(x[node], *terms) if x[node] != EPS else sympy.Max(*terms)
        if node in loops and x[node] != EPS:
            x[node] = x[node] + loops[node]
    outs = [x[o] for o in g.outputs if x[o] != EPS]
    return sympy.Max(*outs) if outs else sympy.S.Zero


def total_text(kernel: Kernel, model: str, batches: str) -> str:
    """The prediction as a formula: the paper's batches, or the overlap model's bounds, plus the launch."""
    if sum(len(g.arcs) for g in kernel.fragments) > SYMBOLIC_ARCS:
        return f"(no formula: more than {SYMBOLIC_ARCS} arcs)"
    timed = [g for g in kernel.fragments if g.outputs]
    batch = sympy.Add(*[fragment_symbol(g, arc_symbols(g, model), loop_symbols(g, model, kernel)) for g in timed])
    if model == "overlap":
        barrier = (len(timed) - 1) * sympy.Symbol("t_bar", positive=True) if len(timed) > 1 else sympy.S.Zero
        body = fmt(sympy.ceiling(N / n) * (batch + barrier))
        return f"launch + max({body}, DRAM, cache, L1, issue)"
    if batches == "sequential":
        return "launch + " + fmt(sympy.ceiling(N / n) * batch)
    bus = sympy.Add(*[bus_symbol(g, model) for g in timed])
    ops = sympy.Add(*[n * sympy.Add(*[sympy.Symbol("theta" + str(s)[3:], positive=True)
                                      for s in loop_symbols(g, model, kernel).values()]) for g in timed])
    per = sympy.Max(bus, ops) if ops != 0 else bus
    return "launch + " + symbolic_text((sympy.ceiling(N / n) - 1) * per + batch, batches)
