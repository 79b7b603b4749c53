"""Fuzzing the safe evaluator: generated expressions (deep, huge, complex, nonsense) either give a number within
the limits or a UserError naming the field, quickly; never another exception, and never code execution."""

import math
import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.safe_eval import MAX_INT, evaluate, evaluate_array, evaluate_int

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NUMBERS = st.sampled_from(["0", "1", "2", "3", "-1", "0.5", "256", "257", "1e308", "1e400", "9" * 40, "2**63",
                           "1e-320", "0x10", "1_000", "n", "m", "nan", "inf", "True", "None", "'s'", "[1]", "()"])
UNARY = st.sampled_from(["-", "+", "~", "not "])
BINARY = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "@", "<<", "&", "<", "==", " and ", " if 1 else "])
FUNCTIONS = st.sampled_from(["min", "max", "ceil", "floor", "log2", "abs", "sqrt", "exp", "sum", "reshape",
                             "where", "matmul", "minimum", "__import__", "open", "eval", "getattr", "print"])


@st.composite
def expressions(draw, depth=4):
    """Expression text from a grammar wider than the evaluator's: numbers of every size, names known and not,
    operators allowed and not, calls, attributes, subscripts and nesting."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(NUMBERS)
    kind = draw(st.sampled_from(["unary", "binary", "binary", "call", "paren", "attr", "subscript", "power_tower",
                                 "long_sum"]))
    sub = expressions(depth=depth - 1)
    if kind == "unary":
        return draw(UNARY) + draw(sub)
    if kind == "binary":
        return f"{draw(sub)}{draw(BINARY)}{draw(sub)}"
    if kind == "call":
        args = draw(st.lists(sub, max_size=3))
        return f"{draw(FUNCTIONS)}({', '.join(args)})"
    if kind == "paren":
        return f"({draw(sub)})"
    if kind == "attr":
        return f"{draw(sub)}.__class__"
    if kind == "subscript":
        return f"{draw(sub)}[{draw(sub)}]"
    if kind == "power_tower":
        return "(" * draw(st.integers(1, 6)) + "n" + "**256)" * draw(st.integers(1, 6))
    return "+".join([draw(NUMBERS)] * draw(st.integers(1, 1200)))


def check_scalar(text):
    started = time.monotonic()
    cwd = set(os.listdir("."))
    try:
        value = evaluate(text, {"n": 1 << 20, "m": 3}, "params.k")
    except UserError as exc:
        assert str(exc).startswith("params.k: "), exc
    else:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (text, value)
        assert abs(value) <= MAX_INT if isinstance(value, int) else math.isfinite(value), (text, value)
    assert time.monotonic() - started < 5.0, text[:80]
    assert set(os.listdir(".")) == cwd


@FAST
@given(expressions())
def test_scalar_expressions(text):
    check_scalar(text)


@pytest.mark.slow
@LONG
@given(expressions(depth=6))
def test_scalar_expressions_long(text):
    check_scalar(text)


@FAST
@given(st.text(max_size=300))
def test_any_text(text):
    check_scalar(text)


ARRAYS = {"a": np.arange(12.0), "b": np.ones((3, 4)), "i": np.arange(4), "n": 12, "big": np.ones(4096)}


def check_array(text):
    try:
        value = evaluate_array(text, ARRAYS, "check[0].expect")
    except UserError as exc:
        assert str(exc).startswith("check[0].expect: "), exc
    else:
        assert np.asarray(value).dtype.kind in "biuf", (text, value)


@FAST
@given(expressions())
def test_array_expressions(text):
    check_array(text)


@FAST
@given(st.sampled_from(["a", "b", "i", "big", "n"]), st.sampled_from(["a", "b", "i", "big", "n", "2", "-1"]),
       st.sampled_from(["reshape({x}, {y}, -1)", "{x} @ {y}", "reshape({x}, 4096, 1) * {y}", "where({x}, {y}, {x})",
                        "sum({x}, {y})", "sort({x}, {y})", "{x}[{y}]", "{x}[{y}:]", "csr_matvec({x}, {y}, {x}, {y})",
                        "transpose({x}, {y})", "matmul(reshape({x}, -1, 1), reshape({y}, 1, -1))"]))
def test_array_functions_on_every_shape(x, y, template):
    check_array(template.format(x=x, y=y))


@FAST
@given(expressions(depth=3))
def test_size_expressions_as_whole_numbers(text):
    try:
        value = evaluate_int(text, {"n": 1 << 20, "m": 3}, "shape")
    except UserError as exc:
        assert str(exc).startswith("shape: ")
    else:
        assert isinstance(value, int) and abs(value) <= MAX_INT


def test_set_goes_through_the_same_evaluator():
    from gpuprofiler.cli.common import overrides

    assert overrides(["k=2**10", "m=k*2"]) == {"k": 1024, "m": 2048}
    for bad, message in [("k=9**9**9", "--set k: exponent"), ("k=(-1)**0.5", "--set k: the result"),
                         ("k=" + "1+" * 500 + "1", "--set k: expression nested"), ("k=__import__('os')", "--set k"),
                         ("k=" + "(" * 30 + "n**256)**256" * 30, "--set k"), ("x y=1", "expected NAME=VALUE")]:
        with pytest.raises(UserError) as info:
            overrides([bad])
        assert message in str(info.value)


CHECK_TEXT = st.one_of(expressions(depth=3), st.sampled_from([
    "c", "c[1:]", "c[0:n:2]", "a + b", "a + b[0:5]", "sum(a)", "reshape(a, 2, -1)", "a @ b", "where(a, b, c)",
    "transpose(reshape(c, 4, -1))", "0 * c", "a[i]", "c[i]", "minimum(a, b) + n", "sort(a, 0)", "csr_matvec(i, i, a, a)"]))


@FAST
@given(CHECK_TEXT, CHECK_TEXT)
def test_check_expressions_through_compare(got, expect):
    """A spec's [[check]] as the measurement runs it (chunked element-wise, or whole): a CheckError or another
    UserError naming the check, or a result; never another exception."""
    from gpuprofiler.workloads.checking import compare
    from gpuprofiler.workloads.safe_eval import parse
    from gpuprofiler.workloads.spec import CheckSpec

    try:  # what load_spec does first: only texts within the limits reach a measurement
        parse(got, "check[0].got")
        parse(expect, "check[0].expect")
    except UserError as exc:
        assert str(exc).startswith("check[0]"), exc
        return

    a, b = np.linspace(0, 1, 64), np.linspace(1, 2, 64)
    before = {"a": a, "b": b, "c": np.zeros(64), "i": np.arange(64) % 8}
    after = {**before, "c": a + b}
    try:
        compare([CheckSpec(got, expect, 1e-5, None, "check[0]")], before, after, {"n": 64})
    except UserError as exc:
        assert str(exc).startswith("check[0]"), exc


@pytest.mark.slow
@LONG
@given(CHECK_TEXT, CHECK_TEXT)
def test_check_expressions_through_compare_long(got, expect):
    test_check_expressions_through_compare.hypothesis.inner_test(got, expect)
