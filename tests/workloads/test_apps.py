"""Wrapped multi-kernel runs on the real PoCL device: phases, shares, checks, overhead."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import CheckError, UserError
from gpuprofiler.workloads.apps import load_app, measure_app
from gpuprofiler.workloads.builtin import resolve
from gpuprofiler.workloads.wrapper import RunContext, launch_overhead


def test_cg_phases(pocl, quick_policy):
    records = measure_app(pocl, load_app(resolve("cg")), [4096], quick_policy)
    phases = {r["phase"]: r for r in records}
    assert {"spmv", "dot_partial", "axpy", "xpay", "memcpy HtoD", "memcpy DtoH"} == set(phases)
    it = load_app(resolve("cg")).module.ITERATIONS
    assert phases["spmv"]["calls"] == it and phases["dot_partial"]["calls"] == 2 * it
    assert phases["axpy"]["calls"] == 2 * it and phases["memcpy DtoH"]["calls"] == 2 * it + 1
    assert all(r["checked"] and r["median_s"] > 0 and r["samples"] >= 5 for r in records)
    assert sum(r["share"] for r in records) == pytest.approx(1.0, abs=0.05)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 700))
def test_cgs_matrix_is_its_five_bands_in_csr_order(n):
    """The CSR arrays built row by row equal the banded matrix (4.5 on the diagonal, -1 at offsets +-1 and
    +-floor(sqrt(n))), each row's columns ascending: what scipy makes of the same entries."""
    import scipy.sparse as sp

    rowptr, cols, vals = load_app(resolve("cg")).module.matrix(n)
    g = max(2, int(np.sqrt(n)))
    dense = 4.5 * np.eye(n) - sum(np.eye(n, k=k) for k in (-g, -1, 1, g))
    want = sp.csr_matrix(dense.astype(np.float32))
    assert rowptr.dtype == cols.dtype == np.int32 and vals.dtype == np.float32
    assert np.array_equal(rowptr, want.indptr) and np.array_equal(cols, want.indices)
    assert np.array_equal(vals, want.data)


def test_cgs_matrices_are_kept_up_to_a_bound(monkeypatch):
    """A sweep's sizes alternate: each size's matrix is built once and kept, the least recently used dropped once
    the kept ones pass ``KEEP_BYTES`` (the last one built always kept)."""
    cg = load_app(resolve("cg")).module
    monkeypatch.setattr(cg, "_kept", type(cg._kept)())
    sizes = [1000, 2000, 3000]
    first = [cg.matrix(n) for n in sizes]
    assert all(cg.matrix(n) is m for n, m in zip(sizes, first)) and list(cg._kept) == sizes
    one = sum(a.nbytes for a in first[1]) + sum(a.nbytes for a in first[2])
    monkeypatch.setattr(cg, "KEEP_BYTES", one)
    again = cg.matrix(1000)  # still kept: now the most recently used, 2000 the least
    assert again is first[0] and list(cg._kept) == [2000, 3000, 1000]
    cg.matrix(4000)  # past the bound: the least recently used go until the rest fit
    assert list(cg._kept)[-1] == 4000 and 2000 not in cg._kept
    assert sum(a.nbytes for arrays in cg._kept.values() for a in arrays) <= one
    monkeypatch.setattr(cg, "KEEP_BYTES", 0)
    assert cg.matrix(5000) is cg.matrix(5000) and list(cg._kept) == [5000]
    assert not cg.matrix(5000)[0].flags.writeable


def test_jacobi_runs_and_checks(pocl, quick_policy):
    records = measure_app(pocl, load_app(resolve("jacobi")), [4096], quick_policy)
    assert {r["phase"] for r in records} >= {"jacobi_step", "diff_partial"}
    assert all(r["checked"] for r in records)
    copies = {r["phase"]: r for r in records if r["phase_kind"] == "copy"}
    assert copies and all(r["work"] > 0 and r["work_unit"] == "bytes" and r["work"] % 4 == 0 for r in copies.values())


def test_regions_and_raw_events(pocl, tmp_path):
    ctx = RunContext(pocl)
    kernel = ctx.compile("__kernel void k(__global float *x) { x[get_global_id(0)] += 1.0f; }", "k")
    buf = ctx.to_device(np.zeros(64, np.float32))
    with ctx.region("solve"):
        ctx.launch(kernel, (64,), (64,), buf)
        ctx.launch(kernel, (64,), (64,), buf)
    ctx.launch(kernel, (64,), (64,), buf)
    ctx.finish()
    phases = ctx.recorder.phase_times()
    assert phases["solve"]["calls"] == 2 and phases["k"]["calls"] == 1 and phases["memcpy HtoD"]["calls"] == 1
    # the work each phase did: work-items launched, bytes copied; a region mixing both has none
    assert phases["solve"]["work"] == 128 and phases["k"]["work"] == 64 and phases["memcpy HtoD"]["work"] == 256
    assert phases["solve"]["work_unit"] == "work-items" and phases["memcpy HtoD"]["work_unit"] == "bytes"
    with ctx.region("mixed"):
        ctx.to_device(np.zeros(8, np.float32), buf)
        ctx.launch(kernel, (64,), (64,), buf)
    ctx.record("raw", ctx.launch(kernel, (64,), (64,), buf))
    ctx.finish()
    phases = ctx.recorder.phase_times()
    assert phases["mixed"]["work"] is None and phases["raw"]["work"] is None


def test_wrapper_overhead_is_small(pocl):
    o = launch_overhead(pocl)
    assert o["bare_launch_s"] > 0
    assert o["overhead_per_launch_s"] < 200e-6  # generous: Python bookkeeping only


def test_app_errors_are_user_errors(pocl, tmp_path, quick_policy):
    bad = tmp_path / "bad.py"
    bad.write_text("def run(ctx, n):\n    return 1 / 0\n")
    with pytest.raises(UserError, match=r"ZeroDivisionError \(line 2\)"):
        measure_app(pocl, load_app(bad), [8], quick_policy)
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def run(ctx, n):\n    return n\n\ndef check(n, r):\n    assert r == n + 1, 'off by one'\n")
    with pytest.raises(CheckError, match="off by one"):
        measure_app(pocl, load_app(wrong), [8], quick_policy)
    with pytest.raises(UserError, match="must define run"):
        (tmp_path / "norun.py").write_text("x = 1\n")
        load_app(tmp_path / "norun.py")



@settings(max_examples=40, deadline=None)
@given(st.integers(9, 2500), st.integers(0, 25), st.integers(0, 10**9))
def test_jacobis_check_on_the_rows_a_sweep_reaches_is_the_whole_grids(points, sweeps, where):
    """The check sweeps only the rows the hot edge can reach and requires the others to be zero: it passes the whole
    grid's numpy reference and fails it with any one cell changed, inside the band or below it."""
    app = load_app(resolve("jacobi"))
    n = app.module.side(points)
    u = app.module.initial(n).astype(np.float64)
    for _ in range(sweeps):
        v = u.copy()
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u = v
    good = u.astype(np.float32)
    app.check_fn(points, {"u": good, "sweeps": sweeps, "rms": 0.0})
    bad = good.copy()
    bad.flat[where % bad.size] += 1e-3
    with pytest.raises(AssertionError):
        app.check_fn(points, {"u": bad, "sweeps": sweeps, "rms": 0.0})
