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
