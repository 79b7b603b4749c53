"""The exact trace of a launch's accesses (:mod:`gpuprofiler.kernelcode.trace`): early returns, both arms of a
branch, ``break``/``continue``, short-circuits, pointers and helper functions, each access counted only for the
work-items that reach it; what depends on data the trace lacks is *may*, never *must*. Reaches are compared with
brute force over every work-item of small launches."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.kernelcode.sample import corner_groups
from gpuprofiler.kernelcode.trace import extents, trace


def reach(src, n, glob, local, groups=None, contents=None, name="k"):
    t = trace(src, name, {"n": n}, glob, local, contents=contents, groups=groups)
    return {k: (e.low, e.high, e.may_low, e.may_high) for k, e in extents(t.accesses).items()}


def all_groups(glob, local):
    return np.arange(int(np.prod([-(-g // lsz) for g, lsz in zip(glob, local)])))


def test_an_early_return_takes_the_padding_work_items_out():
    src = "__kernel void k(int n, __global float *c) { int i = get_global_id(0); if (i >= n) return; c[i] = 1.0f; }"
    assert reach(src, 1000, [1024], [256])["c"] == (0, 3999, 0, 3999)


def test_both_arms_of_a_branch_and_a_return_inside_one():
    src = """__kernel void k(int n, __global const float *a, __global float *c) {
        int i = get_global_id(0);
        if (i == 0 || i == n - 1) { c[i] = a[i]; return; } else { c[i] = a[i - 1] + a[i + 1]; }
        c[i] += 1.0f;
    }"""
    got = reach(src, 64, [64], [16], all_groups([64], [16]))
    assert got["a"][:2] == (0, 63 * 4 + 3) and got["c"][:2] == (0, 63 * 4 + 3)


def test_a_guard_on_unknown_data_is_may_not_must():
    src = """__kernel void k(int n, __global const float *x, __global float *c) {
        int i = get_global_id(0);
        if (x[i] > 0.5f) c[i + n] = 1.0f;
        c[i] = 2.0f;
    }"""
    low, high, may_low, may_high = reach(src, 256, [256], [64])["c"]
    assert (low, high) == (0, 255 * 4 + 3) and may_high == (255 + 256) * 4 + 3


def test_break_and_continue_leave_until_their_loop_or_pass_ends():
    src = """__kernel void k(int n, __global float *c) {
        int i = get_global_id(0);
        for (int k = 0; k < 8; k++) {
            if (k == 2) continue;
            if (i + k >= n) break;
            c[i + k] = 1.0f;
        }
        c[i] = 0.0f;
    }"""
    assert reach(src, 100, [100], [20], all_groups([100], [20]))["c"][:2] == (0, 99 * 4 + 3)


def test_short_circuit_and_ternary_evaluate_only_where_c_does():
    src = """__kernel void k(int n, __global const float *a, __global float *c) {
        int i = get_global_id(0);
        float v = (i < n && a[i] > 0.0f) ? a[i] : ((i + 1 < n) ? a[i + 1] : 0.0f);
        if (i < n) c[i] = v;
    }"""
    got = reach(src, 1000, [1024], [256])
    assert got["a"][:2] == (0, 999 * 4 + 3) and got["a"][3] == 999 * 4 + 3


def test_pointers_vectors_and_helpers():
    src = """
    float row_sum(__global const float *r, int m) { float s = 0.0f; for (int k = 0; k < m; k++) s += r[k]; return s; }
    __kernel void k(int n, __global const float *A, __global float4 *out) {
        int i = get_global_id(0);
        if (i >= n) return;
        __global const float *row = A + i * 8;
        float4 v = vload4(1, row);
        out[i] = v + row_sum(row, 8);
    }"""
    got = reach(src, 100, [128], [64])
    assert got["A"][:2] == (0, (99 * 8 + 7) * 4 + 3)
    assert got["out"][:2] == (0, 99 * 16 + 15)


def test_a_gather_follows_the_spec_contents():
    src = """__kernel void k(int n, __global const int *idx, __global const float *x, __global float *y) {
        int i = get_global_id(0);
        if (i < n) y[i] = x[idx[i]];
    }"""
    got = reach(src, 500, [512], [128], contents={"idx": lambda a: (np.asarray(a) * 7) % 300})
    assert got["x"][1] == max((i * 7) % 300 for i in range(500)) * 4 + 3  # four groups: the corners are all


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), local=st.sampled_from([1, 7, 32, 64]), lo=st.integers(0, 40),
       cut=st.integers(0, 40), off=st.integers(-8, 8), stride=st.integers(1, 3))
def test_reach_equals_brute_force_over_every_work_item(n, local, lo, cut, off, stride):
    """``if (i < lo || i >= n - cut) return; c[stride * i + off] = 1`` in a launch rounded up to whole groups: the
    trace's reach at the corner work-groups never passes the brute-force extremes over every work-item, and equals
    them where the guards cut less than a work-group off each end."""
    src = f"""__kernel void k(int n, __global float *c) {{
        int i = get_global_id(0);
        if (i < {lo} || i >= n - {cut}) return;
        c[{stride} * i + ({off})] = 1.0f;
    }}"""
    glob = [-(-n // local) * local]
    reached = [stride * i + off for i in range(glob[0]) if lo <= i < n - cut]
    got = reach(src, n, glob, [local], corner_groups(glob, [local])).get("c")
    exact = (min(reached) * 4, max(reached) * 4 + 3) if reached else None
    if got is None or got[0] is None:
        assert not reached or max(lo, cut + glob[0] - n) >= local
    elif lo < local and cut + glob[0] - n < local:
        assert got[:2] == exact
    else:
        assert exact[0] <= got[0] and got[1] <= exact[1]
