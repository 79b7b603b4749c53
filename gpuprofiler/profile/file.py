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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError

SCHEMA = "gpuprofiler.profile"
SCHEMA_VERSION = 1

SCHEMA_DOC = """\
gpuprofiler hardware profile, schema version 1 (JSON)
  schema, schema_version, gpuprofiler_version, created, host, command, duration_s, quick
  device              DeviceInfo of the calibrated device (id, name, vendor, type, clock_mhz, ...)
  clock               {hz, source}: the clock used for cycles <-> seconds, read at run time
  launch              fixed_s, per_thread_s (fit l = a*nt + b with interval), per_block_s (the same event
                      times over work-groups: dispatch), back_to_back_s,
                      event_s (device event of an empty kernel), round_trip_s (enqueue + finish),
                      queue_to_start_s (profiling start - queued; clpeak's launch latency), points[]
  memory              read_s (t), write_s (T), read_step_s (dt), write_step_s (dT), cached_read_s,
                      dram_latency_s (latency past the last cache level), points[] (n, read_s, write_s)
  bandwidth           read_Bps, write_Bps, copy_Bps, triad_Bps (best over vector widths),
                      by_width{kind: {width: entry}}, array_bytes, peak_Bps (where the API tells it),
                      working_set_curve[] (bytes, Bps), streaming_llc_bytes (where reads fall to memory speed)
  transfer            htod_Bps, dtoh_Bps (pageable), htod_pinned_Bps, dtoh_pinned_Bps (where the API
                      allows), latency_s (smallest copy)
  caches              [{level, size_bytes, latency_s, latency_cycles}] detected as knees of latency_curve
  latency_curve       [{bytes, latency_s}] pointer chase over a random cyclic permutation of cache lines
  local_memory        latency_s, latency_cycles
  instructions        {op: {latency_s, latency_cycles, throughput_ops_per_s, chain_ratio, method, status}}
  concurrency         work_items (entry: how many work-items run at once, and how it was found)
  failed              [{key, reason}] every measurement recorded as failed
Entries: {value, unit, interval: [low, high], method, status: ok|failed, reason?, n?}
"""


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
