import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.safe_eval import csr_matvec, evaluate, evaluate_array, evaluate_int, names_in

ints = st.integers(min_value=-10**6, max_value=10**6)


@st.composite
def expressions(draw, depth=3):
    """A random arithmetic expression (text), its value computed by Python itself, and the largest magnitude of
    any intermediate result (the evaluator refuses integers past 2^63)."""
    if depth == 0 or draw(st.booleans()):
        v = draw(ints)
        return (f"({v})", v, abs(v))
    left, lv, lm = draw(expressions(depth=depth - 1))
    right, rv, rm = draw(expressions(depth=depth - 1))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "max", "min"]))
    if op in ("//", "%") and rv == 0:
        op = "+"
    if op in ("max", "min"):
        value = (max if op == "max" else min)(lv, rv)
        return (f"{op}({left}, {right})", value, max(lm, rm))
    value = {"+": lv + rv, "-": lv - rv, "*": lv * rv, "//": lv // rv if rv else 0, "%": lv % rv if rv else 0}[op]
    return (f"({left} {op} {right})", value, max(lm, rm, abs(value)))


@given(expressions())
def test_matches_python_arithmetic(case):
    text, value, largest = case
    if largest > 2**63:
        with pytest.raises(UserError, match=r"larger than 2\^63 in magnitude"):
            evaluate(text)
    else:
        assert evaluate(text) == value


@given(st.integers(1, 10**9), st.integers(1, 4096))
def test_size_expressions(n, local):
    assert evaluate_int("ceil(n / local) * local", {"n": n, "local": local}) == -(-n // local) * local
    assert evaluate("log2(n)", {"n": n}) == pytest.approx(math.log2(n))
    assert evaluate("n ** 2 - n % local", {"n": n, "local": local}) == n**2 - n % local


@pytest.mark.parametrize("text", [
    "__import__('os')", "__import__('os').system('true')", "open('x')", "n.__class__", "().__class__",
    "[1, 2]", "lambda: 1", "'a' * 3", "exec('1')", "eval('1')", "n if n else 1", "2 ** 10 ** 10", "globals()",
    "True", "n in (1, 2)", "n is 3", "{n: 1}", "[n for n in (1,)]",
])
def test_refuses_anything_but_arithmetic(text):
    with pytest.raises(UserError):
        evaluate(text, {"n": 4})


def test_errors_name_the_field():
    with pytest.raises(UserError, match=r"args\[1\]\.shape: unknown name 'm'"):
        evaluate("m * 2", {"n": 1}, where="args[1].shape")
    with pytest.raises(UserError, match="division by zero"):
        evaluate("n // 0", {"n": 1})
    with pytest.raises(UserError, match="not a whole number"):
        evaluate_int("n / 3", {"n": 4})


def test_array_expressions():
    a = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(evaluate_array("a[1:, :2] * 2", {"a": a}), a[1:, :2] * 2)
    assert np.array_equal(evaluate_array("a @ transpose(a)", {"a": a}), a @ a.T)
    assert np.array_equal(evaluate_array("sum(reshape(a, 2, 6), 1)", {"a": a}), a.reshape(2, 6).sum(1))
    with pytest.raises(UserError):
        evaluate_array("a.T", {"a": a})
    assert names_in("alpha * x + sum(y, 0)") == {"alpha", "x", "y"}


@given(st.lists(st.integers(0, 5), min_size=1, max_size=20), st.data(), st.sampled_from([1, 3, 1 << 18]))
def test_csr_matvec_matches_dense(row_lengths, data, block):
    import gpuprofiler.workloads.safe_eval as safe_eval

    safe_eval.CSR_ROWS, kept = block, safe_eval.CSR_ROWS  # rows summed a block at a time: any block gives the same
    try:
        check_csr_matvec(row_lengths, data)
    finally:
        safe_eval.CSR_ROWS = kept


def check_csr_matvec(row_lengths, data):
    n = len(row_lengths)
    rowptr = np.concatenate(([0], np.cumsum(row_lengths)))
    nnz = int(rowptr[-1])
    cols = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=nnz, max_size=nnz)), dtype=np.int64)
    vals = np.array(data.draw(st.lists(st.integers(-5, 5), min_size=nnz, max_size=nnz)), dtype=np.float64)
    x = np.arange(n, dtype=np.float64) - 3
    dense = np.zeros((n, n))
    for i in range(n):
        for k in range(rowptr[i], rowptr[i + 1]):
            dense[i, cols[k]] += vals[k]
    assert np.allclose(csr_matvec(rowptr, cols, vals, x), dense @ x)
    single = csr_matvec(rowptr, cols, vals.astype(np.float32), x.astype(np.float32))
    assert single.dtype == np.float64 and np.allclose(single, dense @ x)  # float32 values summed in float64


# -- what a reference needs: comparisons, bitwise operators, scans, counting, gathers -----------------------------

v = np.array([3.0, -1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
w = np.array([2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0])
m = np.arange(12.0).reshape(3, 4)
idx = np.array([7, 0, 3, 3])
keys = np.array([5, 1, 5, 0, 2, 5], dtype=np.int32)
ENV = {"v": v, "w": w, "m": m, "idx": idx, "keys": keys, "n": 8, "inf": np.array([np.inf])}


@pytest.mark.parametrize("text, expected", [
    ("v < w", v < w), ("v <= w", v <= w), ("v == 1", v == 1), ("v != w", v != w), ("v > 2", v > 2),
    ("v >= w", v >= w), ("0 <= v < 5", (0 <= v) & (v < 5)), ("v < w < 8", (v < w) & (w < 8)),
    ("(v > 0) & (w > 1)", (v > 0) & (w > 1)), ("(v > 4) | (w < 2)", (v > 4) | (w < 2)), ("~(v > 0)", ~(v > 0)),
    ("(v > 0) ^ (w > 2)", (v > 0) ^ (w > 2)),
    ("logical_and(v > 0, w > 1)", (v > 0) & (w > 1)), ("logical_or(v > 4, w < 2)", (v > 4) | (w < 2)),
    ("logical_xor(v > 0, w > 2)", (v > 0) ^ (w > 2)), ("logical_not(v > 0)", ~(v > 0)),
    ("keys & 3", keys & 3), ("keys | 8", keys | 8), ("keys ^ 1", keys ^ 1), ("keys << 2", keys << 2),
    ("keys >> 1", keys >> 1), ("arange(n) ^ 2", np.arange(8) ^ 2), ("~keys", ~keys), ("6 & 3", 2), ("1 << 10", 1024),
    ("cumsum(v)", np.cumsum(v)), ("cumsum(m)", np.cumsum(m)), ("cumsum(m, 0)", np.cumsum(m, 0)),
    ("cumsum(m, 1)", np.cumsum(m, 1)), ("cumsum(v) - v", np.cumsum(v) - v), ("cumprod(v)", np.cumprod(v)),
    ("cumprod(m + 1, 1)", np.cumprod(m + 1, 1)), ("cumsum(keys)", np.cumsum(keys)),
    ("sort(v)", np.sort(v)), ("sort(m, 0)", np.sort(m, 0)), ("sort(flip(m, 1))", m),
    ("where(v < w, v, w)", np.minimum(v, w)), ("where(m > 5, m, 0)", np.where(m > 5, m, 0)),
    ("maximum(v, w) - minimum(v, w)", np.abs(v - w)), ("abs(v - w)", np.abs(v - w)), ("exp(v - max(v))", np.exp(v - 9)),
    ("max(m, 1)", m.max(1)), ("min(m, 0)", m.min(0)),
    ("arange(5)", np.arange(5)), ("arange(2, 5)", np.arange(2, 5)), ("arange(n - 1, -1, -2)", np.arange(7, -1, -2)),
    ("arange(0)", np.arange(0)), ("bincount(keys)", np.bincount(keys)),
    ("bincount(keys, 8)", np.bincount(keys, minlength=8)),
    ("bincount(keys, 8, v[0:6])", np.bincount(keys, v[:6], minlength=8)),
    ("bincount(keys, 2)", np.bincount(keys)), ("bincount(keys > 1)", np.array([2, 4])),
    ("take(v, idx)", v[idx]), ("take(m, reshape(idx, 2, 2))", m.ravel()[idx.reshape(2, 2)]),
    ("take(m, arange(3) ^ 1, 1)", m[:, [1, 0, 3]]), ("v[idx]", v[idx]), ("v[v > 2]", v[v > 2]),
    ("m[arange(3), arange(3)]", np.array([0.0, 5.0, 10.0])), ("m[1:, idx & 3]", m[1:, idx & 3]),
    ("m[reshape(arange(3), 3, 1), reshape(arange(2), 1, 2)]", m[:, :2]), ("m[idx & 1, 2]", m[idx & 1, 2]),
    ("flip(v)", v[::-1]), ("flip(m, 0)", m[::-1]), ("int(v / 2)", np.trunc(v / 2).astype(np.int64)),
    ("int(-2.5)", -2), ("v[int(floor(w / 2))]", v[(w // 2).astype(int)]),
])
def test_reference_functions(text, expected):
    got = evaluate_array(text, ENV)
    assert np.shape(got) == np.shape(expected) and np.array_equal(got, expected), (got, expected)
    assert np.asarray(got).dtype.kind == np.asarray(expected).dtype.kind or np.asarray(expected).dtype.kind in "iu"


def test_scalar_comparisons_stay_numbers():
    assert evaluate_array("3 < 4", {}) == 1 and evaluate_array("n > 9", {"n": 8}) == 0
    assert evaluate_array("1 < 2 < 3", {}) == 1 and evaluate_array("v[0] > 2 and n == 8", ENV) == 1
    assert evaluate("n > 2 and n < 9", {"n": 8}) == 1


@pytest.mark.parametrize("text, message", [
    ("(v > 0) and (w > 0)", "and/or/not need single numbers, not arrays (on arrays: & | ~"),
    ("not (v > 0)", "and/or/not need single numbers"),
    ("v & 1", "'v & 1': "),                     # bitwise operators take integers and booleans, not floats
    ("~v", "'~v': "),
    ("1 << 64", "shift counts must lie in 0 .. 63"),
    ("1 << 10 ** 9", "shift counts must lie in 0 .. 63"),
    ("keys >> (0 - 1)", "shift counts must lie in 0 .. 63"),
    ("cumsum(v, 1)", "cumsum(): axis 1 is out of bounds"),
    ("cumsum(v, 0.5)", "cumsum(): the axis must be a whole number"),
    ("cumsum(v, 0, 1)", "cumsum() takes 1 to 2 argument(s), got 3"),
    ("sort(v, 0, 1)", "sort() takes 1 to 2 argument(s), got 3"),
    ("arange(0, 5, 0)", "arange(): arange() step must not be zero"),
    ("arange(v)", "arange(): arange() takes single numbers"),
    ("bincount(v)", "bincount(): the values counted must be integers"),
    ("bincount(keys - 3)", "bincount(): "),
    ("bincount(m > 1)", "bincount(): "),
    ("bincount(keys, 0, v)", "bincount(): "),    # weights of another length
    ("take(v, w)", "take(): "),
    ("take(v, idx + 10)", "take(): "),
    ("take(m, idx, 2)", "take(): "),
    ("int(v * inf)", "int(): only finite values"),
    ("v[w > 1, 0]", "bad subscript"),
    ("m[idx]", "bad subscript"),
    ("v < reshape(w, 2, 4)", "do not broadcast"),
    ("logical_and(v > 0)", "logical_and() takes 2 argument(s), got 1"),
])
def test_reference_function_refusals(text, message):
    with pytest.raises(UserError, match=r"^check\[1\]\.expect: ") as info:
        evaluate_array(text, ENV, "check[1].expect")
    assert message in str(info.value)


@pytest.mark.parametrize("text", ["n & 1", "n << 2", "~n", "n ^ 3"])
def test_bitwise_operators_are_for_check_expressions_only(text):
    with pytest.raises(UserError, match="is not allowed"):
        evaluate(text, {"n": 8})


def test_results_larger_than_the_limit_are_refused_before_they_are_built(monkeypatch):
    """Each of these would allocate from 80 GB to 8 PB: the refusal must come from the element count, before numpy
    is asked (the functions are replaced by ones that fail if called)."""
    from gpuprofiler.workloads import safe_eval

    for name in ("arange", "bincount", "take"):
        monkeypatch.setitem(safe_eval.ARRAY_FUNCTIONS, name, lambda *a: pytest.fail("allocated before the check"))
    big = np.arange(100_000)
    env = {"big": big, "col": big.reshape(-1, 1), "row": big.reshape(1, -1), "wide": np.zeros((100_000, 10)),
           "huge": np.array([10**15, 0])}
    limit = safe_eval.MAX_ARRAY_ELEMENTS
    for text, message in [
        ("arange(10 ** 15)", "arange() would have 1000000000000000 elements"),
        ("arange(0, 1, 1e-12)", "arange() would have 1000000000000 elements"),
        ("bincount(huge)", "bincount() would have 1000000000000001 elements"),
        ("bincount(big, 10 ** 12)", "bincount() would have 1000000000000 elements"),
        ("take(wide, big % 10, 1)", "take() would have 10000000000 elements (shape (100000, 100000))"),
        ("big[col + row]", "would have 10000000000 elements (shape (100000, 100000))"),
        ("wide[col, row % 10]", "would have 10000000000 elements"),
        ("wide[big][big]", None),  # 1M elements: within the limit, built
        ("col < row", "would have 10000000000 elements"),
        ("0 < col < row", "would have 10000000000 elements"),
        ("(col > 0) & (row > 0)", "would have 10000000000 elements"),
        ("logical_or(col > 0, row > 0)", "logical_or() would have 10000000000 elements"),
        ("col << row % 8", "would have 10000000000 elements"),
    ]:
        if message is None:
            assert evaluate_array(text, env).shape == (100_000, 10)
            continue
        with pytest.raises(UserError, match=r"^check\[0\]\.expect: ") as info:
            evaluate_array(text, env, "check[0].expect")
        assert message in str(info.value) and f"more than the limit of {limit}" in str(info.value), text


def test_new_functions_keep_the_time_limit(monkeypatch):
    from gpuprofiler.workloads import safe_eval

    monkeypatch.setattr(safe_eval, "MAX_ARRAY_SECONDS", 0.0)
    with pytest.raises(UserError, match=r"check\[0\]\.expect: evaluation took longer than the limit of 0 s"):
        evaluate_array("cumsum(v < w)", ENV, "check[0].expect")


# -- the same as numpy, on random arrays ---------------------------------------------------------------------------

shapes = st.sampled_from([(1,), (7,), (30,), (1, 5), (4, 6), (3, 1, 4)])


@st.composite
def arrays(draw, shape=None, kind=None):
    shape = draw(shapes) if shape is None else shape
    kind = draw(st.sampled_from("if")) if kind is None else kind
    count = int(np.prod(shape))
    if kind == "i":
        values = draw(st.lists(st.integers(-50, 50), min_size=count, max_size=count))
        return np.array(values, dtype=np.int64).reshape(shape)
    values = draw(st.lists(st.floats(-4, 4, width=32), min_size=count, max_size=count))
    return np.array(values, dtype=np.float64).reshape(shape)


@given(st.data())
def test_scans_and_sort_match_numpy(data):
    a = data.draw(arrays())
    axis = data.draw(st.sampled_from([None] + list(range(-a.ndim, a.ndim))))
    text = "" if axis is None else f", {axis}"
    env = {"a": a}
    for name, fn in (("cumsum", np.cumsum), ("cumprod", np.cumprod)):
        assert np.array_equal(evaluate_array(f"{name}(a{text})", env), fn(a, axis=axis), equal_nan=True)
    assert np.array_equal(evaluate_array(f"flip(a{text})", env), np.flip(a, axis=axis))
    if axis is not None:
        assert np.array_equal(evaluate_array(f"sort(a{text})", env), np.sort(a, axis=axis))
        assert np.array_equal(evaluate_array(f"max(a{text})", env), np.max(a, axis=axis))
    assert np.array_equal(evaluate_array("sort(a)", env), np.sort(a))


@given(st.data())
def test_comparisons_and_where_match_numpy(data):
    shape = data.draw(shapes)
    a, b = data.draw(arrays(shape)), data.draw(arrays(shape))
    c = data.draw(arrays(shape[-1:]))  # broadcasts against a and b
    env = {"a": a, "b": b, "c": c, "s": 1.5}
    for op in ("<", "<=", "==", "!=", ">", ">="):
        assert np.array_equal(evaluate_array(f"a {op} b", env), eval(f"a {op} b"))
        assert np.array_equal(evaluate_array(f"a {op} s", env), eval(f"a {op} 1.5"))
    assert np.array_equal(evaluate_array("a < b <= c", env), (a < b) & (b <= c))
    assert np.array_equal(evaluate_array("(a < b) | (a == c)", env), (a < b) | (a == c))
    assert np.array_equal(evaluate_array("where(a < b, a, b)", env), np.where(a < b, a, b))
    assert np.array_equal(evaluate_array("where((a > 0) & (b > 0), a * b, c)", env),
                          np.where((a > 0) & (b > 0), a * b, c))
    assert np.array_equal(evaluate_array("where(a >= s, 1, 0)", env), np.where(a >= 1.5, 1, 0))


@given(st.data())
def test_integer_references_match_numpy(data):
    a = data.draw(arrays(kind="i"))
    shift = data.draw(st.integers(0, 8))
    env = {"a": a, "k": shift, "n": a.size}
    assert np.array_equal(evaluate_array("(a & 7) ^ (a >> k) | (a << 1)", env), (a & 7) ^ (a >> shift) | (a << 1))
    assert np.array_equal(evaluate_array("bincount(reshape(a & 15, n), 16)", env),
                          np.bincount((a & 15).ravel(), minlength=16))
    assert np.allclose(evaluate_array("bincount(reshape(a & 7, n), 8, reshape(a, n) * 0.5)", env),
                       np.bincount((a & 7).ravel(), a.ravel() * 0.5, minlength=8))
    flat = a.ravel()
    gather = (np.arange(a.size) * 7 + 3) % a.size
    assert np.array_equal(evaluate_array("take(a, (arange(n) * 7 + 3) % n)", env), flat[gather])
    assert np.array_equal(evaluate_array("reshape(a, n)[flip(arange(n))]", env), flat[::-1])


slices = st.builds(slice, st.sampled_from([None, 0, 1, -1]), st.sampled_from([None, 2, -1, 5]),
                   st.sampled_from([None, 1, 2, -1]))
index_items = st.one_of(st.integers(-2, 2), slices,
                        st.lists(st.integers(-2, 2), min_size=0, max_size=4).map(np.array),
                        st.sampled_from([np.array([[0, 1], [1, 0]]), np.array([[1], [0]])]))


@given(st.lists(index_items, min_size=1, max_size=3), st.booleans())
def test_index_shapes_are_numpys(items, mask):
    """The element count checked before a subscript is that of the array numpy then builds."""
    from gpuprofiler.workloads.safe_eval import _index_shape

    a = np.zeros((3, 4, 5))
    items = [i.astype(np.int64) if isinstance(i, np.ndarray) else i for i in items]
    if mask:
        items[0] = np.arange(12).reshape(3, 4) % 3 == 0
    index = tuple(items) if len(items) > 1 else items[0]
    try:
        shape = a[index].shape
    except (IndexError, ValueError):
        return
    assert _index_shape(a.shape, index) in (shape, None)
    assert _index_shape(a.shape, index) is not None or mask
