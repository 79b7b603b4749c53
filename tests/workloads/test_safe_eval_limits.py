"""The safe evaluator is bounded: every limit (length, depth, node count, integer magnitude, finite floats, real
results, array sizes, time) fails fast with a UserError naming the field and the limit."""

import time

import numpy as np
import pytest

from gpuprofiler.errors import UserError
from gpuprofiler.workloads import safe_eval
from gpuprofiler.workloads.safe_eval import (
    MAX_ARRAY_ELEMENTS,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_NODES,
    evaluate,
    evaluate_array,
    evaluate_int,
    names_in,
    parse,
)


def refused(text, names=None, where="params.x"):
    """The message evaluating ``text`` gives (it must be a UserError naming ``where``), and it must come fast."""
    started = time.monotonic()
    with pytest.raises(UserError) as info:
        evaluate(text, names if names is not None else {"n": 1 << 20}, where)
    assert time.monotonic() - started < 1.0, text[:40]
    message = str(info.value)
    assert message.startswith(f"{where}: "), message
    return message


@pytest.mark.parametrize("text, message", [
    ("1" * (MAX_LENGTH + 1), f"expression longer than {MAX_LENGTH} characters"),
    ("1+" * 200 + "1", f"expression nested more than {MAX_DEPTH} levels deep"),
    ("-" * 500 + "1", f"expression nested more than {MAX_DEPTH} levels deep"),
    ("(" * 300 + "1" + ")" * 300, "too many nested parentheses"),
    ("max(" + ",".join(["n"] * 600) + ")", f"expression has more than {MAX_NODES} parts"),
    ("a\x00", "cannot contain null bytes"),
])
def test_size_limits_are_checked_before_evaluating(text, message):
    assert message in refused(text)


def test_the_tree_limits_apply_at_parse_time_so_check_expressions_are_refused_on_load():
    with pytest.raises(UserError, match=r"check\[0\]\.expect: expression nested more than 64 levels deep"):
        parse("x" + "+x" * 100, "check[0].expect")
    with pytest.raises(UserError, match="nested more than 64 levels"):
        names_in("-" * 100 + "x")
    assert names_in("x" + "+x" * 30) == {"x"}      # 31 terms: within the limit


@pytest.mark.parametrize("text, message", [
    ("9**9**9", "exponent 387420489 is too large (the limit is 256)"),
    ("(((n**256)**256)**256)**256", "1048576 ** 256 would be about 2^5120: larger than 2^63 in magnitude"),
    ("2**64", "2 ** 64 would be about 2^64: larger than 2^63 in magnitude"),
    ("n*n*n*n", "the result of 'n * n * n * n' is larger than 2^63 in magnitude (integers are limited to +-2^63)"),
    ("9" * 30, "is larger than 2^63 in magnitude"),
    ("ceil(1e300)", "the result of 'ceil(1e+300)' is larger than 2^63 in magnitude"),
    ("floor(2.0**70)", "is larger than 2^63 in magnitude"),
    ("1e308*10", "the result of '1e+308 * 10' is not a finite number (inf)"),
    ("1e400", "is not a finite number"),
    ("(-1)**0.5", "the result of '(-1) ** 0.5' is a complex number"),
    ("exp(1000)", "exp(): math range error"),
    ("sqrt(-1)", "sqrt(): math domain error"),
    ("0**-1", "division by zero"),
    ("min()", "min(): min expected at least 1 argument"),
])
def test_magnitude_limits(text, message):
    assert message in refused(text)


def test_limits_allow_what_specs_need():
    assert evaluate("2**63") == 2**63 and evaluate("-(2**63)") == -(2**63)
    assert evaluate("n**3", {"n": 2**20}) == 2**60
    assert evaluate("2**0.5") == pytest.approx(1.4142135623730951)
    assert evaluate("1.5**200") == 1.5**200
    assert evaluate_int("ceil(n / 256) * 256", {"n": 10**12}) == 10**12


def test_a_name_past_the_limits_is_refused():
    assert "the value of n is larger than 2^63" in refused("n + 1", {"n": 10**30})
    assert "the value of n is not a finite number (inf)" in refused("n", {"n": float("inf")})
    assert evaluate_int("n * 1.0", {"n": 2**62}) == 2**62
    with pytest.raises(UserError, match=r"gives 1\.84e\+19: larger than 2\^63"):
        evaluate_int("n * 4.0", {"n": 2**62})


def test_evaluate_int_of_a_huge_float():
    with pytest.raises(UserError, match=r"shape: .* larger than 2\^63"):
        evaluate_int("2.0**100", {}, "shape")


def test_the_time_limit(monkeypatch):
    monkeypatch.setattr(safe_eval, "MAX_SECONDS", 0.0)
    with pytest.raises(UserError, match=r"params\.x: evaluation took longer than the limit of 0 s"):
        evaluate("1 + 2", {}, "params.x")


def test_numbers_given_as_toml_values():
    with pytest.raises(UserError, match="value: inf is not a finite number"):
        evaluate(float("inf"), {}, "value")
    with pytest.raises(UserError, match="value: the number is larger than 2"):
        evaluate(10**30, {}, "value")
    assert evaluate(2**62, {}, "value") == 2**62


a = np.arange(10.0)
big = np.ones(100_000)


@pytest.mark.parametrize("text, message", [
    ("reshape(big, 100000, 1) @ reshape(big, 1, 100000)",
     f"would have 10000000000 elements (shape (100000, 100000)): more than the limit of {MAX_ARRAY_ELEMENTS}"),
    ("matmul(reshape(big, 100000, 1), reshape(big, 1, 100000))", "matmul() would have 10000000000 elements"),
    ("reshape(big, 100000, 1) * reshape(big, 1, 100000)", "would have 10000000000 elements"),
    ("minimum(reshape(big, 100000, 1), reshape(big, 1, 100000))", "minimum() would have 10000000000 elements"),
    ("where(big, reshape(big, 100000, 1), reshape(big, 1, 100000))", "where() would have 10000000000 elements"),
    ("a + big", "shapes (10,) and (100000,) do not broadcast"),
    ("(-1)**0.5", "is a complex number"),
    ("a ** 1000", "exponent 1000 is too large"),
    ("a[100]", "bad subscript: index 100 is out of bounds"),
    ("a[1.5]", "index 1.5 is not an integer"),
    ("a[a]", "an index array must hold integers or booleans, not float64"),
    ("a[0:10**30]", "larger than 2^63 in magnitude"),
    ("where(a)", "where() takes 3 argument(s), got 1"),
    ("maximum(a, a, a)", "maximum() takes 2 argument(s), got 3"),
    ("csr_matvec(a, a + 100, a, a)", "csr_matvec(): index"),
    ("sum(a, 5)", "sum(): axis 5 is out of bounds"),
])
def test_array_limits(text, message):
    with pytest.raises(UserError, match=r"^check\[0\]\.expect: ") as info:
        evaluate_array(text, {"a": a, "big": big}, "check[0].expect")
    assert message in str(info.value)


def test_arrays_as_large_as_the_specs_own_are_allowed(monkeypatch):
    monkeypatch.setattr(safe_eval, "MAX_ARRAY_ELEMENTS", 100)
    x = np.ones(1000)
    assert evaluate_array("x * 2 + x", {"x": x}).shape == (1000,)          # the spec's own size: allowed
    with pytest.raises(UserError, match="would have 1000000 elements"):
        evaluate_array("reshape(x, 1000, 1) * reshape(x, 1, 1000)", {"x": x})
