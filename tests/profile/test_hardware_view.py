"""The one typed view of a profile: figures with their intervals and sources, failures as missing figures,
PTX opcode names with dots, the architecture derived once, curves and caches cleaned."""

import pytest
from conftest import H100_PROFILE, POCL_PROFILE

from gpuprofiler.profile.file import Profile, entry, failed, load_profile
from gpuprofiler.profile.hardware import Figure, HardwareView, view


def test_measured_failed_and_missing_figures():
    hw = HardwareView(Profile({
        "launch": {"event_s": entry(3e-6, "s", "blocks", (2.9e-6, 3.2e-6)), "fixed_s": failed("s", "fit", "negative")},
        "concurrency": {"work_items": 4.0}}))
    f = hw.figure("launch.event_s")
    assert (f.value, f.interval, f.measured, f.source) == (3e-6, (2.9e-6, 3.2e-6), True, "profile launch.event_s")
    assert f.bounds() == (2.9e-6, 3.2e-6)
    bad = hw.figure("launch.fixed_s")
    assert not bad.ok and bad.source == "profile launch.fixed_s failed: negative"
    assert not hw.figure("memory.read_s").ok and hw.figure("memory.read_s").source == "profile has no memory.read_s"
    plain = hw.figure("concurrency.work_items")
    assert plain.value == 4.0 and plain.interval is None and plain.bounds() == (4.0, 4.0)
    assert bad.or_default(7.0, "default x") == Figure(7.0, "default x")
    assert f.or_default(7.0, "default x") is f
    with pytest.raises(ValueError, match="no value"):
        bad.bounds()


def test_h100_profile_view():
    hw = view(load_profile(H100_PROFILE))
    assert hw.is_nvidia_gpu and hw.kind == "gpu" and hw.backend == "cuda" and hw.arch == "sm_90"
    assert hw.compute_units.value == 132
    clock = hw.clock_hz
    assert clock.measured and clock.interval and 1.9e9 < clock.value < 2.1e9 and "clock64" in clock.source
    fma = hw.instruction("fma.rn.f32", "latency_cycles")
    assert fma.ok and 3 < fma.value < 6 and fma.source == "profile instructions.fma.rn.f32.latency_cycles"
    assert not hw.instruction("no.such.op").ok


def test_pocl_profile_view():
    hw = view(load_profile(POCL_PROFILE))
    assert not hw.is_nvidia_gpu and hw.kind == "cpu" and hw.backend == "opencl" and hw.arch is None
    assert hw.clock_hz.measured
    caches = hw.caches
    assert caches and [c.level for c in caches] == sorted(c.level for c in caches)
    assert all(c.size_bytes > 0 and c.latency_s > 0 for c in caches)
    for curve in (hw.bandwidth_curve, hw.latency_curve):
        assert len(curve) > 5 and [x for x, _ in curve] == sorted(x for x, _ in curve)
        assert all(x > 0 and y > 0 for x, y in curve)
    assert hw.figure("bandwidth.streaming_llc_bytes").ok


def test_failed_instruction_and_bad_points_are_missing():
    hw = view(Profile({
        "device": {"type": "GPU", "vendor": "NVIDIA Corporation", "clock_mhz": 1500},
        "instructions": {"add.f32": {"status": "failed", "reason": "chain does not scale",
                                     "latency_cycles": entry(4.0, "cycles", "m")}},
        "latency_curve": [{"bytes": 1024, "latency_s": 1e-9}, {"bytes": -1, "latency_s": 2e-9},
                          {"bytes": 2048, "latency_s": None}],
        "caches": [{"level": 1, "size_bytes": None, "latency_s": 1e-9}]}))
    assert not hw.instruction("add.f32", "latency_cycles").ok
    assert "chain does not scale" in hw.instruction("add.f32", "latency_cycles").source
    assert hw.latency_curve == [(1024.0, 1e-9)] and hw.caches == []
    assert hw.is_nvidia_gpu and hw.arch is None  # an NVIDIA GPU through OpenCL reports no compute capability
    assert hw.clock_hz.value == 1.5e9 and not hw.clock_hz.measured and "reported" in hw.clock_hz.source


def test_no_profile_has_no_figures():
    hw = view(None)
    assert hw.kind == "?" and hw.arch is None and not hw.is_nvidia_gpu and hw.caches == []
    assert not hw.clock_hz.ok and not hw.figure("launch.event_s").ok and hw.bandwidth_curve == []


def test_overlap_curve_is_sorted_and_drops_unusable_points():
    hw = HardwareView(Profile({"concurrency": {"overlap_curve": [
        {"ops": 64, "overlap": 2.0}, {"ops": 8, "overlap": 6.0}, {"ops": 16, "overlap": None}, {"ops": None},
        {"ops": 4096, "overlap": 1.0}]}}))
    assert hw.overlap_curve == [(8.0, 6.0), (64.0, 2.0), (4096.0, 1.0)]
    assert HardwareView(Profile({})).overlap_curve == []


def test_a_failed_latency_point_is_listed_and_never_used(tmp_path):
    """A chase below one cycle (a negative difference of two noisy times) is a failed measurement, not a value."""
    data = {"schema": "gpuprofiler.profile", "schema_version": 1, "latency_curve": [
        {"bytes": 1024, "latency_s": 1e-9}, {"bytes": 8 << 20, "latency_s": -2.7e-8, "status": "failed",
                                             "reason": "-2.73e-08 s is below one cycle"},
        {"bytes": 16 << 20, "latency_s": 5e-8}, {"bytes": 32 << 20, "latency_s": 1e-10, "status": "failed",
                                                 "reason": "1e-10 s is below one cycle"}]}
    prof = Profile(data)
    assert HardwareView(prof).latency_curve == [(1024.0, 1e-9), (float(16 << 20), 5e-8)]
    path = prof.save(tmp_path / "p.json")
    assert load_profile(path).data["failed"] == [
        {"key": "latency_curve.1", "reason": "-2.73e-08 s is below one cycle"},
        {"key": "latency_curve.3", "reason": "1e-10 s is below one cycle"}]
