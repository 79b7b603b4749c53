"""Max-plus algebra: exact identities as property tests (hypothesis), the sparse path against the dense one."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpuprofiler.models.maxplus import algebra as mp
from gpuprofiler.models.maxplus.graph import levels, longest

# integers (and epsilon) keep sums exact, so identities hold with ==
entries = st.one_of(st.integers(-50, 50).map(float), st.just(-np.inf))


def mats(r, c):
    return hnp.arrays(float, (r, c), elements=entries)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_associative_and_distributive(data):
    m, k, l, p = (data.draw(st.integers(1, 5)) for _ in range(4))
    a, b, c = data.draw(mats(m, k)), data.draw(mats(k, l)), data.draw(mats(l, p))
    assert np.array_equal(mp.matmul(mp.matmul(a, b), c), mp.matmul(a, mp.matmul(b, c)))
    b2 = data.draw(mats(k, l))
    assert np.array_equal(mp.matmul(a, mp.add(b, b2)), mp.add(mp.matmul(a, b), mp.matmul(a, b2)))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_identity_and_no_nan(data):
    n = data.draw(st.integers(1, 6))
    a = data.draw(mats(n, n))
    assert np.array_equal(mp.matmul(mp.identity(n), a), a)
    assert np.array_equal(mp.matmul(a, mp.identity(n)), a)
    assert not np.isnan(mp.power(a, data.draw(st.integers(0, 9)))).any()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_kronecker_mixed_product(data):
    m, n, p, q, r, s = (data.draw(st.integers(1, 3)) for _ in range(6))
    a, c = data.draw(mats(m, n)), data.draw(mats(n, r))
    b, d = data.draw(mats(p, q)), data.draw(mats(q, s))
    left = mp.matmul(mp.kron(a, b), mp.kron(c, d))
    assert np.array_equal(left, mp.kron(mp.matmul(a, c), mp.matmul(b, d)))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_block_power(data):
    n, size, m = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(st.integers(0, 6))
    k = data.draw(mats(size, size))
    assert np.array_equal(mp.power(mp.kron(mp.identity(n), k), m), mp.kron(mp.identity(n), mp.power(k, m)))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_power_by_squaring_matches_repeated_products(data):
    n, k = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 12))
    a = data.draw(mats(n, n))
    slow = a
    for _ in range(k - 1):
        slow = mp.matmul(slow, a)
    assert np.array_equal(mp.power(a, k), slow)


def test_chunked_product_equals_unchunked():
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 9, (37, 23)).astype(float)
    b = rng.integers(-9, 9, (23, 41)).astype(float)
    a[rng.random(a.shape) < 0.4] = -np.inf
    assert np.array_equal(mp.matmul(a, b, chunk=50), mp.matmul(a, b))


def test_rejects_plus_infinity_and_nan():
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        mp.matmul(np.array([[np.inf]]), np.array([[-np.inf]]))
    with pytest.raises(ValueError):
        mp.add(np.array([np.nan]), np.array([0.0]))


def test_inner_and_unit():
    assert mp.inner(mp.unit(3, [0]), np.array([5.0, 9.0, -np.inf])) == 5.0
    assert mp.inner(mp.unit(3, [2]), np.array([5.0, 9.0, -np.inf])) == -np.inf


def random_dag(data, max_n=9):
    n = data.draw(st.integers(2, max_n))
    arcs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 20)),
                              max_size=3 * n))
    arcs = [(s, d, w) for s, d, w in arcs if s < d]  # s < d: acyclic
    return n, arcs


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_sparse_levels_equal_dense_star(data):
    """Level-by-level propagation = <1_o, (I (+) Z)^k (.) 1_i> on the dense matrix."""
    n, arcs = random_dag(data)
    src = [s for s, _, _ in arcs]
    dst = [d for _, d, _ in arcs]
    w = [float(x) for _, _, x in arcs]
    inputs = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    outputs = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    _, k = levels(n, dst, src)
    z = mp.SparseMaxPlus.from_arcs(n, dst, src, w).to_dense()
    star = mp.power(mp.add(mp.identity(n), z), max(k, 0))
    dense = mp.inner(mp.unit(n, outputs), mp.matmul(star, mp.unit(n, inputs)))
    assert longest(n, dst, src, w, inputs, outputs) == dense


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_layered_graph_is_the_papers_power(data):
    """When every input-output path has k arcs, the sparse time is <1_o, Z^k (.) 1_i> exactly."""
    widths = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=5))
    starts = np.cumsum([0] + widths)
    n = int(starts[-1])
    src, dst, w = [], [], []
    for layer in range(len(widths) - 1):
        for j in range(starts[layer + 1], starts[layer + 2]):
            preds = data.draw(st.lists(st.integers(starts[layer], starts[layer + 1] - 1), min_size=1, max_size=3,
                                       unique=True))
            for i in preds:
                src.append(i)
                dst.append(j)
                w.append(float(data.draw(st.integers(0, 30))))
    inputs = list(range(starts[0], starts[1]))
    outputs = list(range(starts[-2], starts[-1]))
    _, k = levels(n, dst, src)
    z = mp.SparseMaxPlus.from_arcs(n, dst, src, w)
    assert k == len(widths) - 1
    paper = mp.inner(mp.unit(n, outputs), mp.matmul(mp.power(z.to_dense(), k), mp.unit(n, inputs)))
    assert longest(n, dst, src, w, inputs, outputs) == paper
    x = mp.unit(n, inputs)
    for _ in range(k):
        x = z.matvec(x)
    assert mp.inner(mp.unit(n, outputs), x) == paper


def test_cycle_has_no_height():
    with pytest.raises(ValueError, match="cycle"):
        levels(3, [1, 2, 1], [0, 1, 2])


def test_self_loops_need_the_counted_once_variant():
    with pytest.raises(ValueError, match="self-loops"):
        levels(2, [1], [0], loops=np.array([False, True]), loops_once=False)
    level, k = levels(2, [1], [0], loops=np.array([False, True]))
    assert k == 2 and list(level) == [0, 2]
