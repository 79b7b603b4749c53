"""Hardware-aware small sizes follow the kernel's work law and never time trivially small launches."""

import pytest
from conftest import POCL_PROFILE
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpuprofiler.models.fractal.regimes import LAUNCH_FLOOR, hardware_sizes, launch_overhead, run_cost
from gpuprofiler.profile.file import Profile, entry, load_profile
from gpuprofiler.workloads.spec import load_spec

STENCIL7 = """
name = "stencil7"
description = "7-point stencil on an n x n x n grid"
kernel = "stencil7"
size = "n"
small = [8, 16]
target = [128]

[source]
opencl = "stencil7.cl"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[[args]]
name = "u"
dtype = "float32"
shape = ["n", "n", "n"]
init = "random"

[[args]]
name = "out"
dtype = "float32"
shape = ["n", "n", "n"]
output = true

[launch]
global = ["n", "n", "n"]
local = [8, 8, 4]

[work]
flops = "7 * n * n * n"
bytes = "8 * n * n * n"
"""

KERNEL = """__kernel void stencil7(int n, __global const float *u, __global float *out) {
    int x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
    if (x > 0 && y > 0 && z > 0 && x < n - 1 && y < n - 1 && z < n - 1) {
        int i = (z * n + y) * n + x;
        out[i] = u[i] + u[i - 1] + u[i + 1] + u[i - n] + u[i + n] + u[i - n * n] + u[i + n * n];
    }
}
"""


def test_a_3d_kernel_is_sampled_by_its_work_not_its_side(tmp_path):
    (tmp_path / "stencil7.cl").write_text(KERNEL)
    (tmp_path / "stencil7.toml").write_text(STENCIL7)
    spec = load_spec(tmp_path / "stencil7.toml")
    prof = load_profile(POCL_PROFILE)
    cost = run_cost(spec, prof)
    assert cost(64) == pytest.approx(cost(128) / 8, rel=0.01)  # n^3: half the side is an eighth of the work
    sizes, _ = hardware_sizes(128, None, prof, cost=cost)
    # the old rule (an eighth of the side) took 1..16, a 512th of the target's work; now the largest is half the side
    assert max(sizes) == 64 and len(sizes) >= 4 and all(0 < s < 128 for s in sizes)
    assert cost(max(sizes)) / cost(min(sizes)) == pytest.approx(16, rel=0.2)
    launch = launch_overhead(prof)
    assert cost(128) > LAUNCH_FLOOR * launch and all(cost(s) >= LAUNCH_FLOOR * launch for s in sizes)


def test_no_small_size_runs_under_fifty_launch_overheads():
    prof = Profile({"launch": {"event_s": entry(1e-3, "s", "test")}})
    cost = lambda n: 1e-9 * n ** 3  # noqa: E731  1 s at the target 1000
    sizes, notes = hardware_sizes(1000, None, prof, cost=cost)
    assert all(cost(s) >= 50e-3 for s in sizes) and max(sizes) < 1000 and len(sizes) >= 4
    assert notes and "50 launch overheads" in notes[0]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([1, 2, 3]), st.floats(1e-12, 1e-6), st.floats(1e-7, 1e-3), st.integers(64, 10 ** 7))
@example(1, 1e-12, 1e-7, 5_000_000)  # the target costs exactly the floor: no smaller size can reach it
def test_the_floor_holds_for_any_work_law(power, scale, launch_s, target):
    prof = Profile({"launch": {"event_s": entry(launch_s, "s", "test")}})

    def cost(n):
        return scale * n ** power

    sizes, notes = hardware_sizes(target, None, prof, cost=cost)
    assert sizes and all(1 <= s < target for s in sizes) and sizes == sorted(set(sizes))
    if cost(target - 1) >= LAUNCH_FLOOR * launch_s:  # some size below the target reaches the floor
        assert all(cost(s) >= LAUNCH_FLOOR * launch_s for s in sizes)
    elif cost(target) >= LAUNCH_FLOOR * launch_s:  # none can: said so
        assert any("barely" in n for n in notes)
    if cost(target) >= 8 * 16 * LAUNCH_FLOOR * launch_s:  # room for the whole spread: an 8th of the target's cost
        assert cost(max(sizes)) <= cost(target) / 8 * 1.0001 and cost(max(sizes) + 1) > cost(target) / 8


def test_sizes_a_spec_cannot_take_cost_nothing(tmp_path):
    (tmp_path / "stencil7.cl").write_text(KERNEL)
    # a work expression that fails below n = 4 (log of a negative number) is passed over, not an error
    (tmp_path / "stencil7.toml").write_text(STENCIL7.replace('bytes = "8 * n * n * n"',
                                                             'bytes = "8 * n * n * n * log2(n - 3)"'))
    spec = load_spec(tmp_path / "stencil7.toml")
    cost = run_cost(spec, load_profile(POCL_PROFILE))
    assert cost(2) == 0.0 and cost(64) > 0
    sizes, _ = hardware_sizes(128, None, load_profile(POCL_PROFILE), cost=cost)
    assert min(sizes) > 3 and max(sizes) < 128
