"""The max-plus model on a CPU: fused multiply-adds in the graph, and work-items run one after another on a core
whose out-of-order window overlaps as many of their chains as the profile's overlap curve says."""

import copy
import math

import pytest
from conftest import H100_PROFILE, POCL_PROFILE
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.maxplus.builder import build
from gpuprofiler.models.maxplus.graph import graph_times
from gpuprofiler.models.maxplus.models import arc_numbers, loop_numbers, parameters, predict
from gpuprofiler.models.maxplus.throughput import cpu_overlap
from gpuprofiler.profile.file import Profile, load_profile
from gpuprofiler.profile.hardware import view

POCL = load_profile(POCL_PROFILE)
H100 = load_profile(H100_PROFILE)
CURVE = [(8, 6.0), (64, 2.0), (512, 1.0)]


def with_curve(profile=POCL, curve=CURVE):
    data = copy.deepcopy(profile.data)
    data.setdefault("concurrency", {})["overlap_curve"] = [{"ops": x, "overlap": y} for x, y in curve]
    return Profile(data)


def ops_of(kernel):
    return sorted(info["op"] for g in kernel.fragments for info in g.loops.values())


def one(body, params="__global const float *a, __global const float *b, __global float *c, int n"):
    src = f"__kernel void k({params}) {{\n int i = get_global_id(0);\n {body}\n}}"
    return build(src, "k", {"n": 16}, [64], "k.cl", global_size=[1024])


# ---- contraction -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body,ops", [
    ("c[i] = a[i] * b[i] + 1.0f;", ["fma"]),
    ("c[i] = 1.0f + a[i] * b[i];", ["fma"]),
    ("c[i] = a[i] - a[i] * b[i];", ["fma"]),
    ("float s = 0.0f; for (int k = 0; k < n; k++) s += a[k] * b[k]; c[i] = s;", ["fma"] * 16),
    ("c[i] = a[i] * b[i] + a[i] * a[i];", ["fma", "mul"]),
    ("float t = a[i] * b[i]; c[i] = t + 1.0f;", ["add", "mul"]),  # two statements: not contracted
    ("c[i] = (a[i] + b[i]) * 2.0f;", ["add", "mul"]),
    ("c[i] = a[i] * b[i];", ["mul"]),
])
def test_a_product_added_in_its_own_statement_is_one_fma(body, ops):
    assert ops_of(one(body)) == ops


def test_integer_products_are_not_contracted():
    kernel = one("int m = n * i + 3; c[i] = a[i] * (float)m;")
    assert "fma" not in ops_of(kernel)


def test_the_fused_node_waits_for_the_addend():
    """s += a[k] * b[k]: each FMA depends on the previous one, so the chain is n FMA latencies, not n adds."""
    kernel = one("float s = 0.0f; for (int k = 0; k < n; k++) s += a[k] * b[k]; c[i] = s;")
    g = kernel.fragments[0]
    p = parameters(POCL, kernel)
    lat = p.values["tau"]
    weights = [[0.0] * len(g.arcs)]
    loops = [[0.0] * g.size]
    for node, v in loop_numbers(g, "overlap", kernel, p).items():
        loops[0][node] = v
    assert graph_times(g, weights, loops)[0] == pytest.approx(16 * lat, rel=1e-12)


# ---- the overlap curve -------------------------------------------------------------------------------------

@pytest.mark.parametrize("ops,want", [(8, 6.0), (64, 2.0), (512, 1.0), (1, 6.0), (10 ** 6, 1.0),
                                      (math.sqrt(8 * 64), math.sqrt(12.0)), (math.sqrt(64 * 512), math.sqrt(2.0))])
def test_overlap_is_the_curve_in_log_log_held_at_its_ends(ops, want):
    value, source = cpu_overlap(view(with_curve()), ops)
    assert value == pytest.approx(want, rel=1e-12) and "overlap_curve" in source


def test_a_dip_below_a_longer_chains_overlap_is_read_as_the_longer_chains():
    """Upper envelope from the long end: 0.77 at 1024 between 1.14 at 512 and 1.03 at 2048 reads as 1.03."""
    hw = view(with_curve(curve=[(512, 1.14), (1024, 0.77), (2048, 1.03), (4096, 1.0)]))
    assert cpu_overlap(hw, 1024)[0] == pytest.approx(1.03, rel=1e-12)
    assert cpu_overlap(hw, 4096)[0] == pytest.approx(1.0, rel=1e-12)
    assert cpu_overlap(hw, 512)[0] == pytest.approx(1.14, rel=1e-12)


def test_no_overlap_curve_off_a_cpu_or_without_one():
    assert cpu_overlap(view(POCL), 64) is None                      # a profile calibrated before it
    assert cpu_overlap(view(with_curve(H100)), 64) is None           # a GPU: warps, not a window


def test_a_cpu_core_runs_its_groups_work_items_one_after_another():
    """Latency bound = work-groups per core x group x (one work-item's path / the overlap at its operations)."""
    n, local = 1 << 16, 64
    src = ("__kernel void k(__global const float *a, __global float *c, int m) {\n int i = get_global_id(0);\n"
           " float s = a[i]; for (int k = 0; k < m; k++) s = s * 0.5f + 1.0f; c[i] = s;\n}")
    kernel = build(src, "k", {"m": 100}, [local], "k.cl", global_size=[n], buffers={"a": 4 * n, "c": 4 * n})
    prof = with_curve()
    p = parameters(prof, kernel)
    pred = predict(kernel, p, n, n)
    d = pred.details
    g = kernel.fragments[0]
    ops = len(g.loops) + 2
    assert ops == 102
    cached = parameters(prof, kernel)
    cached.values["t"] = cached.values["t_c"]
    cached.values["T"] = min(cached.values["t_c"], cached.values["T"])  # a store only until it reaches L1
    loops = [[0.0] * g.size]
    for node, v in loop_numbers(g, "overlap", kernel, cached).items():
        loops[0][node] = v
    path = graph_times(g, [arc_numbers(g, "overlap", cached)], loops)[0]
    assert path == pytest.approx(cached.values["t_c"] + 100 * p.values["tau"] + cached.values["T"], rel=1e-12)
    overlap = cpu_overlap(p.hw, ops)[0]
    cores = int(p.hw.compute_units.value)
    per_core = math.ceil(n / local / cores)
    assert d["cpu_chains"]["work_groups_per_core"] == per_core
    assert d["bounds_s"]["latency"] == pytest.approx(per_core * local * path / overlap, rel=1e-12)
    # without the curve: the earlier batches of resident work-items
    old = predict(kernel, parameters(POCL, kernel), n, n).details
    assert "cpu_chains" not in old and old["batches_count"] == math.ceil(n / (local * cores))


def test_given_n_keeps_the_batches():
    n = 1 << 14
    src = "__kernel void k(__global const float *a, __global float *c) { int i = get_global_id(0); c[i] = a[i]; }"
    kernel = build(src, "k", {}, [64], "k.cl", global_size=[n])
    p = parameters(with_curve(), kernel, n_override=4)
    assert "cpu_chains" not in predict(kernel, p, n, n).details


def _copy_with_misses(l1_store_remisses: float = 0.0, **analysis):
    """A copy kernel of 2^16 work-items on the looped-curve profile, its prediction without misses, and a stand-in
    cache analysis (an L1 with ``l1_store_remisses``, a shared L2, nothing missed; ``analysis``: more fields) with
    its prediction: (n, profile, plain details, misses, details with the misses)."""
    from types import SimpleNamespace

    n, local = 1 << 16, 64
    src = "__kernel void k(__global const float *a, __global float *c) { int i = get_global_id(0); c[i] = a[i]; }"
    kernel = build(src, "k", {}, [local], "k.cl", global_size=[n], buffers={"a": 4 * n, "c": 4 * n})
    prof = with_curve()
    p = parameters(prof, kernel)
    levels = [SimpleNamespace(name=name, store_remisses=remisses, shared=shared, misses=0.0, miss_ratio=0.0,
                              write_share=0.0, by_array={})
              for name, remisses, shared in (("L1", l1_store_remisses, False), ("L2", 0.0, True))]
    misses = SimpleNamespace(levels=levels, order=SimpleNamespace(line_bytes=64), accesses=2.0 * n, **analysis)
    return n, prof, predict(kernel, p, n, n).details, misses, predict(kernel, p, n, n, misses=misses).details


def test_stores_re_missing_l1_add_their_stalls_to_the_cores_time():
    """With the launch's predicted misses the latency bound grows by exactly what the cores wait on stores that
    re-miss a private level (store_stalls), spread over the work-groups each core runs."""
    from gpuprofiler.models.costs import store_stalls

    _, prof, plain, misses, stalled = _copy_with_misses(3e5)
    levels = misses.levels
    stall = store_stalls(prof, levels)[0]
    assert stall > 0 and stalled["cpu_chains"]["store_stall_s"] == stall
    assert stalled["bounds_s"]["latency"] == pytest.approx(plain["bounds_s"]["latency"] + stall, rel=1e-9)


def test_page_walks_add_to_the_cores_time():
    """The launch's page walks (tlb_walks: accesses x the TLB curve's extra per access, over the cores) lengthen the
    latency bound by exactly their seconds, as in the cache-miss law: a core walks on its own time, its loads wait
    for the translation (gesummv at 3000 on a Zen 4 VM: 23 ms of walks beside 5 ms of chains, 39 ms measured)."""
    from gpuprofiler.models.costs import tlb_walks

    n, prof, plain, misses, walked = _copy_with_misses(tlb_s_per_access=3e-9, tlb_miss_ratio=0.5, tlb_pages=64)
    walks = tlb_walks(prof, misses)[0]
    assert walks == pytest.approx(2.0 * n * 3e-9 / view(prof).compute_units.value, rel=1e-12)
    assert walked["cpu_chains"]["tlb_walk_s"] == walks
    assert walked["bounds_s"]["latency"] == pytest.approx(plain["bounds_s"]["latency"] + walks, rel=1e-9)
    assert walked["bounds_s"]["latency"] >= walked["bounds_s"]["tlb"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.3, 20.0), min_size=2, max_size=10), st.lists(st.floats(1.0, 1e4), min_size=5,
                                                                           max_size=5))
def test_the_read_overlap_never_grows_with_the_chain(overlaps, probes):
    curve = [(8 * 2 ** k, y) for k, y in enumerate(overlaps)]
    hw = view(with_curve(curve=curve))
    values = [cpu_overlap(hw, x)[0] for x in sorted(probes)]
    assert all(a >= b * (1 - 1e-12) for a, b in zip(values, values[1:]))
    assert min(values) >= min(overlaps) * (1 - 1e-12) and max(values) <= max(overlaps) * (1 + 1e-12)
