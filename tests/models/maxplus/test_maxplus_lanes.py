"""Max-plus on a CPU, the way its OpenCL compiler runs kernels: fragments in vector lanes or a work-item at a
time, barriers priced by the kind of region after them, stores off the critical path, and DRAM time as the lines
the cores wait to read (writes fill only the lines they did not read)."""

import copy
import math

import pytest
from conftest import H100_PROFILE, POCL_PROFILE

from gpuprofiler.models.maxplus.builder import build
from gpuprofiler.models.maxplus.models import parameters, predict, vector_lanes
from gpuprofiler.models.maxplus.throughput import cpu_overlap, resources
from gpuprofiler.profile.file import Profile, entry, load_profile
from gpuprofiler.profile.hardware import view

POCL = load_profile(POCL_PROFILE)
H100 = load_profile(H100_PROFILE)
LOOPED = [(8, 6.0), (64, 2.0), (512, 1.0)]
LOOPFREE = [(2, 4.0), (8, 16.0), (64, 12.0)]


def contiguous(profile=POCL, looped=LOOPED, loopfree=LOOPFREE, scalar_barrier=7e-8):
    """The PoCL fixture as a profile of this release would read: contiguous bandwidths, both overlap curves, the
    barrier of regions run a work-item at a time."""
    data = copy.deepcopy(profile.data)
    data["bandwidth"]["layout"] = "contiguous"
    conc = data.setdefault("concurrency", {})
    conc["overlap_curve"] = [{"ops": x, "overlap": y} for x, y in looped]
    conc["loopfree_curve"] = [{"ops": x, "overlap": y} for x, y in loopfree]
    data["instructions"]["barrier_scalar"] = {"status": "ok", "work_group": 64,
                                              "latency_s": entry(scalar_barrier, "s", "in-place regions")}
    return Profile(data)


def kernel_of(body, params, n=1 << 16, local=256):
    src = f"__kernel void k({params}) {{\n int i = get_global_id(0);\n {body}\n}}"
    buffers = {name: 4 * n for name in ("a", "b", "c", "x", "y")}
    return build(src, "k", {"n": n, "m": 64}, [local], "k.cl", global_size=[n], buffers=buffers)


VADD = ("c[i] = a[i] + b[i];", "__global const float *a, __global const float *b, __global float *c, int n")
SAXPY = ("y[i] += 2.0f * x[i];", "__global const float *x, __global float *y, int n")
REDUCE = ("__local float s[256]; int l = get_local_id(0); s[l] = a[i]; barrier(CLK_LOCAL_MEM_FENCE);"
          " for (int k = 128; k > 0; k >>= 1) { if (l < k) s[l] += s[l + k]; barrier(CLK_LOCAL_MEM_FENCE); }"
          " if (l == 0) c[get_group_id(0)] = s[0];",
          "__global const float *a, __global float *c, int n")


# ---- which fragments run in vector lanes ---------------------------------------------------------------------------

@pytest.mark.parametrize("body,params,lanes", [
    (*VADD, [True]),
    (*SAXPY, [True]),
    ("c[i] = a[i * 4];", "__global const float *a, __global float *c, int n", [False]),        # a stride
    ("c[i] = a[(int)b[i]];", "__global const float *a, __global const float *b, __global float *c, int n",
     [False]),                                                                                      # a gather
    ("float s = 0.0f; for (int k = 0; k < m; k++) s += a[k] * b[i]; c[i] = s;",
     "__global const float *a, __global const float *b, __global float *c, int n, int m", [False]),  # its own loop
    ("float s = 0.0f; for (int k = 0; k < 1; k++) s += a[k] * b[i]; c[i] = s;",
     "__global const float *a, __global const float *b, __global float *c, int n", [True]),        # no loop left
    # the load, eight in-place steps, the partial sum's store
    (*REDUCE, [True] + [False] * 8 + [True]),
])
def test_a_fragment_runs_in_lanes_without_a_loop_a_stride_or_an_in_place_update(body, params, lanes):
    kernel = kernel_of(body, params)
    assert [vector_lanes(g) for g in kernel.fragments if g.outputs] == lanes


def test_a_barrier_inside_a_loop_leaves_its_fragments_loop_free():
    kernel = kernel_of(*REDUCE)
    assert not any(g.looped for g in kernel.fragments)


# ---- the loop-free curve ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ops,want", [(1, 16.0), (2, 16.0), (4, 16.0), (8, 16.0), (64, 12.0), (500, 12.0)])
def test_lanes_read_the_loop_free_curve_as_its_envelope_from_the_long_end(ops, want):
    """A short chain keeps at least as many work-items in progress as a longer one: the curve's rise to 8
    operations is each work-item's fixed cost (the floor below), not fewer chains at once."""
    hw = view(contiguous())
    assert cpu_overlap(hw, ops, lanes=True)[0] == pytest.approx(want, rel=1e-12)
    # without lanes, or without the loop-free curve, the looped curve
    assert cpu_overlap(hw, ops)[0] == cpu_overlap(view(contiguous(loopfree=[])), ops, lanes=True)[0]


def test_a_lane_fragments_path_is_divided_by_the_loop_free_overlap_and_its_stores_cost_a_cached_write():
    prof = contiguous()
    kernel = kernel_of(*VADD)
    p = parameters(prof, kernel)
    d = predict(kernel, p, 1 << 16, 1 << 16).details
    frag = d["cpu_chains"]["fragments"][0]
    t_c = p.values["t_c"]
    # two loads in parallel, the add, the store only until it reaches the first level
    assert frag["path_s"] == pytest.approx(t_c + p.values["tau"] + min(t_c, p.values["T"]), rel=1e-12)
    assert frag["lanes"] and frag["overlap"] == pytest.approx(cpu_overlap(view(prof), 4, lanes=True)[0], rel=1e-12)
    per_core = math.ceil((1 << 16) / 256 / int(view(prof).compute_units.value))
    assert d["bounds_s"]["latency"] == pytest.approx(per_core * 256 * frag["path_s"] / frag["overlap"], rel=1e-12)
    assert d["bounds_s"]["issue"] == 0.0  # a lane fragment's issue limit is in its curve


@pytest.mark.parametrize("floor", [None, 1e-12, 1e-8])
def test_a_lane_fragment_takes_at_least_the_loop_free_curves_least_time_per_work_item(floor):
    """The loop-free curve's shortest chains are held by each work-item's fixed cost: a fragment whose path over
    the overlap is shorter than the least time per work-item the curve measured takes that time."""
    prof = contiguous()
    if floor is not None:  # the least of ops x op_s is the 8-operation point's
        for point, op_s in zip(prof.data["concurrency"]["loopfree_curve"], (floor, floor / 8, floor)):
            point["op_s"] = op_s
    hw = view(prof)
    assert hw.loopfree_floor_s == (pytest.approx(floor, rel=1e-12) if floor else None)
    kernel = kernel_of(*VADD)
    d = predict(kernel, parameters(prof, kernel), 1 << 16, 1 << 16).details
    frag = d["cpu_chains"]["fragments"][0]
    item = max(frag["path_s"] / frag["overlap"], floor or 0.0)
    assert frag["item_s"] == pytest.approx(item, rel=1e-12)
    assert frag["floor_s"] == (pytest.approx(floor, rel=1e-12) if floor == 1e-8 else None)
    per_core = math.ceil((1 << 16) / 256 / int(hw.compute_units.value))
    assert d["bounds_s"]["latency"] == pytest.approx(per_core * 256 * item, rel=1e-12)


def test_each_barrier_costs_what_the_region_after_it_is():
    prof = contiguous(scalar_barrier=7e-8)
    kernel = kernel_of(*REDUCE)
    p = parameters(prof, kernel)
    d = predict(kernel, p, 1 << 16, 1 << 16).details["cpu_chains"]
    vec, scalar = p.values["t_bar"] * 256 / 64, 7e-8 * 256 / 64
    frags = d["fragments"]
    # out of the lanes, only the work-items the guard lets in run a tree step: half the group, then a quarter
    shares = [g.access_share if g.guarded and not f["lanes"] else 1.0
              for g, f in zip([g for g in kernel.fragments if g.outputs], frags)]
    assert [s for s, f in zip(shares, frags) if not f["lanes"]] == [0.5 ** k for k in range(1, 9)]
    paths = sum(256 * s * f["path_s"] / f["overlap"] for s, f in zip(shares, frags))
    assert [f["item_s"] for f in frags[1:-1]] == pytest.approx([s * f["path_s"] / f["overlap"]
                                                                for s, f in zip(shares[1:-1], frags[1:-1])], rel=1e-12)
    lanes_after = sum(f["lanes"] for f in frags[1:])
    want = paths + lanes_after * vec + (len(frags) - 1 - lanes_after) * scalar
    per_group = predict(kernel, p, 1 << 16, 1 << 16).details["batch_s"]
    assert per_group == pytest.approx(want, rel=1e-12)



def test_a_region_with_an_unguarded_access_runs_for_every_work_item():
    """Out of the lanes, only a region whose every access is guarded is scaled by the share that makes one: an
    in-place update every work-item makes, then one work-item's store, costs the whole group's path."""
    prof = contiguous(scalar_barrier=7e-8)
    kernel = kernel_of("__local float s[257]; int l = get_local_id(0); s[l] = a[i]; barrier(CLK_LOCAL_MEM_FENCE);"
                       " s[l] += s[l + 1]; if (l == 0) c[get_group_id(0)] = s[0];",
                       "__global const float *a, __global float *c, int n")
    timed = [g for g in kernel.fragments if g.outputs]
    assert timed[1].guarded and timed[1].guard_share == pytest.approx(1 / 256) and timed[1].access_share == 1.0
    frag = predict(kernel, parameters(prof, kernel), 1 << 16, 1 << 16).details["cpu_chains"]["fragments"][1]
    assert not frag["lanes"]
    assert frag["item_s"] == pytest.approx(frag["path_s"] / frag["overlap"], rel=1e-12)

# ---- DRAM: what the cores wait to read ------------------------------------------------------------------------------

@pytest.mark.parametrize("body,params,read,filled", [(*VADD, 8, 4), (*SAXPY, 8, 0)])
def test_a_cpu_writes_fill_only_the_lines_it_did_not_read(body, params, read, filled):
    n = 1 << 26  # far past any last level
    kernel = kernel_of(body, params, n=n)
    cpu = resources(kernel, view(contiguous()), n, 0.0).traffic
    assert cpu["dram_read_bytes"] == pytest.approx(read * n, rel=1e-12)
    assert cpu["dram_write_bytes"] == pytest.approx(filled * n, rel=1e-12)
    # a GPU, and a CPU profile of the older strided bandwidths, write every written byte back as before
    for hw in (view(H100), view(POCL)):
        assert resources(kernel, hw, n, 0.0).traffic["dram_write_bytes"] == pytest.approx(4 * n, rel=1e-12)


def test_a_programs_launches_are_priced_by_their_address_streams():
    """An app's traced launches get the same cache analysis as a kernel spec's: their DRAM and cache traffic are the
    sampled stream's misses, not the footprint rules."""
    from gpuprofiler.models.maxplus.predictor import MaxPlusPredictor
    from gpuprofiler.workloads import builtin
    from gpuprofiler.workloads.sweep import load_target
    from gpuprofiler.workloads.trace import trace_app

    data = copy.deepcopy(POCL.data)
    del data["bandwidth"]["streaming_llc_bytes"]  # the last level at its latency knee: cg's vectors pass it
    profile = Profile(data)
    app = load_target(builtin.resolve("cg"))
    pred = MaxPlusPredictor().fit(app, profile)
    launches = trace_app(app, 1 << 23, "opencl")
    details = pred._predict_launch(next(x for x in launches if x.kernel.name == "axpy")).details
    assert "sampled address stream" in details["resource_sources"]["misses"]
    assert MaxPlusPredictor(cache=False).fit(app, profile)._predict_launch(launches[0]).details[
        "resource_sources"].get("misses") is None
