"""The paper's worked graphs: vadd (Z1, Z2, Z3 come from it under the naive, ops and serial models)
and the two fragments of Table 1 (a fork and a chain with named arc times t1, t2)."""

from __future__ import annotations

from gpuprofiler.models.maxplus.graph import Kernel, KernelGraph


def vadd() -> Kernel:
    """c[i] = a[i] + b[i]: nodes 1 = c[i], 2 = the sum, 3 = a[i], 4 = b[i] (the paper's numbering)."""
    g = KernelGraph()
    c = g.add_node("c[i]", "output")
    s = g.add_node("a[i]+b[i]")
    a = g.add_node("a[i]", "input")
    b = g.add_node("b[i]", "input")
    g.add_arc(a, s, "read", array="a", pattern="unit", stride=1, elem_bytes=4, order=0, first=True)
    g.add_arc(b, s, "read", array="b", pattern="unit", stride=1, elem_bytes=4, order=1, first=True)
    g.add_arc(s, c, "write", array="c", pattern="unit", stride=1, elem_bytes=4, order=0)
    g.add_loop(s, op="add", dtype="float")
    return Kernel("vadd (paper)", [g])


def fork() -> Kernel:
    """Table 1, first graph: node 3 feeds nodes 1 and 2 (times t1, t2); k = 1, time max{t1, t2}."""
    g = KernelGraph()
    n1, n2 = g.add_node("1", "output"), g.add_node("2", "output")
    n3 = g.add_node("3", "input")
    g.add_arc(n3, n1, "time", symbol="t1")
    g.add_arc(n3, n2, "time", symbol="t2")
    return Kernel("Table 1: fork", [g])


def chain() -> Kernel:
    """Table 1, second graph: 3 -> 2 -> 1 (times t2, t1); k = 2, time t1 + t2."""
    g = KernelGraph()
    n1 = g.add_node("1", "output")
    n2 = g.add_node("2")
    n3 = g.add_node("3", "input")
    g.add_arc(n3, n2, "time", symbol="t2")
    g.add_arc(n2, n1, "time", symbol="t1")
    return Kernel("Table 1: chain", [g])


EXAMPLES = {"vadd": vadd, "fork": fork, "chain": chain}
