"""Fleet runs go on past a device whose task fails: ``measure --cluster ... --all-devices`` and ``calibrate --cluster
... --all-devices`` on a small simulated fleet (the registered ``fake:`` devices on a threaded local Dask cluster),
one device's kernel failing to compile, one failing its check after a size (kept), one crashing in calibration."""

import csv
import platform
import sys
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

sys.path.insert(0, str(Path(__file__).parent))
import fakefleet  # noqa: E402

from gpuprofiler.calibrate import fleet as calibrate_fleet  # noqa: E402
from gpuprofiler.calibrate.driver import SECTIONS  # noqa: E402
from gpuprofiler.cli import calibrate as calibrate_cli  # noqa: E402
from gpuprofiler.cli import measure as measure_cli  # noqa: E402
from gpuprofiler.cli.main import main  # noqa: E402
from gpuprofiler.errors import SOME_FAILED, CheckError, DeviceError, UserError, at_stage  # noqa: E402
from gpuprofiler.measure.runners.dask import DaskRunner  # noqa: E402
from gpuprofiler.measure.storage import read_records  # noqa: E402
from gpuprofiler.workloads import sweep  # noqa: E402

DEVICES = ["fake:0:0", "fake:0:1", "fake:0:2", "fake:0:3"]
NO_COMPILE, WRONG, CRASH = "fake:0:1", "fake:0:2", "fake:0:3"


@pytest.fixture
def small_fleet(monkeypatch):
    """Four simulated devices on two threaded workers, a fresh cluster for each command in place of ``--cluster``
    (a command closes its cluster when it ends)."""
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)
    fakefleet.register()
    opened = []

    def open_runner(args):
        opened.append(DaskRunner.local(2, DEVICES, processes=False))
        return opened[-1]

    for cli in (measure_cli, calibrate_cli):
        monkeypatch.setattr(cli, "open_runner", open_runner)
    try:
        yield opened
    finally:
        for runner in opened:
            runner.close()
        fakefleet.unregister()


def fake_sweep(ctx, ref, digest, sizes, policy, bounds=True, check=True):
    """A measurement task simulated: one device's kernel does not compile, another's fails its check at the last
    size (the sizes before it ride on the error, as :func:`gpuprofiler.workloads.sweep.sweep_task` leaves them)."""
    by_size = {}
    for size in sizes:
        if ctx.device_id == NO_COMPILE:
            raise at_stage(UserError("OpenCL compile error:\nerror: use of undeclared identifier 'this'"), "compile")
        if ctx.device_id == WRONG and size == sizes[-1]:
            exc = CheckError(f"check[0]: c differs from a + b in 3 of {size} elements")
            exc.measured = {"by_size": dict(by_size), "host": platform.node(), "resource": ctx.resource}
            raise exc
        by_size[size] = [{"kind": "kernel", "kernel": "vadd", "phase": "vadd", "size": size, "model_s": 1e-4,
                          "model_ci_low_s": 1e-4, "model_ci_high_s": 1e-4, "median_s": 1e-4, "samples": 5,
                          "samples_s": [1e-4] * 5, "checked": check}]
    return by_size


def test_measure_on_every_device_goes_on_past_the_failing_ones(small_fleet, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "sweep_task", fake_sweep)
    log = tmp_path / "fleet.jsonl"
    args = ["measure", "vadd", "--sizes", "1024,2048,4096", "--cluster", "local", "--all-devices", "-o", str(log)]
    assert main(args) == SOME_FAILED
    out, err = capsys.readouterr()
    with open(tmp_path / "fleet.failed.csv", newline="") as fh:
        failed = {r["device"].rpartition("/")[2]: r for r in csv.DictReader(fh)}
    assert {d: r["stage"] for d, r in failed.items()} == {NO_COMPILE: "compile", WRONG: "check"}
    assert "OpenCL compile error" in failed[NO_COMPILE]["reason"] and "differs" in failed[WRONG]["reason"]
    assert "2 of 4 task(s) failed" in out and "2 of 4 task(s) failed (listed in" in err
    stored = read_records(log)
    by_device = {}
    for r in stored:
        by_device.setdefault(r["store_key"].split("|")[0].rpartition("/")[2], set()).add(r["size"])
    # the good devices: every size; the one that failed its check: the sizes before the failure; none of the other
    assert by_device == {"fake:0:0": {1024, 2048, 4096}, CRASH: {1024, 2048, 4096}, WRONG: {1024, 2048}}
    assert all(r["device"]["id"] == r["store_key"].split("|")[0].rpartition("/")[2] for r in stored)

    # a rerun measures what is missing: the failed devices are tried again (and fail again), nothing twice
    assert main(args) == SOME_FAILED
    assert "2 task(s) on" in capsys.readouterr().err
    assert len(read_records(log)) == len(stored)


def crashing_section(ctx, section, quick, data):
    """A calibration section simulated; one device's runtime crashes in its bandwidth section."""
    if ctx.device_id == CRASH and section == "bandwidth":
        raise at_stage(DeviceError("the device runtime crashed while running the bandwidth streams"), "device crash")
    return fakefleet.fake_section(ctx, section, quick, data)


def test_calibrate_on_every_device_goes_on_past_a_crash(small_fleet, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(calibrate_fleet, "section_task", crashing_section)
    out = tmp_path / "profiles"
    assert main(["calibrate", "--cluster", "local", "--all-devices", "--quick", "-o", str(out)]) == SOME_FAILED
    stdout, stderr = capsys.readouterr()
    with open(out / "failed.csv", newline="") as fh:
        [failed] = list(csv.DictReader(fh))
    assert failed["item"] == "bandwidth" and failed["stage"] == "device crash"
    assert failed["device"].endswith(CRASH) and "crashed" in failed["reason"]
    assert f"1 of {4 * len(SECTIONS)} section(s) failed" in stdout and "3 of 4 profile(s) complete" in stdout
    profiles = sorted(out.rglob("profile.json"))
    assert len(profiles) == 4  # the crashed device's profile keeps the sections before the crash

    # a rerun finishes the partial profile (the crash is gone) and removes the stale failed.csv
    monkeypatch.setattr(calibrate_fleet, "section_task", fakefleet.fake_section)
    assert main(["calibrate", "--cluster", "local", "--all-devices", "--quick", "-o", str(out)]) == 0
    assert "4 of 4 profile(s) complete" in capsys.readouterr().out and not (out / "failed.csv").exists()
