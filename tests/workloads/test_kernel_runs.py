"""Every builtin spec runs, checks against numpy and is timed on the real PoCL device."""

import shutil

import pytest
from conftest import KERNELS

from gpuprofiler.errors import CheckError
from gpuprofiler.workloads.builtin import builtin_specs
from gpuprofiler.workloads.kernel import measure_spec, prepare, run_checked
from gpuprofiler.workloads.spec import load_spec


@pytest.mark.parametrize("path", builtin_specs(), ids=lambda p: p.stem)
def test_builtin_spec_checks_and_times(pocl, quick_policy, path):
    spec = load_spec(path)
    [rec] = measure_spec(pocl, spec, [spec.small[0]], quick_policy)
    assert rec["checked"] is True
    assert rec["samples"] >= 5 and len(rec["samples_s"]) == rec["samples"]
    assert rec["median_s"] > 0 and rec["ci_low_s"] <= rec["median_s"] <= rec["ci_high_s"]
    assert rec["min_s"] <= rec["median_s"]
    # device event time can never exceed the host round trip that contains it
    assert rec["median_s"] <= rec["host_median_s"] * 1.05


def test_wrong_kernel_is_caught(pocl, tmp_path):
    for f in KERNELS.glob("vadd.*"):
        shutil.copy(f, tmp_path / f.name)
    cl = tmp_path / "vadd.cl"
    cl.write_text(cl.read_text().replace("a[i] + b[i]", "a[i] - b[i]"))
    with pytest.raises(CheckError, match="differs"):
        run_checked(pocl, prepare(pocl, load_spec(tmp_path / "vadd.toml"), 4096))


def test_unwritten_output_is_caught_by_poison(pocl, tmp_path):
    for f in KERNELS.glob("vadd.*"):
        shutil.copy(f, tmp_path / f.name)
    cl = tmp_path / "vadd.cl"
    cl.write_text(cl.read_text().replace("if (i < n)", "if (i < n / 2)"))
    with pytest.raises(CheckError, match=r"differs.*in 2048 of 4096"):
        run_checked(pocl, prepare(pocl, load_spec(tmp_path / "vadd.toml"), 4096))


def test_time_scales_with_work(pocl, quick_policy):
    spec = load_spec(KERNELS / "copy.toml")
    small, big = measure_spec(pocl, spec, [1 << 16, 1 << 22], quick_policy, check=False)
    # 64x the data: generous sanity bound, not a timing assertion
    assert big["median_s"] > 4 * small["median_s"]


def test_records_make_a_tidy_table(pocl, quick_policy):
    from gpuprofiler.measure.storage import to_frame

    spec = load_spec(KERNELS / "copy.toml")
    records = measure_spec(pocl, spec, [4096, 8192], quick_policy, check=False)
    frame = to_frame(records)
    assert list(frame.columns) == ["kernel", "phase", "size", "rep", "seconds", "device"]
    assert len(frame) == sum(r["samples"] for r in records)
    assert set(frame["size"]) == {4096, 8192} and (frame["seconds"] > 0).all()


def test_placements_time_each_block_on_new_buffers(pocl, quick_policy):
    """Three placements: three blocks of samples, each on buffers allocated afresh that hold the spec's inputs."""
    import numpy as np

    from gpuprofiler.workloads.kernel import reallocate

    spec = load_spec(KERNELS / "vadd.toml")
    one = prepare(pocl, spec, 4096)
    before = dict(one.buffers)
    reallocate(pocl, one)
    assert set(one.buffers) == set(before) and all(one.buffers[k] is not before[k] for k in before)
    for name, buf in one.buffers.items():
        back = np.empty_like(one.host[name])
        pocl.from_device(buf, back)
        assert np.array_equal(back, one.host[name])
    assert run_checked(pocl, one) <= 1.0
    policy = quick_policy.but(placements=3, min_samples=6)
    [rec] = measure_spec(pocl, spec, [4096], policy)
    assert rec["placements"] == 3 and rec["checked"] is True
    assert rec["samples"] >= 6 and len(rec["samples_s"]) == rec["samples"]
    [single] = measure_spec(pocl, spec, [4096], quick_policy)
    assert single["placements"] == 1


def test_one_placement_where_a_second_copy_would_not_fit(pocl, quick_policy, monkeypatch):
    import gpuprofiler.workloads.kernel as kernel_mod

    spec = load_spec(KERNELS / "vadd.toml")
    need = spec.instantiate(4096).array_bytes
    monkeypatch.setattr(kernel_mod, "host_available_bytes", lambda: 3 * need)  # room: 1.5x the buffers
    [rec] = measure_spec(pocl, spec, [4096], quick_policy.but(placements=3))
    assert rec["placements"] == 1 and rec["samples"] >= 5


def test_no_more_placements_than_the_sampling_budget_pays_for_in_uploads(pocl, quick_policy):
    """A new placement costs another upload of the buffers: with a budget shorter than one upload, one block."""
    spec = load_spec(KERNELS / "vadd.toml")
    assert prepare(pocl, spec, 4096).upload_s > 0
    [rec] = measure_spec(pocl, spec, [4096], quick_policy.but(placements=3, budget_s=1e-7))
    assert rec["placements"] == 1 and rec["samples"] >= 5


def test_a_fixed_count_policy_has_no_budget_to_split(pocl):
    """fixed(n) with placements: an infinite budget, which no upload bounds; every placement still taken."""
    from gpuprofiler.measure.policy import fixed

    [rec] = measure_spec(pocl, load_spec(KERNELS / "vadd.toml"), [4096], fixed(4, warmup=1).but(placements=3))
    assert rec["placements"] == 3 and rec["samples"] >= 4
