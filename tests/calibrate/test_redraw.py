"""A calibration's memory sections drawn again: the comparison of two draws (exact and property-based), the faster
draw of each section kept whole, a failed second draw leaving the first, and a real second draw on PoCL."""

import copy
import json
import math

import pytest
from conftest import FIXTURES, POCL_PROFILE
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.calibrate import redraw
from gpuprofiler.errors import DeviceError
from gpuprofiler.profile.file import Profile, load_profile


def entry(value, unit, status="ok"):
    return {"value": value, "unit": unit, "status": status, "interval": [value * 0.9, value * 1.1]}


def test_speeds_of_two_draws_compared_figure_by_figure():
    first = {"read_Bps": entry(20e9, "B/s"), "gather_s": entry(8e-9, "s"), "streams": entry(16.0, "streams"),
             "curve": [{"bytes": 1024, "Bps": 50e9}, {"bytes": 2048, "Bps": 40e9}],
             "points": [{"n": 1, "read_s": 2e-9, "read_s_ci": [1e-9, 3e-9], "ratio": 1.0}]}
    second = {"read_Bps": entry(40e9, "B/s"), "gather_s": entry(4e-9, "s"), "streams": entry(8.0, "streams"),
              "curve": [{"bytes": 1024, "Bps": 25e9}, {"bytes": 2048, "Bps": 40e9}],
              "points": [{"n": 1, "read_s": 1e-9, "read_s_ci": [0.5e-9, 9e-9], "ratio": 7.0}]}
    logs = redraw.speed_logs(first, second)
    # twice the bandwidth, half the gather, half the curve's first point, the second the same, half the read time;
    # the stream count (not a speed), the intervals and the ratio are left out
    assert sorted(round(v / math.log(2), 9) for v in logs) == [-1, 0, 1, 1, 1]
    score, count = redraw.compare(first, second)
    assert count == 5 and score == pytest.approx(2 * math.log(2) / 5)


def test_failed_figures_and_points_of_other_sizes_are_not_compared():
    first = {"a": entry(1e-9, "s"), "b": entry(1e-9, "s", "failed"), "curve": [{"bytes": 1, "Bps": 1.0}]}
    second = {"a": entry(2e-9, "s"), "b": entry(1e-12, "s"), "curve": [{"bytes": 2, "Bps": 9.0}]}
    assert redraw.compare(first, second) == (pytest.approx(-math.log(2)), 1)
    assert redraw.compare({"x": entry(1.0, "s")}, {"y": entry(1.0, "s")}) == (0.0, 0)


speeds = st.floats(min_value=1e-12, max_value=1e12, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(speeds, speeds, st.sampled_from(["s", "B/s"])), min_size=1, max_size=12),
       st.floats(min_value=0.1, max_value=10))
def test_comparison_is_antisymmetric_and_scales_with_speed(pairs, factor):
    a = {f"f{i}": entry(x, unit) for i, (x, _, unit) in enumerate(pairs)}
    b = {f"f{i}": entry(y, unit) for i, (_, y, unit) in enumerate(pairs)}
    ab, n = redraw.compare(a, b)
    ba, _ = redraw.compare(b, a)
    assert n == len(pairs) and ab == pytest.approx(-ba, abs=1e-9)
    assert redraw.compare(a, a) == (0.0, len(pairs))
    # every figure of the second draw `factor` times faster: the score is log(factor)
    faster = {k: entry(v["value"] * factor if v["unit"] == "B/s" else v["value"] / factor, v["unit"])
              for k, v in a.items()}
    assert redraw.compare(a, faster)[0] == pytest.approx(math.log(factor), abs=1e-9)


def _scaled(node, factor):
    """A profile node with every speed ``factor`` times faster (times divided, bandwidths multiplied)."""
    if isinstance(node, dict):
        if "value" in node and node.get("unit") in ("s", "B/s") and isinstance(node.get("value"), (int, float)):
            return dict(node, value=node["value"] * factor if node["unit"] == "B/s" else node["value"] / factor)
        return {k: v if k.endswith(("_ci", "interval")) else
                (v / factor if isinstance(v, float) and (k.endswith("_s") or k == "seconds") else
                 v * factor if isinstance(v, float) and k == "Bps" else _scaled(v, factor)) for k, v in node.items()}
    if isinstance(node, list):
        return [_scaled(v, factor) for v in node]
    return node


ZEN4 = FIXTURES / "profiles" / "pocl_zen4.json"  # a profile with every curve the sections write today


def _fake_calibrate(factor, calls):
    """A calibration that writes the fixture profile's figures of the sections it is asked for, each figure
    ``factor(section, key)`` times faster."""
    full = json.loads(ZEN4.read_text())

    def calibrate(out, quick=False, only=(), resume=None):
        calls.append((out, quick, tuple(only), set(resume.data)))
        data = copy.deepcopy(resume.data)
        for s in only:
            for key, node in redraw.section_nodes(full, s).items():
                redraw._set(data, key, copy.deepcopy(_scaled(node, factor(s, key))))
        data["sections_done"] = sorted(set(data["sections_done"]) | set(only))
        data["section_seconds"] = {s: 1.0 for s in only}
        made = Profile(data)
        made.save(out)
        return made

    return calibrate


def test_each_microbenchmark_kept_from_its_faster_draw(tmp_path):
    path = tmp_path / "profile.json"
    profile = Profile(json.loads(ZEN4.read_text()))
    profile.data[redraw.PLANNED] = True
    del profile.data["bandwidth"]["gather_s"]  # a figure only the second draw has is taken from it
    profile.save(path)
    before = copy.deepcopy(profile.data)
    assert redraw.planned(profile)
    calls, said = [], []
    # the second draw: every bandwidth figure 1.25x faster, the memory section 0.8x but its overlap curve 1.5x
    factors = {"latency": 1.0, "memory": 0.8, "bandwidth": 1.25}

    def factor(section, key):
        return 1.5 if key == "concurrency.overlap_curve" else factors[section]

    got = redraw.redraw(_fake_calibrate(factor, calls), profile, path, True, said.append)
    [(out, quick, only, resumed_keys)] = calls
    assert only == ("latency", "memory", "bandwidth") and quick and not out.exists()  # the scratch file is removed
    assert not {"bandwidth", "concurrency", "caches", "latency_curve", "tlb"} & resumed_keys
    assert {"launch", "transfer", "instructions", "clock"} <= resumed_keys  # what is not drawn again is kept
    units = got.data["redraws"][0]["units"]
    second = {u for u, r in units.items() if r["kept"] == "second"}
    assert second == {"streams", "working-set curve", "stream curve", "bandwidth.gather_s", "overlap curve"}
    assert set(units) - second == {"latency curve", "tlb", "local_memory", "memory", "concurrency", "loop-free curve"}
    assert units["bandwidth.gather_s"]["figures"] == 0 and got.data["bandwidth"]["gather_s"]["status"] == "ok"
    assert units["streams"]["mean_log_speed_ratio"] == pytest.approx(math.log(1.25))
    assert units["memory"]["mean_log_speed_ratio"] == pytest.approx(math.log(0.8))
    assert units["latency curve"]["mean_log_speed_ratio"] == 0.0 and units["latency curve"]["figures"] > 10
    assert got.data["bandwidth"]["read_Bps"]["value"] == pytest.approx(before["bandwidth"]["read_Bps"]["value"] * 1.25)
    assert got.data["bandwidth"]["working_set_curve"][0]["Bps"] == pytest.approx(
        before["bandwidth"]["working_set_curve"][0]["Bps"] * 1.25)
    overlap = got.data["concurrency"]["overlap_curve"]
    assert [p["seconds"] for p in overlap] == pytest.approx([p["seconds"] / 1.5 for p in
                                                           before["concurrency"]["overlap_curve"]])
    assert got.data["concurrency"]["loopfree_curve"] == before["concurrency"]["loopfree_curve"]
    assert got.data["caches"] == before["caches"] and got.data["memory"] == before["memory"]
    assert not redraw.planned(got) and redraw.PLANNED not in load_profile(path).data
    assert load_profile(path).data["redraws"] == got.data["redraws"]
    assert any("working-set curve: second (1.25x)" in m for m in said)
    line = redraw.describe(got)
    assert "latency, memory, bandwidth sections were drawn twice" in line
    assert f"5 of {len(units)} from the second" in line and "bandwidth.gather_s (only the second measured it)" in line
    assert "overlap curve (1.50x faster)" in line
    assert redraw.describe(Profile(before)) is None


def test_section_keys_and_units():
    data = json.loads(ZEN4.read_text())
    memory = redraw.section_paths(data, "memory")
    assert "memory.dram_latency_s" not in memory and "memory.read_s" in memory and "concurrency.overlap_curve" in memory
    assert "memory.dram_latency_s" in redraw.section_paths(data, "latency")
    assert redraw.unit_of("memory.dram_latency_s") == "latency curve" and redraw.unit_of("memory.read_s") == "memory"
    assert redraw.unit_of("bandwidth.streaming_llc_bytes") == "working-set curve"
    assert redraw.unit_of("bandwidth.gather_s") == "bandwidth.gather_s"
    assert redraw.unit_of("concurrency.overlap_method") == redraw.unit_of("concurrency.overlap_curve")
    every = [p for s in redraw.REDRAWN for p in redraw.section_paths(data, s)]
    assert len(every) == len(set(every))  # no key in two sections


def test_a_failed_second_draw_leaves_the_first(tmp_path):
    path = tmp_path / "profile.json"
    profile = Profile(json.loads(POCL_PROFILE.read_text()) | {redraw.PLANNED: True})
    before = copy.deepcopy(profile.data)

    def broken(out, **kw):
        out.write_text("{}")
        raise DeviceError("the device went away")

    got = redraw.redraw(broken, profile, path, True)
    assert "device went away" in got.data["redraws"][0]["error"] and not got.data["redraws"][0]["sections"]
    assert {k: v for k, v in got.data.items() if k not in ("redraws", redraw.PLANNED, "failed")} == \
        {k: v for k, v in before.items() if k not in (redraw.PLANNED, "failed")}
    assert not (tmp_path / "profile.second-draw.json").exists() and not redraw.planned(got)
    assert "second draw failed (the device went away)" in redraw.describe(got)


@pytest.mark.pocl
def test_a_real_second_draw_of_the_memory_section(pocl, tmp_path):
    from gpuprofiler.calibrate.driver import calibrate

    path = tmp_path / "profile.json"
    first = calibrate(pocl, path, quick=True, only=("memory",))
    before = copy.deepcopy(first.data)
    got = redraw.redraw(lambda out, **kw: calibrate(pocl, out, **kw), first, path, True)
    [record] = got.data["redraws"]
    assert list(record["sections"]) == ["memory"] and record["sections"]["memory"]["seconds"] > 0
    units = record["units"]
    assert {"memory", "concurrency", "overlap curve", "loop-free curve", "guarded stream"} <= set(units)
    for unit, r in units.items():
        assert r["figures"] > 0 and math.isfinite(r["mean_log_speed_ratio"]), unit
        assert r["kept"] == ("second" if r["mean_log_speed_ratio"] > 0 else "first")
    kept = load_profile(path).data
    for unit, r in units.items():  # each unit's figures are one draw's, the first's where it was not faster
        if r["kept"] == "first":
            assert all(redraw._get(kept, k) == redraw._get(before, k) for k in redraw.section_paths(before, "memory")
                       if redraw.unit_of(k) == unit)
    assert kept["concurrency"]["guarded_item_s"]["status"] == "ok" and kept["clock"] == before["clock"]


def test_validate_draws_again_only_the_calibration_it_made(tmp_path, monkeypatch):
    """``validate`` without a profile calibrates, and has that calibration's memory sections drawn again once its
    measuring is over; a given profile, or its own already drawn twice (a rerun), is used as it is."""
    import argparse

    from gpuprofiler.cli import validate as cli
    from gpuprofiler.device.base import DeviceInfo
    from gpuprofiler.validate import suite

    monkeypatch.setenv("GPUPROFILER_RESULTS", str(tmp_path / "results"))
    seen = []

    def fake_run(where, name, outdir, profile, *a, redraw=None, **kw):
        seen.append(redraw)
        if redraw is not None:
            redraw(profile)
        return []

    monkeypatch.setattr(suite, "run", fake_run)
    monkeypatch.setattr(cli, "_write", lambda *a, **kw: 0)
    calls = []
    faster = _fake_calibrate(lambda section, key: 1.1, calls)

    def calibrate(out, quick=False, only=(), resume=None):
        if resume is None:  # the run's first calibration
            calls.append((out, quick, "first"))
            out.write_text(POCL_PROFILE.read_text())
            return load_profile(out)
        return faster(out, quick=quick, only=only, resume=resume)

    device = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d",
                        platform="Portable Computing Language")
    args = argparse.Namespace(profile=None, fresh=False, quick=True, suite="builtin", items=None, spec_sizes=False)
    out = tmp_path / "out"
    assert cli._measure(args, [], out, None, device, device.id, calibrate, lambda: None) == 0
    assert seen[0] is not None and [c[2] for c in calls] == ["first", ("latency", "memory", "bandwidth")]
    kept = load_profile(out / "profile.json").data
    assert {r["kept"] for r in kept["redraws"][0]["units"].values() if r["figures"]} == {"second"}
    assert cli._measure(args, [], out, None, device, device.id, calibrate, lambda: None) == 0  # a rerun
    given = argparse.Namespace(**{**vars(args), "profile": str(POCL_PROFILE)})
    assert cli._measure(given, [], tmp_path / "other", None, device, device.id, calibrate, lambda: None) == 0
    assert seen[1:] == [None, None] and len(calls) == 2
