"""In-order issue (a GPU warp): exact times on small graphs and kernels, and never shorter than the dataflow path."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.maxplus.builder import build
from gpuprofiler.models.maxplus.graph import KernelGraph, graph_times, inorder_times

LAT, OP = 100.0, 4.0  # a load's latency and an operation's, in any unit


def weights_of(g):
    w = np.array([[LAT if a.kind == "read" else 1.0 if a.kind == "write" else 0.0 for a in g.arcs]])
    lv = np.zeros((1, g.size))
    lv[0, list(g.loops)] = OP
    return w, lv


def test_independent_loads_each_waited_for_before_the_next_is_issued():
    """acc += a[k] for k < 3, the load folded into each add: the dataflow path waits once for the loads, in order
    each add waits for its own load, issued only after the add before it."""
    g = KernelGraph()
    acc = g.add_node("acc", "input")
    prev = acc
    for k in range(3):
        src = g.add_node(f"a[{k}]", "input")
        node = g.add_node(f"add{k}")
        g.add_loop(node, op="add")
        g.add_arc(src, node, "read")
        g.add_arc(prev, node, "move")
        prev = node
    out = g.add_node("out'", "output")
    g.add_arc(prev, out, "write")
    w, lv = weights_of(g)
    assert graph_times(g, w, lv)[0] == pytest.approx(LAT + 3 * OP + 1.0)
    # add0 issues at 100 (its load at 0), ready at 104; load 1 issues at 100, add1 at 200, ...
    assert inorder_times(g, w, lv)[0] == pytest.approx(3 * LAT + OP + 1.0)


def test_a_store_does_not_hold_what_follows_it():
    g = KernelGraph()
    a = g.add_node("a[0]", "input")
    x = g.add_node("x@r")
    g.add_arc(a, x, "read")
    o1 = g.add_node("o1'", "output")
    g.add_arc(x, o1, "write")
    b = g.add_node("b[0]", "input")
    y = g.add_node("y@r")
    g.add_arc(b, y, "read")
    o2 = g.add_node("o2'", "output")
    g.add_arc(y, o2, "write")
    w, lv = weights_of(g)
    # load a at 0, store o1 at 100; load b issues at 100 (after the store's issue), its store at 200
    assert inorder_times(g, w, lv)[0] == pytest.approx(2 * LAT + 1.0)
    assert graph_times(g, w, lv)[0] == pytest.approx(LAT + 1.0)


def test_a_product_made_an_fma_waits_for_its_addend_made_after_it():
    """a * b + c * d: the first product's node becomes the FMA and takes the second product, a later node, as its
    addend; the FMA and the store after it wait for both (each node is taken after the nodes it reads)."""
    kernel = build("""
__kernel void k(__global const float* a, __global const float* b, __global const float* c,
                __global const float* d, __global float* y) {
    int i = get_global_id(0);
    y[i] = a[i] * b[i] + c[i] * d[i];
}""", "k", {}, [8], global_size=[64])
    g = next(f for f in kernel.fragments if f.outputs)
    w, lv = weights_of(g)
    # c, d at 0, their product at LAT; a, b at LAT (after it), the FMA at 2 LAT; the store after it
    assert inorder_times(g, w, lv)[0] == pytest.approx(2 * LAT + OP + 1.0)
    assert inorder_times(g, w, lv)[0] >= graph_times(g, w, lv)[0] - 1e-9


ROW = """
__kernel void rowsum(__global const float* A, __global float* y, const int n) {
    int i = get_global_id(0);
    float acc = 0.0f;
    for (int j = 0; j < n; j++) acc += A[i * n + j];
    y[i] = acc;
}
"""


@pytest.mark.parametrize("n", [4, 16, 64])
def test_a_row_walk_pays_one_latency_per_step_in_order(n):
    kernel = build(ROW, "rowsum", {"n": n}, [8], global_size=[64])
    g = next(f for f in kernel.fragments if f.outputs)
    w, lv = weights_of(g)
    assert inorder_times(g, w, lv)[0] == pytest.approx(n * LAT + OP + 1.0)
    assert graph_times(g, w, lv)[0] == pytest.approx(LAT + n * OP + 1.0)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_in_order_is_never_shorter_than_the_dataflow_path(data):
    """Random DAGs in creation order: issuing in order only adds constraints."""
    n = data.draw(st.integers(2, 24))
    g = KernelGraph()
    for v in range(n):
        g.add_node(f"n{v}", "input" if v == 0 else None)
    for v in range(1, n):
        srcs = data.draw(st.sets(st.integers(0, v - 1), min_size=1, max_size=3))
        for s in sorted(srcs):
            kind = data.draw(st.sampled_from(["read", "move", "time"]))
            g.add_arc(s, v, kind, **({"address": True} if kind == "move" and data.draw(st.booleans()) else {}))
        if data.draw(st.booleans()):
            g.add_loop(v, op="add")
    g.outputs.append(n - 1)
    w = np.array([[data.draw(st.floats(0, 50)) for _ in g.arcs]])
    lv = np.zeros((1, g.size))
    for v in g.loops:
        lv[0, v] = data.draw(st.floats(0, 10))
    assert inorder_times(g, w, lv)[0] >= graph_times(g, w, lv)[0] - 1e-9
