"""A finished timing is never lost to what comes after it: the record is built so that it cannot fail (figures
derived from the spec's expressions that cannot be computed become None, with the reason) and stored at once."""

import dataclasses
import json

from conftest import KERNELS

from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.measure.engine import Timing
from gpuprofiler.measure.storage import MeasurementLog
from gpuprofiler.workloads.kernel import measure_spec, spec_record
from gpuprofiler.workloads.spec import load_spec

DEVICE = DeviceInfo("opencl:0:0", "opencl", "Test CPU", "V", "cpu", 2, 1000.0, 1 << 30, 1 << 16, 1024, "d")


def timing():
    return Timing(device_s=[1e-6 * (1 + i / 100) for i in range(40)], host_s=[2e-6] * 40, warmup_s=[3e-6],
                  stop_reason="budget")


def test_a_record_with_unusable_derived_figures_is_built_and_stored(tmp_path):
    spec = load_spec(KERNELS / "vadd.toml")
    inst = dataclasses.replace(spec.instantiate(1024), flops=complex(1, 2), bytes=10**400,
                               names={"n": 1024, "huge": 10**5000, "z": complex(0, 1)})
    rec = spec_record(spec, 1024, inst, timing(), False, None, [])
    assert rec["flops"] is None and rec["gflops"] is None and rec["bytes"] is None and rec["gbps"] is None
    assert set(rec["derived_errors"]) == {"flops", "bytes"}  # the rates of a missing count are simply None
    assert rec["params"]["n"] == 1024 and rec["params"]["huge"] == "<an integer of 16610 bits>" and rec["params"]["z"] == "1j"
    assert rec["samples"] == 40 and rec["model_s"] > 0
    log = MeasurementLog(tmp_path / "m.jsonl", DEVICE)
    log.append(rec)
    [line] = (tmp_path / "m.jsonl").read_text().splitlines()
    assert json.loads(line)["samples_s"] == rec["samples_s"]


def test_ordinary_derived_figures(tmp_path):
    spec = load_spec(KERNELS / "vadd.toml")
    rec = spec_record(spec, 1024, spec.instantiate(1024), timing(), True, 0.1, [2048])
    assert rec["flops"] == 1024 and rec["bytes"] == 12 * 1024 and "derived_errors" not in rec
    assert rec["gbps"] == 12 * 1024 / rec["model_s"] / 1e9 and rec["params"]["n"] == 1024


def test_each_size_is_handed_over_the_moment_it_is_timed(pocl, quick_policy):
    spec = load_spec(KERNELS / "copy.toml")
    events = []
    measure_spec(pocl, spec, [4096, 8192], quick_policy, check=False, interleave=False,
                 on_record=lambda r: events.append(("record", r["size"])),
                 on_size=lambda size, recs: events.append(("size", size, len(recs))),
                 on_stage=lambda stage, sizes: events.append((stage, tuple(sizes))))
    assert events == [("prepare", (4096,)), ("time", (4096,)), ("record", 4096), ("size", 4096, 1),
                      ("prepare", (8192,)), ("time", (8192,)), ("record", 8192), ("size", 8192, 1)]
