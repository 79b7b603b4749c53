"""Kernel graphs: the paper's examples exactly (Z1, Z2, Z3, Table 1), heights, series/parallel collapse."""

import numpy as np
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.maxplus import symbolic as s
from gpuprofiler.models.maxplus.examples import chain, fork, vadd
from gpuprofiler.models.maxplus.explain import symbolic_matrix
from gpuprofiler.models.maxplus.graph import collapse, height, longest

E = s.EPS


def matrix(kernel, model):
    g = kernel.fragments[0]
    return g, symbolic_matrix(g, kernel, model)[0]


def test_z1_height_two_time_T_plus_t():
    g, z = matrix(vadd(), "naive")
    assert z == [[E, s.T, E, E], [E, E, s.t, s.t], [E, E, E, E], [E, E, E, E]]
    assert height(g, with_loops=False) == 2
    assert s.time(z, g.inputs, g.outputs, 2) == s.T + s.t
    assert s.power(z, 2)[0][2] == s.power(z, 2)[0][3] == s.T + s.t


def test_z2_needs_the_third_power():
    g, z = matrix(vadd(), "ops")
    assert z[1][1] == s.tau
    assert height(g) == 3
    assert s.time(z, g.inputs, g.outputs, 2) == s.T + s.t  # the second power misses tau
    assert s.time(z, g.inputs, g.outputs, 3) == s.T + s.tau + s.t
    assert s.fmt(sympy.ceiling(s.N / s.n) * s.time(z, g.inputs, g.outputs, 3)) == "ceil(N/n)*(T + tau + t)"


def test_z3_serialized_memory():
    g, z = matrix(vadd(), "serial")
    n, t, dt, T, dT = s.n, s.t, s.dt, s.T, s.dT
    same = lambda a, b: sympy.expand(a - b) == 0
    assert same(z[0][1], T + (n - 1) * dT)
    assert same(z[1][2], t + (2 * n - 2) * dt) and same(z[1][3], t + (2 * n - 1) * dt)
    assert s.fmt(z[1][2]) == "t + (2n-2)*dt" and s.fmt(z[1][3]) == "t + (2n-1)*dt"
    total = s.time(z, g.inputs, g.outputs, 3)
    assert sympy.expand(total - (T + (n - 1) * dT + s.tau + t + (2 * n - 1) * dt)) == 0
    assert s.fmt(sympy.ceiling(s.N / n) * total) == "ceil(N/n)*(T + tau + t + (2n-1)*dt + (n-1)*dT)"


def test_table1_fork_and_chain():
    t1, t2 = sympy.symbols("t1 t2", positive=True)
    g, z = matrix(fork(), "naive")
    assert height(g) == 1 and s.time(z, g.inputs, g.outputs, 1) == sympy.Max(t1, t2)
    g, z = matrix(chain(), "naive")
    assert height(g) == 2 and s.time(z, g.inputs, g.outputs, 2) == t1 + t2
    arcs, _ = collapse(g.size, {(a.src, a.dst): sympy.Symbol(a.info["symbol"], positive=True) for a in g.arcs},
                       {}, set(g.inputs) | set(g.outputs), big=sympy.Max)
    assert arcs == {(2, 0): t1 + t2}


def test_matrix_prints_epsilon_as_dot():
    _, z = matrix(vadd(), "naive")
    lines = s.show_matrix(z).splitlines()
    assert lines[1].split()[1:] == [".", "T", ".", "."]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_collapse_keeps_the_time(data):
    n = data.draw(st.integers(3, 9))
    raw = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 30)),
                             min_size=1, max_size=3 * n))
    arcs = {}
    for a, b, w in raw:
        if a < b:
            arcs[(a, b)] = max(arcs.get((a, b), 0.0), float(w))
    loops = {v: float(data.draw(st.integers(1, 9))) for v in data.draw(st.lists(st.integers(1, n - 2), max_size=3))}
    inputs, outputs = [0], [n - 1]

    def time(arcs, loops):
        lw = np.full(n, -np.inf)
        for v, x in loops.items():
            lw[v] = x
        keys = list(arcs)
        return longest(n, [d for _, d in keys], [a for a, _ in keys], [arcs[k] for k in keys], inputs, outputs,
                       lw if loops else None)

    before = time(arcs, loops)
    reduced, rloops = collapse(n, arcs, loops, {0, n - 1})
    assert time(reduced, rloops) == before
    assert len(reduced) <= len(arcs)
