"""A simulated fleet for the cluster tests: 200 devices of 3 kinds on 25 nodes of 8, one device 10% slow.

The devices are a registered device scheme (``fake:NODE:GPU``) whose backends only describe themselves; a
calibration section is simulated from the device's speed with 1% measurement noise (seeded by device and section,
so the fleet is the same on every run), and a measurement task returns records of simulated samples.
"""

from __future__ import annotations

import zlib

import numpy as np

from gpuprofiler.device import register_scheme, unregister_scheme
from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.profile.file import SCHEMA, SCHEMA_VERSION, entry

NODES, PER_NODE = 25, 8
KINDS = (("Fake H100", 0, 9), ("Fake A100", 9, 17), ("Fake MI250", 17, 25))  # name, first node, end node
SLOW = "fake:11:5"


def kind_of(node: int) -> str:
    return next(name for name, lo, hi in KINDS if lo <= node < hi)


def ids() -> list[str]:
    return [f"fake:{n}:{g}" for n in range(NODES) for g in range(PER_NODE)]


def info(device_id: str) -> DeviceInfo:
    node = int(device_id.split(":")[1])
    return DeviceInfo(id=device_id, backend="fake", name=kind_of(node), vendor="simulated", type="gpu",
                      compute_units=100, clock_mhz=1500.0, global_mem_bytes=1 << 34, local_mem_bytes=1 << 16,
                      max_work_group_size=1024, driver="simulated", platform="fake")


class FakeBackend:
    kind = "fake"

    def __init__(self, device_id: str):
        self.info = info(device_id)

    def close(self) -> None:
        pass


def register() -> None:
    register_scheme("fake", FakeBackend, lambda: [info(i) for i in ids()])


def unregister() -> None:
    unregister_scheme("fake")


BASE = {"launch": {"fixed_s": (4e-6, "s")}, "memory": {"dram_latency_s": (5e-7, "s")},
        "bandwidth": {"read_Bps": (2e12, "B/s"), "write_Bps": (1.8e12, "B/s"), "copy_Bps": (1.9e12, "B/s")},
        "transfer": {"htod_Bps": (2.5e10, "B/s")}}
SECTION_KEYS = {"launch": ["launch"], "latency": ["memory"], "memory": [], "bandwidth": ["bandwidth"],
                "transfer": ["transfer"], "instructions": []}


def fake_section(ctx, section: str, quick: bool, data: dict | None) -> dict:
    """A calibration section simulated: each figure the kind's base (a rate times, a time over, the device's
    speed), with 1% noise and a +-1% interval."""
    dev = ctx.backend().info
    speed = 0.9 if dev.id == SLOW else 1.0
    rng = np.random.default_rng(zlib.crc32(f"{dev.id}/{section}".encode()))
    scale = {"Fake H100": 1.0, "Fake A100": 0.6, "Fake MI250": 0.8}[dev.name]
    out = dict(data) if data else {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "gpuprofiler_version": "test", "created": "2026-11-26",
        "host": "simulated", "command": "fake", "quick": quick, "sections": [], "sections_done": [],
        "complete": False, "device": dev.to_dict()}
    for group in SECTION_KEYS[section]:
        figures = {}
        for key, (base, unit) in BASE[group].items():
            value = base * scale * (speed if unit == "B/s" else 1 / speed) * (1 + 0.01 * rng.standard_normal())
            figures[key] = entry(value, unit, "simulated", (value * 0.99, value * 1.01))
        out[group] = figures
    out["sections_done"] = list(dict.fromkeys(list(out.get("sections_done") or []) + [section]))
    return out


def fake_records(ctx, task: int, records: int, samples: int) -> dict[int, list[dict]]:
    """A measurement task simulated: ``records`` records (one per size) of ``samples`` samples each."""
    rng = np.random.default_rng(task)
    s = (1e-4 * (1 + np.arange(records)))[:, None] * (1 + 0.01 * rng.random((records, samples)))
    lows, mids, rows = s.min(axis=1).tolist(), np.median(s, axis=1).tolist(), s.tolist()
    return {size: [{"kind": "kernel", "kernel": "fake", "phase": "fake", "size": size, "model_s": lows[size],
                    "median_s": mids[size], "samples_s": rows[size]}] for size in range(records)}
