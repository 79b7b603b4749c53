"""``--explain``: the graph, its matrix (epsilon as ``.``), its height and the symbolic time."""

from __future__ import annotations

import numpy as np
import sympy

from gpuprofiler.models.maxplus import symbolic
from gpuprofiler.models.maxplus.formula import arc_symbols, loop_symbols
from gpuprofiler.models.maxplus.graph import Kernel, KernelGraph, height, levels

MATRIX_NODES = 40  # larger fragments are listed arc by arc only


def display_order(g: KernelGraph, with_loops: bool) -> list[int]:
    """Outputs first, inputs last (the paper's numbering): nodes by decreasing level, then creation."""
    loops = np.zeros(g.size, dtype=bool)
    if with_loops:
        loops[list(g.loops)] = True
    level, _ = levels(g.size, [a.dst for a in g.arcs], [a.src for a in g.arcs], loops)
    return sorted(range(g.size), key=lambda v: (-level[v], v))


def symbolic_matrix(g: KernelGraph, kernel: Kernel, model: str,
                    order: list[int] | None = None) -> tuple[list[list[object]], int]:
    """The fragment's kernel matrix under ``model`` with its nodes in ``order`` (default: as created),
    operation times on the diagonal, parallel arcs combined with max; and its height k."""
    arcs = arc_symbols(g, model)
    loops = loop_symbols(g, model, kernel)
    pos = {v: i for i, v in enumerate(order if order is not None else range(g.size))}
    z = [[symbolic.EPS] * g.size for _ in range(g.size)]
    for i, a in enumerate(g.arcs):
        cur = z[pos[a.dst]][pos[a.src]]
        z[pos[a.dst]][pos[a.src]] = arcs[i] if cur == symbolic.EPS else sympy.Max(cur, arcs[i])
    for v, sym in loops.items():
        z[pos[v]][pos[v]] = sym
    return z, height(g, with_loops=bool(loops))


def explain(kernel: Kernel, model: str) -> str:
    lines = [f"kernel {kernel.name}: {len(kernel.fragments)} fragment(s), model {model}"]
    for f, g in enumerate(kernel.fragments):
        arcs = arc_symbols(g, model)
        loops = loop_symbols(g, model, kernel)
        order = display_order(g, bool(loops))
        pos = {v: i for i, v in enumerate(order)}
        lines.append(f"\nfragment {f + 1}: {g.size} nodes, {len(g.arcs)} arcs, height k = "
                     f"{height(g, with_loops=bool(loops))}")
        for v in order:
            role = "input" if v in g.inputs else "output" if v in g.outputs else ""
            lines.append(f"  node {pos[v] + 1:>3}  {g.names[v]}  {role}".rstrip())
        for i, a in enumerate(g.arcs):
            extra = ", ".join(f"{k}={a.info[k]}" for k in ("pattern", "stride", "order", "first") if k in a.info)
            lines.append(f"  arc {pos[a.src] + 1} -> {pos[a.dst] + 1}  {a.kind:<11} {symbolic.fmt(arcs[i])}"
                         + (f"   ({extra})" if extra else ""))
        for v, sym in loops.items():
            lines.append(f"  loop {pos[v] + 1}  {g.loops[v]['op']} ({g.loops[v].get('dtype', 'float')}): {sym}")
        if g.size <= MATRIX_NODES:
            z, k = symbolic_matrix(g, kernel, model, order)
            lines.append("  matrix Z (z_ij: arc from node j to node i; . = epsilon):")
            lines.extend("  " + row for row in symbolic.show_matrix(z).splitlines())
            exact = symbolic.time(z, [pos[v] for v in g.inputs], [pos[v] for v in g.outputs], k)
            lines.append(f"  <1_o, Z^{k} (.) 1_i> = {symbolic.fmt(exact)}")
    return "\n".join(lines)
