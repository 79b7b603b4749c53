"""A calibration's gathered reads drawn again once validate's measuring is over: the two draws' fastest runs pooled
(exact), a failed second draw leaving the first, the rest of the bandwidth section the first draw's, and validate
drawing again only the calibration it made."""

import copy
import json

import pytest
from conftest import POCL_PROFILE

from gpuprofiler.calibrate import regather
from gpuprofiler.errors import DeviceError
from gpuprofiler.profile.file import Profile, entry, load_profile


def _gathers(far, near, cached, reads=1000, share=0.5, llc_share=0.75):
    """A bandwidth node's two gathered-read figures from these fastest runs (seconds)."""
    g = entry((far - near) / (reads * share), "s", "gather", ((far - near) / (reads * share) * 0.9, (far - near)
                                                                / (reads * share) * 1.2),
              far_s=far, near_s=near, reads=reads, far_blocks_s=[far, far * 1.1])
    c = entry((cached - near) / (reads * llc_share), "s", "cached gather",
              ((cached - near) / (reads * llc_share) * 0.8, (cached - near) / (reads * llc_share) * 1.5),
              cached_s=cached, near_s=near, reads=reads)
    return {"gather_s": g, "gather_llc_s": c, "read_Bps": entry(30e9, "B/s", "read")}


def test_the_fastest_runs_of_both_draws_are_pooled_per_read_as_the_first_counts_them():
    first, second = _gathers(30e-6, 1e-6, 5e-6), _gathers(20e-6, 2e-6, 3e-6)
    second["read_Bps"] = entry(60e9, "B/s", "read")
    got, kept = regather.pooled(first, second)
    assert got["gather_s"]["value"] == pytest.approx((20e-6 - 1e-6) / 500, rel=1e-12)
    assert got["gather_llc_s"]["value"] == pytest.approx((3e-6 - 1e-6) / 750, rel=1e-12)
    assert got["gather_s"]["far_s"] == 20e-6 and got["gather_s"]["near_s"] == 1e-6
    assert got["gather_llc_s"]["cached_s"] == 3e-6 and got["gather_s"]["far_blocks_s"] == pytest.approx([30e-6, 33e-6, 20e-6, 22e-6])
    assert kept == {"gather_s": "far from the second, near from the first",
                    "gather_llc_s": "far from the second, near from the first"}
    for key in regather.FIGURES:
        lo, hi = got[key]["interval"]
        assert lo <= got[key]["value"] <= hi and "pooled with a second draw" in got[key]["method"]
    assert got["read_Bps"] == first["read_Bps"]  # only the gathers are pooled
    # the same draw twice: the same figures
    same, _ = regather.pooled(first, copy.deepcopy(first))
    assert same["gather_s"]["value"] == pytest.approx(first["gather_s"]["value"], rel=1e-12)
    # a figure only one draw has (or a failed one) is taken from that draw
    failed = copy.deepcopy(second)
    failed["gather_llc_s"] = {"value": None, "unit": "s", "status": "failed", "method": "x", "reason": "y"}
    got, kept = regather.pooled(first, failed)
    assert got["gather_llc_s"] == first["gather_llc_s"] and kept["gather_llc_s"] == "first"
    del first["gather_llc_s"]
    got, kept = regather.pooled(first, second)
    assert got["gather_llc_s"] == second["gather_llc_s"] and kept["gather_llc_s"] == "second"


def _fake_calibrate(node, calls, streams=None):
    """A calibration of the memory and bandwidth sections that writes ``node`` as the bandwidth figures and
    ``streams`` (where given) as the concurrency ones."""
    def calibrate(out, quick=False, only=(), resume=None):
        calls.append((out, quick, tuple(only), set(resume.data)))
        data = copy.deepcopy(resume.data)
        data["bandwidth"] = copy.deepcopy(node)
        if streams is not None:
            data["concurrency"] = copy.deepcopy(streams)
        data["sections_done"] = sorted(set(data["sections_done"]) | set(only))
        made = Profile(data)
        made.save(out)
        return made
    return calibrate


def _profile():
    data = json.loads(POCL_PROFILE.read_text())
    data["bandwidth"].update(_gathers(30e-6, 1e-6, 5e-6))
    data["concurrency"].update({k: entry(v, "s", "a stream") for k, v in (
        ("guarded_item_s", 1.0e-9), ("guarded_far_item_s", 1.2e-9))})
    return Profile(data | {regather.PLANNED: True})


def test_the_gathers_are_drawn_again_and_pooled(tmp_path):
    path = tmp_path / "profile.json"
    profile = _profile()
    before = copy.deepcopy(profile.data)
    assert regather.planned(profile)
    calls, said = [], []
    second = copy.deepcopy(before["bandwidth"]) | _gathers(20e-6, 2e-6, 3e-6)
    second["read_Bps"] = entry(1e9, "B/s", "a slow draw")
    streams = copy.deepcopy(before["concurrency"])
    guarded, far = (before["concurrency"][k]["value"] for k in ("guarded_item_s", "guarded_far_item_s"))
    streams["guarded_item_s"] = entry(guarded / 2, "s", "a faster draw")
    streams["guarded_far_item_s"] = entry(far * 2, "s", "a slower draw")
    streams["resident_capacity"] = "the second draw's"
    got = regather.regather(_fake_calibrate(second, calls, streams), profile, path, True, said.append)
    [(out, quick, only, resumed)] = calls
    assert only == ("memory", "bandwidth") and quick and not out.exists()  # the scratch file is removed
    assert "bandwidth" not in resumed and {"launch", "caches", "concurrency"} <= resumed
    conc = got.data["concurrency"]
    assert conc["guarded_item_s"]["value"] == guarded / 2 and conc["guarded_item_s"]["draws_s"] == [guarded,
                                                                                                     guarded / 2]
    assert conc["guarded_far_item_s"]["value"] == far and conc["guarded_far_item_s"]["draws_s"] == [far, far * 2]
    assert "the faster of two draws" in conc["guarded_far_item_s"]["method"]
    assert conc["resident_capacity"] == before["concurrency"]["resident_capacity"]  # only the streams are pooled
    kept = got.data["gather_draws"][0]["kept"]
    assert kept["guarded_item_s"] == "second" and kept["guarded_far_item_s"] == "first"
    assert got.data["gather_draws"][0]["values_s"]["guarded_far_item_s"] == [far, far * 2]
    assert got.data["gather_draws"][0]["values_s"]["gather_s"] == [before["bandwidth"]["gather_s"]["value"],
                                                                   second["gather_s"]["value"]]
    assert got.data["bandwidth"]["gather_s"]["value"] == pytest.approx(19e-6 / 500, rel=1e-12)
    assert got.data["bandwidth"]["read_Bps"] == before["bandwidth"]["read_Bps"]  # the first draw's
    left = ("bandwidth", "concurrency", "gather_draws", regather.PLANNED)
    assert {k: v for k, v in got.data.items() if k not in left} == {k: v for k, v in before.items() if k not in left}
    assert not regather.planned(got) and regather.PLANNED not in load_profile(path).data
    assert load_profile(path).data["gather_draws"] == got.data["gather_draws"]
    assert any("gather_s: far from the second" in m for m in said)
    line = regather.describe(got)
    assert "gathered reads and streams were drawn twice" in line and "gather_llc_s: far from the second" in line
    assert regather.describe(Profile(before)) is None


def test_a_failed_second_draw_leaves_the_first(tmp_path):
    path = tmp_path / "profile.json"
    profile = _profile()
    before = copy.deepcopy(profile.data)

    def broken(out, **kw):
        out.write_text("{}")
        raise DeviceError("the device went away")

    got = regather.regather(broken, profile, path, True)
    assert "device went away" in got.data["gather_draws"][0]["error"]
    assert {k: v for k, v in got.data.items() if k not in ("gather_draws", regather.PLANNED)} == \
        {k: v for k, v in before.items() if k != regather.PLANNED}
    assert not (tmp_path / "profile.gathers.json").exists() and not regather.planned(got)
    assert "that failed (the device went away)" in regather.describe(got)


def test_validate_draws_again_only_the_calibration_it_made(tmp_path, monkeypatch):
    """``validate`` without a profile calibrates, and has that calibration's gathers drawn again once its measuring
    is over; a given profile, or its own already drawn twice (a rerun), is used as it is."""
    import argparse

    from gpuprofiler.cli import validate as cli
    from gpuprofiler.device.base import DeviceInfo
    from gpuprofiler.validate import suite

    monkeypatch.setenv("GPUPROFILER_RESULTS", str(tmp_path / "results"))
    seen = []

    def fake_run(where, name, outdir, profile, *a, after_measuring=None, **kw):
        seen.append(after_measuring)
        if after_measuring is not None:
            after_measuring(profile)
        return []

    monkeypatch.setattr(suite, "run", fake_run)
    monkeypatch.setattr(cli, "_write", lambda *a, **kw: 0)
    calls = []
    full = json.loads(POCL_PROFILE.read_text())
    full["bandwidth"].update(_gathers(30e-6, 1e-6, 5e-6))
    again = _fake_calibrate(copy.deepcopy(full["bandwidth"]) | _gathers(20e-6, 1e-6, 4e-6), calls)

    def calibrate(out, quick=False, only=(), resume=None):
        if resume is None:  # the run's first calibration
            calls.append((out, quick, "first"))
            out.write_text(json.dumps(full))
            return load_profile(out)
        return again(out, quick=quick, only=only, resume=resume)

    device = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d",
                        platform="Portable Computing Language")
    args = argparse.Namespace(profile=None, fresh=False, quick=True, suite="builtin", items=None, spec_sizes=False)
    out = tmp_path / "out"
    assert cli._measure(args, [], out, None, device, device.id, calibrate, lambda: None) == 0
    assert seen[0] is not None and [c[2] for c in calls] == ["first", ("memory", "bandwidth")]
    kept = load_profile(out / "profile.json").data
    assert kept["bandwidth"]["gather_s"]["value"] == pytest.approx(19e-6 / 500, rel=1e-12)
    assert cli._measure(args, [], out, None, device, device.id, calibrate, lambda: None) == 0  # a rerun
    given = argparse.Namespace(**{**vars(args), "profile": str(POCL_PROFILE)})
    assert cli._measure(given, [], tmp_path / "other", None, device, device.id, calibrate, lambda: None) == 0
    assert seen[1:] == [None, None] and len(calls) == 2


def test_the_cached_gathers_span_takes_the_caches_the_operating_system_reports():
    """The private level and the last one for the cached gather's span: the host's L2 and L3 where reported (a
    calibrated L3 knee at 2.9 MiB leaves no span beside a 1 MiB L2), else the calibrated ones; none on a GPU."""
    from types import SimpleNamespace

    from gpuprofiler.calibrate.driver import _private_bytes, _shared_bytes
    from gpuprofiler.microbench.bandwidth import llc_span

    host = [{"level": 1, "size_bytes": 32 << 10}, {"level": 2, "size_bytes": 1 << 20},
            {"level": 3, "size_bytes": 32 << 20}]
    cpu = SimpleNamespace(type="cpu", extra={"host_caches": host})
    calibrated = [{"name": "L1", "size_bytes": 44410}, {"name": "L2", "size_bytes": 755000},
                  {"name": "L3", "size_bytes": 3051356}]
    assert _private_bytes(cpu, calibrated) == 1 << 20 and _shared_bytes(cpu, 3051356) == 32 << 20
    assert llc_span(_private_bytes(cpu, calibrated), _shared_bytes(cpu, 3051356), 1 << 28) == 1 << 20  # 4 MiB
    assert llc_span(755000, 3051356, 1 << 28) is None  # the calibrated knees alone
    bare = SimpleNamespace(type="cpu", extra={})
    assert _private_bytes(bare, calibrated) == 755000 and _shared_bytes(bare, 3051356) == 3051356
    gpu = SimpleNamespace(type="gpu", extra={})
    assert _private_bytes(gpu, calibrated) is None
