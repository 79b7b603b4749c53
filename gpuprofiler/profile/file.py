"""The hardware profile: one versioned JSON file of measured device parameters, read by every model.

Every value is an *entry*: ``{"value", "unit", "interval": [low, high], "method", "status"}``;
a measurement that failed or is physically impossible has ``"status": "failed"``, a
``"reason"`` and ``"value": null`` -- never a number. ``Profile.get("launch.fixed_s")`` returns
the value of an entry by its dotted key path (or the object at that path). The schema is
:data:`SCHEMA_DOC` (``gpuprofiler profile show --schema``).
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError

SCHEMA = "gpuprofiler.profile"
SCHEMA_VERSION = 1

# Figures whose measuring method changed, with the version of the method now used and what it is. A profile
# records the versions it was measured with in ``method_versions``; a figure missing there (every figure of a
# profile written before this table existed) was measured with version 1, the old method.
CHANGED_METHODS: dict[str, tuple[int, str]] = {
    "launch.back_to_back_s": (2, "device time per launch of many empty launches queued back to back, between two "
                                 "device timestamps (v1: host wall time per launch of the package's timed launch, "
                                 "which measured Python)"),
    "launch.round_trip_s": (2, "host time per launch + finish from a tight loop of such pairs, arguments marshalled "
                               "once, no events or hold kernel (v1: the timing engine's host time of one timed "
                               "launch, with the CUDA hold kernel in it)"),
    "instructions.add.s32": (2, "chain x = b - x, one IADD3 per link (v1: x = x + b, which ptxas splits between "
                                "IADD3 and VIADD)"),
    "instructions.add.u32": (2, "as add.s32"),
    "instructions.sub.s32": (2, "chain x = b - x, one IADD3 per link (v1: x = x - b, split between IADD3 and "
                                "VIADD)"),
    "instructions.sub.u32": (2, "as sub.s32"),
    "instructions.ld.global.ca.u64": (2, "ring walked once before the clock starts (v1: cold L1 misses in the "
                                         "timed chain broke the k / 2k ratio check)"),
    "instructions.ld.global.cg.u64": (2, "ring walked once before the clock starts (these loads skip L1: little "
                                         "change expected)"),
    "instructions.ld.global.cv.u64": (2, "as ld.global.cg.u64"),
    "caches": (2, "every level has a name from the device type: a GPU's plateau after L2 is 'L2 far' (v1: level "
                  "numbers only, shown as L1, L2, L3)"),
}


def method_version_of(key: str) -> int:
    """The version of the method this gpuprofiler measures the figure ``key`` with (1 unless it changed)."""
    return CHANGED_METHODS.get(key, (1, ""))[0]


def method_version(data: dict[str, Any], key: str) -> int:
    """The version of the method the profile ``data`` measured ``key`` with: 1 where it records none."""
    versions = data.get("method_versions") if isinstance(data, dict) else None
    found = versions.get(key) if isinstance(versions, dict) else None
    return int(found) if isinstance(found, int) and not isinstance(found, bool) and found >= 1 else 1


def method_versions_present(data: dict[str, Any]) -> dict[str, int]:
    """The current method versions of the changed figures that ``data`` holds: what a calibration that
    measured them all records as ``method_versions``."""
    out = {}
    for key, (version, _) in CHANGED_METHODS.items():
        section, _, name = key.partition(".")
        node = data.get(section)
        if (name and isinstance(node, dict) and name in node) or (not name and node):
            out[key] = version
    return out


def _changed_methods_doc() -> str:
    return "\n".join(textwrap.fill(f"v{version}: {text}", 112, initial_indent=f"  {key:<32}",
                                    subsequent_indent=" " * 34) for key, (version, text) in CHANGED_METHODS.items())


SCHEMA_DOC = """\
gpuprofiler hardware profile, schema version 1 (JSON)
  schema, schema_version, gpuprofiler_version, created, host, command, duration_s, quick
  method_versions     {figure key: version} of the figures whose measuring method changed (below); a key
                      that is missing (every key, in profiles written before it existed) means version 1
  device              DeviceInfo of the calibrated device (id, name, vendor, type, clock_mhz, ...)
  clock               {hz, source}: the clock used for cycles <-> seconds, read at run time
  launch              fixed_s, per_thread_s (fit l = a*nt + b with interval), per_block_s (the same event
                      times over work-groups: dispatch),
                      back_to_back_s (device time per launch of many launches queued back to back),
                      event_s (device event of an empty kernel),
                      round_trip_s (host time of launch + finish, tight loop, arguments marshalled once),
                      queue_to_start_s (profiling start - queued; clpeak's launch latency),
                      points[] (threads, local, event_s, engine_host_s: the engine's host time per timed launch)
  memory              read_s (t), write_s (T), read_step_s (dt), write_step_s (dT), cached_read_s,
                      dram_latency_s (latency past the last cache level), points[] (n, read_s, write_s)
  bandwidth           read_Bps, write_Bps, copy_Bps, triad_Bps (best over vector widths),
                      by_width{kind: {width: entry}}, array_bytes, peak_Bps (where the API tells it),
                      working_set_curve[] (bytes, Bps), streaming_llc_bytes (where reads fall to memory speed)
  transfer            htod_Bps, dtoh_Bps (pageable), htod_pinned_Bps, dtoh_pinned_Bps (where the API
                      allows), latency_s (smallest copy)
  caches              [{level, name, size_bytes, latency_s, latency_cycles}] detected as knees of latency_curve;
                      level counts from 1 (smallest); name: L1, L2, L3 on a CPU, L1, L2, L2 far on a GPU
  latency_curve       [{bytes, latency_s}] pointer chase over a random cyclic permutation of cache lines
  local_memory        latency_s, latency_cycles
  instructions        {op: {latency_s, latency_cycles, throughput_ops_per_s, chain_ratio, method, status,
                      method_version?}}
  concurrency         work_items (entry: how many work-items run at once, and how it was found)
  failed              [{key, reason}] every measurement recorded as failed
Entries: {value, unit, interval: [low, high], method, status: ok|failed, reason?, n?, method_version?}
Figures whose method changed (method_versions; v1 is the old method):
""" + _changed_methods_doc() + "\n"


def entry(value: float | None, unit: str, method: str, interval: tuple[float, float] | None = None,
          **extra: Any) -> dict[str, Any]:
    """A measured value with its unit, interval and method."""
    ok = value is not None and math.isfinite(value)
    out = {"value": float(value) if ok else None, "unit": unit,
           "interval": [float(interval[0]), float(interval[1])] if (ok and interval) else None,
           "method": method, "status": "ok" if ok else "failed"}
    if not ok:
        out["reason"] = extra.pop("reason", "no value")
    out.update(extra)
    return out


def failed(unit: str, method: str, reason: str, **extra: Any) -> dict[str, Any]:
    """A measurement that did not give a physically possible value: kept with its reason, never as a value."""
    return {"value": None, "unit": unit, "interval": None, "method": method, "status": "failed",
            "reason": reason, **extra}


def is_entry(obj: Any) -> bool:
    return isinstance(obj, dict) and "status" in obj and "value" in obj and "unit" in obj


@dataclass
class Profile:
    """A hardware profile in memory; :meth:`save` / :func:`load_profile` round-trip it."""

    data: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def get(self, key: str, default: Any = KeyError) -> Any:
        """The value at a dotted key path; an entry gives its value, a failed entry raises KeyError."""
        node: Any = self.data
        for part in key.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                if default is KeyError:
                    raise KeyError(f"profile has no {key!r}")
                return default
        if is_entry(node):
            if node["status"] != "ok":
                if default is KeyError:
                    raise KeyError(f"profile {key!r} failed: {node.get('reason')}")
                return default
            return node["value"]
        return node

    def entry(self, key: str) -> dict[str, Any]:
        node: Any = self.data
        for part in key.split("."):
            node = node[part]
        return node

    def failures(self) -> list[dict[str, str]]:
        """Every failed entry with its key path and reason."""
        out = []

        def walk(node: Any, path: str) -> None:
            if is_entry(node):
                if node["status"] != "ok":
                    out.append({"key": path, "reason": node.get("reason", "")})
                return
            if isinstance(node, dict):
                for k, v in node.items():
                    if k != "failed":
                        walk(v, f"{path}.{k}" if path else k)
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{path}.{i}")

        walk(self.data, "")
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.data["failed"] = self.failures()
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, allow_nan=False) + "\n")
        tmp.replace(path)
        self.path = path
        return path


def load_profile(path: str | Path) -> Profile:
    """Read a profile; a missing file, bad JSON or another schema is a UserError."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"profile not found: {path} (run `gpuprofiler calibrate`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read profile {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UserError(f"{path}: not a gpuprofiler hardware profile")
    if data.get("schema_version", 0) > SCHEMA_VERSION:
        raise UserError(f"{path}: profile schema {data['schema_version']} is newer than this gpuprofiler "
                        f"({SCHEMA_VERSION}); upgrade gpuprofiler")
    return Profile(data, path)
