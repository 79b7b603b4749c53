"""Checks: the chunked element-by-element path agrees with the whole-array path, on pass and on failure."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import CheckError
from gpuprofiler.workloads import checking
from gpuprofiler.workloads.spec import CheckSpec


def run(expect, before, after, chunk, monkeypatch, got="c"):
    monkeypatch.setattr(checking, "CHUNK", chunk)
    return checking.compare([CheckSpec(got=got, expect=expect, rtol=1e-5, where="check[0]")], before, after, {})


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 700), st.lists(st.integers(0, 2999), max_size=4))
def test_chunked_equals_whole(size, chunk, wrong):
    rng = np.random.default_rng(size)
    a = rng.random(size, dtype=np.float32)
    b = rng.random(size, dtype=np.float32)
    c = (2.5 * a + np.sqrt(b)).astype(np.float32)
    for i in wrong:
        if i < size:
            c[i] = np.nan if i % 2 else c[i] + 1.0
    before, after = {"a": a, "b": b, "c": np.zeros_like(c)}, {"a": a, "b": b, "c": c}
    mp = pytest.MonkeyPatch()
    outcomes = []
    for expect, k in (("2.5 * a + sqrt(b)", chunk), ("2.5 * a + sqrt(b) + 0 * sum(a)", 1 << 18)):
        try:
            outcomes.append(("ok", round(run(expect, before, after, k, mp), 6)))
        except CheckError as exc:
            outcomes.append(("fail", str(exc).split(";")[0].replace(" + 0 * sum(a)", "")))
    mp.undo()
    assert outcomes[0] == outcomes[1]  # the second expression is not element-by-element: the whole-array path
    assert (outcomes[0][0] == "fail") == any(i < size for i in wrong)


def test_elementwise_detection():
    a = np.zeros(4)
    before = {"a": a, "m": np.zeros((2, 2)), "alpha": 2.0}
    after = {"c": a}
    check = lambda e, g="c": checking._elementwise(CheckSpec(got=g, expect=e), before, after)  # noqa: E731
    assert check("alpha * a + a") == (4,)
    assert check("where(a > 0, a, -a)") is None  # a comparison is not in the element-by-element whitelist
    assert check("a @ a") is None and check("sum(a)") is None and check("m") is None
    assert check("a", g="c[1:]") is None


def test_a_check_that_sums_in_float64_itself_gets_no_float64_copies(monkeypatch):
    """csr_matvec on the spec's arrays as they are: no float64 copy of its values (2 GiB at 268M non-zeros); an
    expression around its arguments is promoted as any other."""
    rng = np.random.default_rng(5)
    n, k = 300, 4
    rowptr = np.arange(n + 1, dtype=np.int32) * k
    cols = rng.integers(0, n, n * k, dtype=np.int32)
    vals, x = rng.random(n * k, dtype=np.float32), rng.random(n, dtype=np.float32)
    dense = np.zeros((n, n))
    np.add.at(dense, (np.repeat(np.arange(n), k), cols), vals.astype(np.float64))
    y = (dense @ x.astype(np.float64)).astype(np.float32)
    before = {"rowptr": rowptr, "cols": cols, "vals": vals, "x": x, "y": np.zeros(n, np.float32)}
    promoted = []
    keep = checking._promote
    monkeypatch.setattr(checking, "_promote", lambda v: promoted.append(v) or keep(v))
    assert run("csr_matvec(rowptr, cols, vals, x)", before, dict(before, y=y), 1 << 18, monkeypatch, got="y") <= 1
    assert promoted == []
    assert run("csr_matvec(rowptr, cols, 1 * vals, x)", before, dict(before, y=y), 1 << 18, monkeypatch, got="y") <= 1
    assert len(promoted) == 4
    y[7] += 1.0
    with pytest.raises(CheckError, match="in 1 of 300"):
        run("csr_matvec(rowptr, cols, vals, x)", before, dict(before, y=y), 1 << 18, monkeypatch, got="y")
