"""Timelines as Chrome trace-event JSON (the JSON object format that Perfetto and chrome://tracing open, and that
Nsight and PyTorch's profiler export): one process per timeline (measured, simulated), one thread per resource
(the host, each device's queue or engines), a complete event ("ph": "X") per operation. A measured trace also
carries the recorded run under ``otherData.timeline``, so ``gpuprofiler simulate`` can read it back."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.simulate.algorithm import host_spans
from gpuprofiler.simulate.schedule import Schedule
from gpuprofiler.textfile import read_text

MAX_TRACE_BYTES = 1 << 28


def measured_rows(timeline: dict) -> list[dict[str, Any]]:
    """The recorded run as Gantt rows on the host's clock: the host's own work between its calls (as the simulator
    shows it) and each device's operations, with the call's span in its args."""
    rows = []
    done = 0.0
    spans = host_spans(timeline)
    for op in spans:
        if op["call_s"] > done:
            rows.append({"resource": "host", "name": "host", "kind": "host", "start_s": done, "end_s": op["call_s"]})
        done = max(done, op["return_s"])
        rows.append({"resource": f"dev{op['device']}", "name": op["name"], "kind": op["kind"], "phase": op["phase"],
                     "start_s": op["start_s"], "end_s": op["end_s"], "bytes": op["bytes"],
                     "reads": op["reads"], "writes": op["writes"], "call_s": [op["call_s"], op["return_s"]]})
    end = (timeline["host_end_ns"] - timeline["host_start_ns"]) * 1e-9
    if spans and end > done:
        rows.append({"resource": "host", "name": "host", "kind": "host", "start_s": done, "end_s": end})
    return rows


def simulated_rows(schedule: Schedule) -> list[dict[str, Any]]:
    return [{"resource": s.resource, "name": s.name, "kind": s.kind, "phase": s.phase, "start_s": s.start_s,
             "end_s": s.end_s, "bound_by": s.bound_by} for s in schedule.slots]


def events(rows: list[dict[str, Any]], pid: int, process: str) -> list[dict[str, Any]]:
    """Trace events of one timeline: process and thread names, then one complete event per row (microseconds)."""
    resources = sorted({r["resource"] for r in rows}, key=lambda r: (r != "host", r))
    tid = {r: k for k, r in enumerate(resources)}
    out: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process}}]
    for r, k in tid.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": k, "args": {"name": r}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": k, "args": {"sort_index": k}})
    for row in rows:
        args = {k: v for k, v in row.items() if k not in ("resource", "name", "kind", "start_s", "end_s")}
        out.append({"name": row["name"], "cat": row["kind"], "ph": "X", "ts": row["start_s"] * 1e6,
                    "dur": max(0.0, row["end_s"] - row["start_s"]) * 1e6, "pid": pid, "tid": tid[row["resource"]],
                    "args": args})
    return out


def trace(timelines: list[tuple[str, list[dict[str, Any]]]], recorded: dict | None = None,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The trace object of several named timelines (each its own process), with the recorded run in
    ``otherData`` where given."""
    evs: list[dict[str, Any]] = []
    for pid, (name, rows) in enumerate(timelines, start=1):
        evs.extend(events(rows, pid, name))
    other: dict[str, Any] = {"generator": "gpuprofiler", **(extra or {})}
    if recorded is not None:
        other["timeline"] = recorded
    return {"traceEvents": evs, "displayTimeUnit": "ms", "otherData": other}


def write(path: str | Path, obj: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=None, separators=(",", ":"), allow_nan=False) + "\n")
    return path


def problems(obj: Any) -> list[str]:
    """What stops ``obj`` from being a valid trace in the JSON object format: the fields each event needs
    (name, ph, pid, tid; ts for timed events; a non-negative dur for complete events; args for metadata)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        return ["the top level must be an object with a 'traceEvents' list"]
    out = []
    if "displayTimeUnit" in obj and obj["displayTimeUnit"] not in ("ms", "ns"):
        out.append("displayTimeUnit must be 'ms' or 'ns'")
    for k, ev in enumerate(obj["traceEvents"]):
        if not isinstance(ev, dict):
            out.append(f"event {k}: not an object")
            continue
        for key in ("name", "ph", "pid", "tid"):
            if key not in ev:
                out.append(f"event {k}: no {key!r}")
        if not isinstance(ev.get("name"), str):
            out.append(f"event {k}: name must be a string")
        ph = ev.get("ph")
        if not isinstance(ph, str) or len(ph) != 1:
            out.append(f"event {k}: ph must be one character")
        for key in ("pid", "tid"):
            if key in ev and not (isinstance(ev[key], (int, str)) and not isinstance(ev[key], bool)):
                out.append(f"event {k}: {key} must be an integer or a string")
        if ph == "M":
            if not isinstance(ev.get("args"), dict):
                out.append(f"event {k}: a metadata event needs args")
            continue
        ts = ev.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            out.append(f"event {k}: ts must be a finite number (microseconds)")
        if ph == "X":
            dur = ev.get("dur")
            if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not math.isfinite(dur) or dur < 0:
                out.append(f"event {k}: a complete event needs a non-negative dur")
        if "args" in ev and not isinstance(ev["args"], dict):
            out.append(f"event {k}: args must be an object")
    return out


def load_recorded(path: str | Path) -> dict:
    """The recorded run inside a measured trace (``gpuprofiler measure APP --trace F.json``)."""
    text = read_text(path, "trace", MAX_TRACE_BYTES)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON: {exc}") from None
    recorded = obj.get("otherData", {}).get("timeline") if isinstance(obj, dict) else None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("operations"), list):
        raise UserError(f"{path}: no recorded run in it (write one with `gpuprofiler measure APP --trace F.json`)")
    return recorded
