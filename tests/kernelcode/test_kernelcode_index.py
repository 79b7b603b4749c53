"""Index arithmetic (:mod:`gpuprofiler.kernelcode.index`) against the same arithmetic evaluated directly on
numpy arrays of thread ids, with C's integer semantics (division toward zero, ``%`` with the dividend's sign)."""

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiler.kernelcode import index as ix
from gpuprofiler.kernelcode.index import THREAD_NAMES, Affine

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SYMPY_SETTINGS = settings(SETTINGS, max_examples=50)  # each example builds and lambdifies sympy expressions
N = 48  # work-items per drawn sample


def c_div(a, b):
    """C's integer division on numpy integers: the quotient truncated toward zero."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))


def c_mod(a, b):
    """C's ``%``: the remainder with the dividend's sign (a == (a / b) * b + a % b)."""
    return np.fmod(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))


def direct(v, s):
    """An int or Affine evaluated from its fields, without :meth:`Affine.values`."""
    if isinstance(v, int):
        return np.full(N, v, dtype=np.int64)
    total = np.full(N, v.const, dtype=np.int64)
    for c, name in zip(v.coef, THREAD_NAMES):
        total = total + np.int64(c) * s[name]
    return total


samples = st.integers(0, 2**32 - 1).map(lambda seed: {
    name: np.random.default_rng(seed + k).integers(0, hi, N).astype(np.int64)
    for k, (name, hi) in enumerate(zip(THREAD_NAMES, (256, 16, 4, 4096, 64, 8)))})


def affines(lo=-9, hi=9, const_lo=-100, const_hi=100):
    coef = st.tuples(*[st.integers(lo, hi)] * 6).filter(any)
    return st.builds(Affine, coef, st.integers(const_lo, const_hi))


ints = st.integers(-100, 100)
operands = st.one_of(ints, affines())


# ---- affine arithmetic, any signs -------------------------------------------------------------------

@SETTINGS
@given(operands, operands, samples)
def test_add_and_sub_agree_with_direct_evaluation(a, b, s):
    for op, fn in ((ix.add, np.add), (ix.sub, np.subtract)):
        r = op(a, b)
        assert isinstance(r, (int, Affine))  # affine arithmetic never falls back to sympy
        assert np.array_equal(ix.values(r, s), fn(direct(a, s), direct(b, s)))
    assert np.array_equal(ix.values(ix.neg(a), s), -direct(a, s))


@SETTINGS
@given(operands, st.integers(-12, 12), samples)
def test_mul_by_an_int_agrees_with_direct_evaluation(a, k, s):
    for r in (ix.mul(a, k), ix.mul(k, a)):
        assert isinstance(r, (int, Affine))
        assert np.array_equal(ix.values(r, s), direct(a, s) * k)
    if k == 0:
        assert ix.mul(a, k) == 0  # all coefficients gone: a plain int again


@SETTINGS
@given(operands, samples)
def test_cancelling_thread_terms_gives_an_int(a, s):
    r = ix.sub(ix.add(a, 7), a)
    assert r == 7 and isinstance(r, int)


@SETTINGS
@given(st.integers(-10**6, 10**6), st.integers(-1000, 1000).filter(bool))
def test_int_div_and_mod_follow_c(a, b):
    q, m = ix.div(a, b), ix.mod(a, b)
    assert isinstance(q, int) and isinstance(m, int)
    assert q == int(c_div(a, b)) and m == int(c_mod(a, b))
    assert q * b + m == a


@pytest.mark.parametrize("op", [ix.div, ix.mod])
def test_int_division_by_zero_raises(op):
    with pytest.raises(ZeroDivisionError):
        op(5, 0)


@SETTINGS
@given(affines(-6, 6, -30, 30), st.integers(-8, 8).filter(bool), samples)
def test_exact_division_stays_affine_for_any_signs(a, b, s):
    exact = Affine(tuple(c * b for c in a.coef), a.const * b)
    q = ix.div(exact, b)
    assert isinstance(q, Affine) and q.key == a.key
    assert np.array_equal(ix.values(q, s), c_div(direct(exact, s), b))


# ---- the sympy fallback: non-negative indices over positive divisors (what kernels compute) -----------

def _leaf(v):
    return v, (lambda s, v=v: direct(v, s))


nonneg_leaves = st.one_of(st.integers(0, 60), affines(0, 7, 0, 60)).map(_leaf)


def _nonneg_nodes(children):
    pos = st.integers(1, 9)
    return st.one_of(
        st.tuples(children, children).map(lambda p: (ix.add(p[0][0], p[1][0]),
                                                     lambda s, p=p: p[0][1](s) + p[1][1](s))),
        st.tuples(children, pos).map(lambda p: (ix.mul(p[0][0], p[1]), lambda s, p=p: p[0][1](s) * p[1])),
        st.tuples(children, pos).map(lambda p: (ix.div(p[0][0], p[1]), lambda s, p=p: c_div(p[0][1](s), p[1]))),
        st.tuples(children, pos).map(lambda p: (ix.mod(p[0][0], p[1]), lambda s, p=p: c_mod(p[0][1](s), p[1]))))


nonneg_exprs = st.recursive(nonneg_leaves, _nonneg_nodes, max_leaves=5)


@settings(SETTINGS, max_examples=200)
@given(nonneg_exprs, samples)
def test_nested_div_and_mod_of_non_negative_indices_follow_c(expr, s):
    value, expected = expr
    got = ix.values(value, s)
    assert got is not None and got.dtype == np.int64
    assert np.array_equal(got, expected(s))


@SYMPY_SETTINGS
@given(affines(0, 7, 0, 60), st.integers(2, 9), samples)
def test_affine_mod_int_falls_back_to_sympy_and_evaluates(a, b, s):
    r = ix.mod(a, b)
    if all(c % b == 0 for c in a.coef):  # sympy reduces it to the constant's remainder
        assert r == a.const % b
    else:
        assert isinstance(r, sympy.Basic)
    assert np.array_equal(ix.values(r, s), c_mod(direct(a, s), b))


@SYMPY_SETTINGS
@given(affines(-5, 5, -20, 20), affines(-5, 5, -20, 20), samples)
def test_affine_times_affine_falls_back_to_sympy_and_evaluates(a, b, s):
    r = ix.mul(a, b)
    assert isinstance(r, sympy.Basic)
    assert np.array_equal(ix.values(r, s), direct(a, s) * direct(b, s))
    # and the product keeps combining with affine forms
    assert np.array_equal(ix.values(ix.add(ix.mul(r, 3), a), s), 3 * direct(a, s) * direct(b, s) + direct(a, s))


def test_values_of_a_non_thread_symbol_is_unknown():
    s = {name: np.arange(4, dtype=np.int64) for name in THREAD_NAMES}
    assert ix.values(ix.add(Affine.thread(0), sympy.Symbol("data")), s) is None
    assert ix.values(object(), s) is None


# Division with a negative dividend or divisor through the sympy fallback: index.py promises C semantics
# (toward zero; remainder with the dividend's sign) but the fallback builds sympy.floor / sympy.Mod, which
# are Python's floor semantics. The exact-division path and int / int are right.
NEGATIVE_CASES = [
    ("div", Affine.thread(0), -2),       # lx / -2: floor(-lx/2), -1 at lx = 1 where C gives 0
    ("div", Affine((1, 0, 0, 0, 0, 0), -5), 2),  # (lx - 5) / 2 at lx = 0: floor gives -3, C -2
    ("mod", Affine((1, 0, 0, 0, 0, 0), -5), 3),  # (lx - 5) % 3 at lx = 0: Mod gives 1, C -2
    ("mod", Affine.thread(0), -3),       # lx % -3 at lx = 1: Mod gives -2, C 1
]


@pytest.mark.parametrize("op,a,b", NEGATIVE_CASES)
def test_fallback_division_of_negative_values_follows_c(op, a, b):
    s = {name: np.arange(6, dtype=np.int64) if name == "lx" else np.zeros(6, np.int64) for name in THREAD_NAMES}
    lx = s["lx"] * a.coef[0] + a.const
    expected = c_div(lx, b) if op == "div" else c_mod(lx, b)
    assert np.array_equal(ix.values(getattr(ix, op)(a, b), s), expected)


# ---- identity: key, thread_free_difference, coefficients ------------------------------------------

small = st.one_of(st.integers(-1, 1), affines(-1, 1, -1, 1))  # small ranges: equal pairs are frequent

# the origin and each unit vector: two affine indices agree everywhere on these iff they are equal
BASIS = {name: np.array([0] + [int(j == k) for j in range(6)], dtype=np.int64) for k, name in enumerate(THREAD_NAMES)}


def _basis_values(v):
    return np.array([direct(v, {n: BASIS[n][i:i + 1].repeat(N) for n in THREAD_NAMES})[0] for i in range(7)])


@SETTINGS
@given(small, small)
def test_key_is_equal_iff_coefficients_and_constant_are(a, b):
    ca, cb = ix.coefficients(a), ix.coefficients(b)
    assert (ix.key(a) == ix.key(b)) == (ca == cb)
    assert (ix.key(a) == ix.key(b)) == bool(np.array_equal(_basis_values(a), _basis_values(b)))
    hash(ix.key(a))


@SETTINGS
@given(small, small)
def test_thread_free_difference_iff_coefficients_are_equal(a, b):
    same = ix.coefficients(a)[0] == ix.coefficients(b)[0]
    assert ix.thread_free_difference(a, b) == same
    diff = _basis_values(ix.sub(a, b))
    assert same == bool(np.all(diff == diff[0]))  # the difference is one number for every work-item


@SYMPY_SETTINGS
@given(affines(), samples)
def test_sympy_form_round_trips(a, s):
    e = ix.as_sympy(a)
    assert ix.coefficients(e) == (list(a.coef), a.const)
    assert np.array_equal(ix.values(e, s), direct(a, s))
    assert np.array_equal(a.values(s), direct(a, s))
    assert ix.thread_free_difference(a, e) and ix.thread_free_difference(e, ix.add(a, 5))


def test_identity_of_sympy_indices():
    a = Affine((1, 0, 0, 64, 0, 0), 3)
    m3, m4 = ix.mod(a, 3), ix.mod(a, 4)
    assert ix.key(m3) == ix.key(ix.mod(Affine((1, 0, 0, 64, 0, 0), 3), 3)) and ix.key(m3) != ix.key(m4)
    assert ix.thread_free_difference(ix.add(m3, 5), m3)
    assert not ix.thread_free_difference(m3, m4)
    assert not ix.thread_free_difference(a, ix.mul(a, a))
    assert ix.thread_free_difference(ix.mul(a, a), ix.add(ix.mul(a, a), 7))
    # a thread id inside floor or Mod has no integer coefficient; the others keep theirs
    assert ix.coefficients(ix.div(a, 2)) == ([None, 0, 0, 32, 0, 0], 1)
    assert ix.coefficients(m3) == ([None, 0, 0, None, 0, 0], 0)


def test_pretty():
    assert ix.pretty(Affine((1, 0, 0, 256, 0, 0), 0)) == "lx+256*bx"
    assert ix.pretty(Affine((0, 2, 0, 0, 0, 0), -3)) == "2*ly-3"
    assert ix.pretty(7) == "7"
    assert ix.pretty(ix.mod(Affine.thread(0), 3)) == "lx-3*floor(lx/3)"


def test_floordiv_rounds_down_as_a_right_shift_does():
    s = {name: np.arange(6, dtype=np.int64) if name == "lx" else np.zeros(6, np.int64) for name in THREAD_NAMES}
    a = Affine((1, 0, 0, 0, 0, 0), -5)  # lx - 5: -5 .. 0
    assert np.array_equal(ix.values(ix.floordiv(a, 2), s), (np.arange(6) - 5) >> 1)
    assert ix.floordiv(-7, 2) == -4 and ix.div(-7, 2) == -3
