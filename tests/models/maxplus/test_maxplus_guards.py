"""Max-plus on a CPU whose OpenCL compiler runs a region a work-item at a time once its loads and stores are under a
condition on the work-item (``if (i < n)``), and multiply-adds the compiler contracted from ``a * b + c``."""

import copy
import math

import pytest
from conftest import POCL_PROFILE
from test_maxplus_lanes import REDUCE, SAXPY, VADD, contiguous, kernel_of

from gpuprofiler.models.maxplus.models import parameters, predict, vector_lanes
from gpuprofiler.profile.file import Profile, entry, load_profile
from gpuprofiler.profile.hardware import SCALAR_GUARD_RATIO, view

POCL = load_profile(POCL_PROFILE)
GUARDED_S, SKIP_S = 1.3e-9, 1.0e-9


def with_guards(guarded=GUARDED_S, plain=0.35e-9, skip=SKIP_S, profile=None):
    """The contiguous PoCL profile with the guarded-stream figures of ``calibrate``'s concurrency section."""
    data = copy.deepcopy((profile or contiguous()).data)
    conc = data["concurrency"]
    conc["guarded_item_s"] = entry(guarded, "s", "test")
    conc["unguarded_item_s"] = entry(plain, "s", "test")
    conc["guard_skip_item_s"] = entry(skip, "s", "test")
    return Profile(data)


GUARDED_VADD = ("if (i < n) c[i] = a[i] + b[i];", VADD[1])


def test_the_builder_marks_a_guarded_access_with_the_share_of_work_items_that_take_it():
    plain = kernel_of(*VADD)
    assert [g.guarded for g in plain.fragments if g.outputs] == [False]
    guarded = kernel_of(*GUARDED_VADD)
    assert [(g.guarded, g.guard_share) for g in guarded.fragments if g.outputs] == [(True, 1.0)]
    half = kernel_of("if (i < n / 2) c[i] = a[i];", VADD[1])
    (g,) = [g for g in half.fragments if g.outputs]
    assert g.guarded and g.guard_share == pytest.approx(0.5, abs=0.1)
    # a condition on the thread index inside an expression is a select, not a guard
    select = kernel_of("c[i] = i < n ? a[i] : 0.0f;", VADD[1])
    assert not any(g.guarded for g in select.fragments)
    reduce = [g for g in kernel_of(*REDUCE).fragments if g.outputs]
    assert [g.guarded for g in reduce] == [False] + [True] * 9
    assert reduce[-1].guard_share == pytest.approx(1 / 256, rel=0.5)


@pytest.mark.parametrize("guarded,plain,scalar", [
    (1.3e-9, 0.35e-9, True),                              # PoCL 3.0 (AVX2) on a Zen 3 VM
    (0.36e-9, 0.35e-9, False),                            # a compiler that masks the lanes (AVX-512)
    (SCALAR_GUARD_RATIO * 0.35e-9, 0.35e-9, False),       # at the ratio: still lanes
])
def test_a_guard_takes_a_region_out_of_lanes_only_where_the_guarded_stream_ran_scalar(guarded, plain, scalar):
    hw = view(with_guards(guarded, plain))
    assert (hw.guarded_item_s is not None) == scalar
    kernel = kernel_of(*GUARDED_VADD)
    (g,) = [g for g in kernel.fragments if g.outputs]
    assert vector_lanes(g) and vector_lanes(g, hw) == (not scalar)
    # an unguarded region stays in lanes either way
    (u,) = [g for g in kernel_of(*VADD).fragments if g.outputs]
    assert vector_lanes(u, hw)
    assert view(contiguous()).guarded_item_s is None  # not measured: as before


def _chains(kernel, profile):
    p = predict(kernel, parameters(profile, kernel), kernel.global_size[0], kernel.global_size[0], "overlap")
    return p


def test_a_guarded_stream_costs_the_guarded_figure_per_work_item_on_each_core():
    n = 1 << 20
    kernel = kernel_of(*GUARDED_VADD, n=n)
    scalar = with_guards()
    got = _chains(kernel, scalar)
    cores = view(scalar).compute_units.value
    assert got.details["bounds_s"]["latency"] >= n / cores * GUARDED_S * (1 - 1e-9)
    # a compiler that masks its lanes: the loop-free curve's floor, far below
    lanes = _chains(kernel, with_guards(guarded=0.36e-9))
    assert lanes.details["bounds_s"]["latency"] < 0.5 * got.details["bounds_s"]["latency"]


def test_a_guarded_stream_past_the_last_level_cache_costs_the_far_figure():
    """A launch whose buffers together pass the last-level cache (16 MiB here) streams them from DRAM:
    its guarded work-items cost the guarded stream measured past the cache; a launch whose buffers fit, the near
    figure; a profile without the far figure, the near one at any size."""
    far = copy.deepcopy(with_guards().data)
    far["concurrency"]["guarded_far_item_s"] = entry(3 * GUARDED_S, "s", "test")
    far["bandwidth"]["streaming_llc_bytes"] = entry(16 << 20, "B", "test")
    far = Profile(far)
    cores = view(far).compute_units.value
    for n, per in ((1 << 18, GUARDED_S), (1 << 21, 3 * GUARDED_S)):  # 5 and 40 MiB of buffers
        kernel = kernel_of(*GUARDED_VADD, n=n)
        (frag,) = _chains(kernel, far).details["cpu_chains"]["fragments"]
        assert frag["item_s"] == pytest.approx(per, rel=1e-12)
        (near,) = _chains(kernel, with_guards()).details["cpu_chains"]["fragments"]
        assert near["item_s"] == pytest.approx(GUARDED_S, rel=1e-12)
        assert _chains(kernel, far).details["bounds_s"]["latency"] >= n / cores * per * (1 - 1e-9)


def test_a_region_out_of_lanes_for_another_reason_keeps_its_own_price():
    """The tree reduction's in-place steps run a work-item at a time whatever the guard: the guarded figure does
    not apply to them (their inactive work-items do not load, add and store)."""
    kernel = kernel_of(*REDUCE)
    before = _chains(kernel, contiguous())
    after = _chains(kernel, with_guards())
    steps = lambda p: [f["item_s"] for f in p.details["cpu_chains"]["fragments"][1:-1]]  # noqa: E731
    assert steps(after) == pytest.approx(steps(before))
    # its last step (work-item 0 stores the sum) leaves the lanes: the share that stores, the rest skipping
    last = after.details["cpu_chains"]["fragments"][-1]
    assert not last["lanes"] and last["item_s"] >= (GUARDED_S / 256 + SKIP_S * 255 / 256) * (1 - 1e-9)


def _with_throughputs(fma, mul, add):
    data = copy.deepcopy(contiguous().data)
    for key, value in (("float_fma", fma), ("float_mul", mul), ("float_add", add)):
        data["instructions"][key]["throughput_ops_per_s"] = entry(value, "op/s", "test")
    return Profile(data)


def test_a_contracted_multiply_add_costs_at_most_a_multiply_and_an_add():
    """PoCL 3.0's fma() ran at 0.88 Gop/s where adds and multiplies ran at 9.1: ``2.0f * x[i] + y[i]`` is
    contracted to the hardware's FMA or split, never the library call, so its issue cost is bounded by the pair."""
    kernel = kernel_of(*SAXPY)
    slow = parameters(_with_throughputs(0.88e9, 9.1e9, 9.1e9), kernel)
    theta = [k for k in slow.values if k.startswith("theta")]
    assert len(theta) == 1
    assert slow.values[theta[0]] == pytest.approx(1 / 9.1e9 + 1 / 9.1e9)
    assert "contracted" in slow.sources[theta[0]]
    fast = parameters(_with_throughputs(7.8e9, 10.4e9, 10.4e9), kernel)
    assert fast.values[theta[0]] == pytest.approx(1 / 7.8e9)  # the FMA's own, faster than the pair
    # an explicit fma() may be the library's: its measured throughput stands
    explicit = kernel_of("y[i] = fma(2.0f, x[i], y[i]);", SAXPY[1])
    got = parameters(_with_throughputs(0.88e9, 9.1e9, 9.1e9), explicit)
    name = [k for k in got.values if k.startswith("theta")][0]
    assert got.values[name] == pytest.approx(1 / 0.88e9)
    assert math.isfinite(got.values[name])
