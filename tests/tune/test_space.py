"""Tuning spaces: parsing, restrictions as data, and the comparisons the safe evaluator now takes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.tune.space import config_key, parse_space
from gpuprofiler.workloads.safe_eval import evaluate


def test_space_in_order_and_restricted():
    space = parse_space("S=1,2,4,8,16,32;Nt=64,128,256,512", ["Nt % S == 0"])
    configs = space.configs()
    assert len(configs) == 24 and configs[0] == {"S": 1, "Nt": 64} and configs[1] == {"S": 1, "Nt": 128}
    allowed = [c for c in configs if space.verdict(c) is None]
    assert len(allowed) == 24  # every S divides every Nt here
    space = parse_space("S=3,4;Nt=64", ["Nt % S == 0", "S < 4 or Nt > 100"])
    assert space.verdict({"S": 3, "Nt": 64}) == "restricted: Nt % S == 0"
    assert space.verdict({"S": 4, "Nt": 64}) == "restricted: S < 4 or Nt > 100"
    assert config_key({"S": 4, "Nt": 64}) == "S=4;Nt=64"


def test_a_restriction_that_fails_is_reported_per_configuration():
    space = parse_space("S=0,2;Nt=64", ["Nt % S == 0", "K > 1"])
    assert "division by zero" in space.verdict({"S": 0, "Nt": 64})
    assert space.verdict({"S": 2, "Nt": 64}).startswith("invalid restriction: ") and "unknown name 'K'" in \
        space.verdict({"S": 2, "Nt": 64})


@pytest.mark.parametrize("text, restrict, message", [
    ("", [], "empty"),
    ("S", [], "not NAME=V1"),
    ("S=1,,2", [], "empty value"),
    ("S=1;S=2", [], "twice"),
    ("S=1,1", [], "the value 1 twice"),
    ("S=__import__('os')", [], "not allowed"),
    ("1S=2", [], "not NAME=V1"),
    ("S=1,2", ["Nt %"], "restrict"),
    ("S=1,2", [" "], "empty"),
    ("A=" + ",".join(map(str, range(400))) + ";B=" + ",".join(map(str, range(400))), [], "at most"),
])
def test_bad_spaces_are_refused(text, restrict, message):
    with pytest.raises(UserError, match=message):
        parse_space(text, restrict)


@given(a=st.integers(-50, 50), b=st.integers(-50, 50), c=st.integers(-50, 50))
def test_comparisons_and_logic_match_python(a, b, c):
    names = {"a": a, "b": b, "c": c}
    for text in ("a < b", "a <= b < c", "a == b", "a != b", "a > b and b >= c", "a > b or not c",
                 "not (a < b) or (b == c and a != c)", "a % 7 == b % 7"):
        assert evaluate(text, names) == int(bool(eval(text, {}, names)))  # noqa: S307 - the test's own oracle


def test_logic_short_circuits_like_python():
    assert evaluate("S == 0 or 8 % S == 0", {"S": 0}) == 1  # the right side would divide by zero
    assert evaluate("S != 0 and 8 % S == 0", {"S": 0}) == 0


def test_a_matrix_file_is_keyed_by_its_contents(tmp_path):
    from gpuprofiler.tune.tuner import matrix_key

    f = tmp_path / "a.mtx"
    f.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n")
    first = matrix_key(str(f))
    assert first == matrix_key(str(f)) and first.startswith(str(f) + "#")
    f.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 2.0\n")
    assert matrix_key(str(f)) != first
    assert matrix_key("poisson2d") == "poisson2d" and matrix_key(None) is None
