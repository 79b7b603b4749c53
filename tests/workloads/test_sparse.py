"""Sparse matrices for SpMV specs: the generated families, CSR -> Sliced ELLPACK, and specs with a [matrix] table."""

import shutil

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from conftest import KERNELS
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.workloads import sparse
from gpuprofiler.workloads.kernel import measure_spec
from gpuprofiler.workloads.safe_eval import evaluate_array
from gpuprofiler.workloads.spec import load_spec

SPARSE = KERNELS / "sparse"


def csr_of(m) -> sparse.Csr:
    return sparse._from_scipy(sp.csr_matrix(m))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), density=st.floats(0.0, 0.5), S=st.integers(1, 70), seed=st.integers(0, 2**31))
def test_sell_holds_the_same_matrix(n, density, S, seed):
    rng = np.random.default_rng(seed)
    m = csr_of(sp.random(n, n, density=density, random_state=rng, dtype=np.float32))
    s = sparse.to_sell(m, S)
    assert s.slices == -(-n // S)
    widths = np.diff(s.sliceptr) // S
    assert np.all(np.diff(s.sliceptr) % S == 0)
    lengths = np.zeros(s.slices * S, int)
    lengths[:n] = m.row_lengths()
    assert np.array_equal(widths, lengths.reshape(-1, S).max(axis=1))  # each slice as wide as its longest row
    x = rng.random(n)
    want = m.scipy().astype(np.float64) @ x
    assert np.allclose(sparse.sell_matvec(s.sliceptr, s.cols, s.vals, x, S, n), want, rtol=1e-12, atol=1e-12)
    # the padding is zeros at a valid column
    assert s.cols.min(initial=0) >= 0 and s.cols.max(initial=0) < n
    assert np.count_nonzero(s.vals) == np.count_nonzero(m.vals)


def test_slice_height_one_is_csr():
    m = sparse.poisson2d(100)
    s = sparse.to_sell(m, 1)
    assert np.array_equal(s.sliceptr, m.rowptr)
    assert np.array_equal(s.cols, m.cols) and np.array_equal(s.vals, m.vals)


@pytest.mark.parametrize("family", sparse.FAMILIES)
def test_families_are_square_and_deterministic(family):
    a, b = sparse.GENERATORS[family](1000), sparse.GENERATORS[family](1000)
    assert a.rows == 1000
    assert np.array_equal(a.cols, b.cols) and np.array_equal(a.vals, b.vals)
    assert np.all(a.cols < 1000) and np.all(np.diff(a.rowptr) >= 1)
    # columns sorted and unique within every row
    for i in range(0, 1000, 97):
        row = a.cols[a.rowptr[i]:a.rowptr[i + 1]]
        assert np.all(np.diff(row) > 0)


def test_family_shapes():
    p2 = sparse.poisson2d(10000)  # 100 x 100 grid: interior rows have 5 entries, corners 3
    lengths = p2.row_lengths()
    assert lengths.max() == 5 and lengths.min() == 3 and p2.nnz == 5 * 10000 - 4 * 100
    assert abs(p2.scipy() - p2.scipy().T).max() == 0
    p3 = sparse.poisson3d(27000)  # 30^3
    assert p3.row_lengths().max() == 7 and p3.nnz == 7 * 27000 - 6 * 900
    assert sparse.banded(1000).row_lengths().max() == 2 * sparse.BANDED_HALF_WIDTH + 1
    pl = sparse.describe(sparse.powerlaw(100000))
    assert 6 < pl["mean_row"] < 10 and pl["max_row"] > 100 and pl["row_cv"] > 0.5  # a long tail
    bl = sparse.block(4000)
    assert bl.row_lengths().max() <= 16 and bl.row_lengths().min() >= 4


def test_matrix_market_file_is_the_size(tmp_path):
    m = sparse.banded(300).scipy()
    scipy.io.mmwrite(tmp_path / "a.mtx", m)
    got = sparse.matrix(str(tmp_path / "a.mtx"), 300)
    assert (got.scipy() != m).nnz == 0
    with pytest.raises(UserError, match="300 rows"):
        sparse.matrix(str(tmp_path / "a.mtx"), 200)
    (tmp_path / "bad.mtx").write_text("not a matrix\n")
    with pytest.raises(UserError, match="not a Matrix Market"):
        sparse.matrix(str(tmp_path / "bad.mtx"), 3)
    with pytest.raises(UserError, match="neither a matrix family"):
        sparse.check_source("poisson9d", "--matrix")


def test_sell_spec_runs_and_checks_on_every_family(pocl, quick_policy):
    spec = load_spec(SPARSE / "spmv_sell.toml")
    for family in sparse.FAMILIES:
        for S, nt in ((1, 64), (8, 128)):
            [rec] = measure_spec(pocl, spec.with_matrix(family), [20000], quick_policy, overrides={"S": S, "Nt": nt})
            assert rec["checked"] is True and rec["model_s"] > 0
            stored = sparse.sell(family, 20000, S).stored
            assert rec["bytes"] == 8 * stored + 4 * (-(-20000 // S) + 1) + 8 * 20000
    [rec] = measure_spec(pocl, load_spec(SPARSE / "spmv_csr_matrix.toml").with_matrix("powerlaw"), [20000],
                         quick_policy)
    assert rec["checked"] is True


def test_a_wrong_sell_kernel_is_caught(pocl, tmp_path):
    for f in SPARSE.glob("spmv_sell.*"):
        shutil.copy(f, tmp_path / f.name)
    cl = tmp_path / "spmv_sell.cl"
    cl.write_text(cl.read_text().replace("int e = start + k * S;", "int e = start + k;"))
    from gpuprofiler.errors import CheckError

    with pytest.raises(CheckError, match="differs"):
        measure_spec(pocl, load_spec(tmp_path / "spmv_sell.toml"), [5000], overrides={"S": 4, "Nt": 64})


def test_sell_reference_in_the_check_language():
    s = sparse.sell("poisson2d", 400, 8)
    x = np.arange(400, dtype=np.float32)
    got = evaluate_array("sell_matvec(p, c, v, x, S, n)", {"p": s.sliceptr, "c": s.cols, "v": s.vals, "x": x,
                                                             "S": 8, "n": 400}, "check")
    assert np.allclose(got, sparse.poisson2d(400).scipy() @ x.astype(np.float64))


@pytest.mark.parametrize("change, message", [
    (('part = "sliceptr"', 'part = "rows"'), "part: expected one of"),
    (('init = "matrix"\npart = "sliceptr"', 'part = "sliceptr"'), 'only an argument with init = "matrix"'),
    (('name = "sliceptr"\ndtype = "int32"', 'name = "sliceptr"\ndtype = "int64"'), "is int32, not int64"),
    (('slice = "S"', ''), "needs matrix.slice"),
    (('source = "poisson2d"', 'source = "poisson9d"'), "neither a matrix family"),
    (('source = "poisson2d"', 'source = "poisson2d"\ncolour = 1'), "unknown field"),
    (('part = "sell_vals"', 'part = "sell_vals"\nshape = "n"'), "not allowed with init"),
])
def test_bad_matrix_specs_are_refused(tmp_path, change, message):
    for f in SPARSE.glob("spmv_sell.*"):
        shutil.copy(f, tmp_path / f.name)
    toml = tmp_path / "spmv_sell.toml"
    text = toml.read_text()
    assert change[0] in text
    toml.write_text(text.replace(change[0], change[1], 1))
    with pytest.raises(UserError, match=message):
        load_spec(toml)


def test_matrix_chosen_on_a_spec_without_one():
    with pytest.raises(UserError, match="no \\[matrix\\] table"):
        load_spec(KERNELS / "vadd.toml").with_matrix("banded")


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 50), density=st.floats(0.0, 0.6), S=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_pairs_hold_the_same_matrix(n, density, S, seed):
    rng = np.random.default_rng(seed)
    m = csr_of(sp.random(n, n, density=density, random_state=rng, dtype=np.float32))
    blocks = sparse.to_pairs(m)
    assert np.all(blocks.cols >= 0) and np.all(blocks.cols + 1 < n)  # both columns of every block exist
    assert np.count_nonzero(blocks.vals) == np.count_nonzero(m.vals)
    # a row of L nonzeros holds between L / 2 and L blocks
    assert np.all(2 * blocks.row_lengths() >= m.row_lengths()) and np.all(blocks.row_lengths() <= m.row_lengths())
    x = rng.random(n)
    want = m.scipy().astype(np.float64) @ x
    s = sparse.to_sell(sparse.Csr(blocks.rowptr, blocks.cols, np.zeros(len(blocks.cols), np.float32)), S)
    got = sparse.pair_sell_matvec(*_pair_arrays(m, S), x, S, n)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert s.stored * 2 == len(_pair_arrays(m, S)[2])


def _pair_arrays(m, S):
    import functools

    src = "unused"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sparse, "matrix", functools.partial(lambda m, source, n: m, m))
        sparse.pair_sell.cache_clear()
        s = sparse.pair_sell(src, m.rows, S)
        sparse.pair_sell.cache_clear()
    return s.sliceptr, s.cols, s.vals


def test_pairs_of_a_banded_matrix_halve_the_indices():
    m = sparse.banded(1000)
    blocks = sparse.to_pairs(m)
    assert len(blocks.cols) == pytest.approx(m.nnz / 2, rel=0.06)  # 17 consecutive columns: 8 pairs and a single


def test_sell_pairs_spec_runs_and_checks(pocl, quick_policy):
    spec = load_spec(SPARSE / "spmv_sell_pairs.toml")
    for family in ("poisson2d", "block", "powerlaw"):
        [rec] = measure_spec(pocl, spec.with_matrix(family), [20000], quick_policy, overrides={"S": 4, "Nt": 64})
        assert rec["checked"] is True
        assert rec["bytes"] == 12 * sparse.pair_sell(family, 20000, 4).stored + 4 * (5000 + 1) + 8 * 20000


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), density=st.floats(0.0, 0.6), S=st.integers(1, 40), waste=st.floats(0.0, 1.0),
       seed=st.integers(0, 2**31))
def test_variable_heights_hold_the_same_matrix(n, density, S, waste, seed):
    rng = np.random.default_rng(seed)
    m = csr_of(sp.random(n, n, density=density, random_state=rng, dtype=np.float32))
    v = sparse.to_var_sell(m, S, waste)
    heights = np.diff(v.slicerow)
    assert heights.sum() == n and heights.min() >= 1 and heights.max() <= S
    assert np.array_equal(v.rowslice, np.repeat(np.arange(v.slices), heights))
    lengths = m.row_lengths()
    for s in range(v.slices):  # every slice holds at most `waste` of padding
        rows = lengths[v.slicerow[s]:v.slicerow[s + 1]]
        stored = rows.max() * len(rows)
        assert stored == v.sliceptr[s + 1] - v.sliceptr[s]
        assert stored - rows.sum() <= waste * stored + 1e-9
    x = rng.random(n)
    got = sparse.var_sell_matvec(v.sliceptr, v.slicerow, v.cols, v.vals, x, n)
    assert np.allclose(got, m.scipy().astype(np.float64) @ x, rtol=1e-12, atol=1e-12)


def test_variable_heights_cut_the_padding_of_long_tailed_rows():
    m = sparse.powerlaw(50000)
    fixed, var = sparse.to_sell(m, 8), sparse.to_var_sell(m, 8, 0.1)
    assert fixed.stored > 2 * m.nnz and var.stored <= 1.1 * m.nnz


def test_sell_var_spec_runs_and_checks(pocl, quick_policy):
    spec = load_spec(SPARSE / "spmv_sell_var.toml")
    for family in ("powerlaw", "poisson3d"):
        [rec] = measure_spec(pocl, spec.with_matrix(family), [20000], quick_policy,
                             overrides={"S": 8, "W": 10, "Nt": 64})
        assert rec["checked"] is True
    with pytest.raises(UserError, match="fraction from 0 to 1"):
        spec.instantiate(20000, {"W": 150})
