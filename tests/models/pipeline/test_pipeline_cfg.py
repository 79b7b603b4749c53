"""Basic blocks, loops, static trip counts from the launch's arguments, and the path most threads take."""

import numpy as np
import pytest
from conftest import PTX_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.cfg import (
    _cmp_int,
    _first_leave,
    block_counts,
    build_cfg,
    expand,
    find_path,
)
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
from gpuprofiler.models.pipeline.values import Evaluator, Launch

FIXTURES = PTX_FIXTURES


def entry(name, kernel=None):
    return parse_ptx((FIXTURES / f"{name}.ptx").read_text(), name).entry(kernel or name)


def walk(name, grid, block, args, kernel=None, **kw):
    e = entry(name, kernel)
    g = build_cfg(e)
    return e, g, find_path(g, Evaluator(e, Launch(grid, block, args)), **kw)


def test_blocks_edges_and_loops_of_matmul_tiled():
    e = entry("matmul_tiled")
    g = build_cfg(e)
    assert len(g.blocks) == 4
    assert [b.label for b in g.blocks] == [None, None, "$L__BB0_2", "$L__BB0_3"]
    assert g.blocks[0].succs == [3, 1] and g.blocks[2].succs == [2, 3]      # taken first, then fall-through
    assert len(g.loops) == 1 and g.loops[0].header == 2 and g.loops[0].latches == [2]
    assert g.dominates(0, 3) and not g.dominates(2, 3)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 256))
def test_matmul_tiled_k_loop_trip_count_comes_from_the_launch_argument(tiles):
    n = 16 * tiles
    _, _, path = walk("matmul_tiled", (tiles, tiles), (16, 16), {0: n})
    (loop,) = path.loops
    assert loop["trip"] == n // 16 and loop["trip_source"] == "static"
    assert loop["induction"] == "%r31" and loop["start"] == 0 and loop["step"] == 1 and loop["bound"] == n // 16


def test_matmul_tiled_small_n_skips_the_loop():
    _, _, path = walk("matmul_tiled", (1, 1), (16, 16), {0: 8})       # n < TILE: the guard jumps past the loop
    assert path.loops == [] and expand(path.items) == [0, 3]


@settings(max_examples=25, deadline=None)
@given(st.integers(64, 600))
def test_matmul_naive_unrolled_and_remainder_loops(n):
    # n >= 64: most threads of the launch pass the bounds guard, so the loops are on the path
    blocks = -(-n // 16)
    _, g, path = walk("matmul_naive", (blocks, blocks), (16, 16), {0: n})
    trips = {lp["label"]: lp["trip"] for lp in path.loops}
    # nvcc unrolls the k loop by 4 ($L__BB0_4) and runs the n % 4 rest in $L__BB0_7; each only when needed
    assert trips.get("$L__BB0_4", 0) == n // 4
    assert trips.get("$L__BB0_7", 0) == n % 4
    counts = block_counts(path.items, len(g.blocks))
    body = next(b.id for b in g.blocks if b.label == "$L__BB0_4")
    assert counts[body] == n // 4


def test_data_dependent_loops_are_assumed_with_a_warning_and_can_be_set():
    _, _, path = walk("spmv_csr", (16,), (256,), {0: 4096})
    assert all(lp["trip_source"] == "assumed" and lp["trip"] == 1 for lp in path.loops)
    assert any("$L__BB0_7" in w and "--trip" in w and "line 99" in w for w in path.warnings)
    _, _, path = walk("spmv_csr", (16,), (256,), {0: 4096}, trips={"$L__BB0_7": 2})
    assert {lp["label"]: lp["trip"] for lp in path.loops}["$L__BB0_7"] == 2


def test_missing_scalar_argument_is_reported():
    _, _, path = walk("vadd", (4,), (256,), {})
    assert any("give it with --args" in w for w in path.warnings)


def test_majority_path_of_the_bounds_guard():
    # n = 1000 of 1024 threads: the guard `i >= n` is taken by 24 threads, so the body is on the path
    _, _, path = walk("vadd", (4,), (256,), {0: 1000})
    assert expand(path.items) == [0, 1, 2]
    br = path.branches[0]
    # the sample holds every block of this small grid, so the fraction is exact
    assert br["taken_fraction"] == pytest.approx(24 / 1024)
    assert path.active_fraction == pytest.approx(1000 / 1024)
    # n = 100: most threads skip the body
    _, _, path = walk("vadd", (4,), (256,), {0: 100})
    assert expand(path.items) == [0, 2]


def test_reduction_tree_follows_thread_zero_and_counts_divergence():
    _, _, path = walk("reduction", (8,), (256,), {0: 2048})
    # every `if (lid < stride)` splits the active threads exactly in half: ties fall through into the body
    assert [b["taken_fraction"] for b in path.branches[1:9]] == [0.5] * 8
    # tid > 31 splits no warp; tid > 15 and below split the single active warp
    assert path.branches[3]["divergent_warps"] == 0.0 and path.branches[4]["divergent_warps"] == 1.0
    assert path.active_fraction == pytest.approx(1 / 256)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["lt", "le", "gt", "ge", "ne", "eq"]), st.integers(-60, 60), st.integers(-5, 5))
def test_closed_form_trip_count_matches_iterating(cmp, x1, d):
    """First pass k >= 1 at which the stay test fails, closed form vs. brute force."""
    got = _first_leave(cmp, np.array([x1]), np.array([d]))
    brute = None
    for k in range(1, 400):
        if not _cmp_int(cmp, np.array([x1 + (k - 1) * d]))[0]:
            brute = k
            break
    if brute is None:
        assert got is None
    else:
        assert got is not None and int(got[0]) == brute


def test_irreducible_flow_is_refused_with_its_line():
    loop = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 k_param_0)
{
  .reg .pred %p<3>; .reg .b32 %r<3>;
  ld.param.u32 %r1, [k_param_0];
  setp.eq.s32 %p1, %r1, 0;
$A:
  add.s32 %r1, %r1, 1;
$B:
  add.s32 %r1, %r1, 2;
  setp.lt.s32 %p2, %r1, 10;
  @%p2 bra $A;
  ret;
}
"""
    g = build_cfg(parse_ptx(loop, "ok.ptx").entry("k"), "ok.ptx")
    assert len(g.loops) == 1 and g.blocks[g.loops[0].header].label == "$A"
    # a second way into the loop body ($B) makes the cycle irreducible: refused, naming the line of the edge
    bad = loop.replace("  setp.eq.s32 %p1, %r1, 0;\n", "  setp.eq.s32 %p1, %r1, 0;\n  @%p1 bra $B;\n")
    with pytest.raises(UserError, match=r"bad.ptx:\d+: irreducible control flow"):
        build_cfg(parse_ptx(bad, "bad.ptx").entry("k"), "bad.ptx")
