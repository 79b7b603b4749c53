"""A fleet's profiles compared: for each key figure, the median over the devices of a kind and each device's
deviation from it; a device whose figure lies far outside its siblings' (beyond its own interval and beyond the
kind's robust spread) is an outlier.

The spread of a kind is robust (1.4826 x the median absolute deviation, so that the outlier itself cannot widen
it), and never taken narrower than the devices' own intervals, nor than half a percent: a figure measured to +-2%
does not make a device that is 2.5% off an outlier however alike the others happen to be, and a figure most devices
report identically (a clock) does not make the one that differs by 0.1% one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.profile.file import Profile, is_entry, load_profile

# the figures compared, with which way is slower: +1 where a larger value is slower (times), -1 (rates)
FIGURES: dict[str, int] = {
    "launch.fixed_s": 1, "launch.back_to_back_s": 1, "launch.queue_to_start_s": 1, "launch.round_trip_s": 1,
    "memory.read_s": 1, "memory.dram_latency_s": 1, "memory.cached_read_s": 1,
    "bandwidth.read_Bps": -1, "bandwidth.write_Bps": -1, "bandwidth.copy_Bps": -1, "bandwidth.triad_Bps": -1,
    "transfer.htod_Bps": -1, "transfer.dtoh_Bps": -1, "transfer.htod_pinned_Bps": -1,
    "transfer.dtoh_pinned_Bps": -1, "clock.hz": -1,
    "instructions.float_fma.latency_s": 1, "instructions.float_fma.throughput_ops_per_s": -1,
    "instructions.float_add.latency_s": 1, "local_memory.latency_s": 1, "tlb.miss_s": 1,
}
MIN_DEVICES = 3  # fewer devices of a kind: no median to stand out from
THRESHOLD = 4.0  # robust standard deviations
FLOOR = 0.005  # the narrowest spread taken: figures alike to within half a percent (a clock all report the same)


@dataclass
class Figure:
    """One device's value of one figure, with its interval (None where the profile has none)."""

    value: float
    low: float | None = None
    high: float | None = None


def figures(profile: Profile) -> dict[str, Figure]:
    """The key figures a profile measured (failed ones left out), and its caches' latencies as ``caches.N``."""
    out: dict[str, Figure] = {}
    keys = list(FIGURES) + [f"caches.{i}.latency_s" for i in range(len(profile.data.get("caches") or []))]
    for key in keys:
        node: Any = profile.data
        for part in key.split("."):
            node = node[int(part)] if isinstance(node, list) and part.isdigit() and int(part) < len(node) else \
                node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if is_entry(node):
            if node.get("status") == "ok" and isinstance(node.get("value"), (int, float)) and node["value"] > 0:
                iv = node.get("interval")
                out[key] = Figure(float(node["value"]), *(map(float, iv) if iv else (None, None)))
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and node > 0 and math.isfinite(node):
            out[key] = Figure(float(node))
    return out


@dataclass
class Device:
    """A device of the fleet: its profile's file, kind (device slug), host and figures."""

    path: Path
    kind: str
    name: str
    host: str
    figures: dict[str, Figure]


def read_fleet(folder: str | Path) -> list[Device]:
    """Every profile under ``folder`` (a fleet calibration's folder, searched recursively)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (profile fleet takes the folder `calibrate --all-devices` wrote)")
    paths = sorted(folder.rglob("profile.json"))
    if not paths:
        raise UserError(f"{folder}: no profile.json below it")
    out = []
    for path in paths:
        p = load_profile(path)
        dev = p.data.get("device") or {}
        out.append(Device(path, str(dev.get("slug") or dev.get("name") or "?"), str(dev.get("name") or "?"),
                          str(p.data.get("host") or "?"), figures(p)))
    return out


def compare(devices: list[Device], threshold: float = THRESHOLD) -> list[dict[str, Any]]:
    """One row per (device, figure) of each kind with at least MIN_DEVICES devices: value, the kind's median,
    deviation (value / median - 1), the kind's robust relative spread, the score (deviation over the larger of
    that spread and the device's own relative interval half-width) and whether it is an outlier (score beyond
    ``threshold`` and the median outside the device's interval)."""
    rows = []
    for kind in sorted({d.kind for d in devices}):
        mine = [d for d in devices if d.kind == kind]
        if len(mine) < MIN_DEVICES:
            continue
        for key in sorted({k for d in mine for k in d.figures}):
            have = [(d, d.figures[key]) for d in mine if key in d.figures]
            if len(have) < MIN_DEVICES:
                continue
            values = np.array([f.value for _, f in have])
            median = float(np.median(values))
            rel = values / median - 1.0
            spread = 1.4826 * float(np.median(np.abs(rel - np.median(rel))))
            halfs = [((f.high - f.low) / 2 / median) for _, f in have if f.low is not None and f.high is not None]
            floor = float(np.median(halfs)) if halfs else 0.0
            for (d, f), dev in zip(have, rel):
                own = (f.high - f.low) / 2 / median if f.low is not None and f.high is not None else 0.0
                scale = max(spread, floor, own, FLOOR)
                inside = f.low is not None and f.high is not None and f.low <= median <= f.high
                score = abs(float(dev)) / scale
                direction = FIGURES.get(key, 1 if key.endswith("_s") else -1)
                rows.append({"kind": kind, "device": str(d.path.parent), "host": d.host, "figure": key,
                             "value": f.value, "median": median, "deviation": float(dev), "spread": spread,
                             "score": score, "slower": bool(np.sign(dev) == direction),
                             "outlier": bool(score > threshold and not inside), "devices": len(have)})
    return rows


def outliers(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The outlier devices and, for each, its outlying figures (worst first)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["outlier"]:
            out.setdefault(r["device"], []).append(r)
    return {d: sorted(rs, key=lambda r: -r["score"]) for d, rs in sorted(out.items())}


def kind_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind and figure: devices, median, robust spread, the largest deviation and the outliers."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["kind"], r["figure"]), []).append(r)
    out = []
    for (kind, key), rs in sorted(groups.items()):
        worst = max(rs, key=lambda r: abs(r["deviation"]))
        out.append({"kind": kind, "figure": key, "devices": len(rs), "median": rs[0]["median"],
                    "spread": rs[0]["spread"], "worst_device": worst["device"], "worst_deviation": worst["deviation"],
                    "outliers": [r["device"] for r in rs if r["outlier"]]})
    return out
