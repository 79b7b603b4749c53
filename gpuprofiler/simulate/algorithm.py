"""The algorithm graph: a program's transfers, kernels and host work, and the dependencies between them.

Two sources: a recorded run (:func:`from_timeline`: every launch and copy with its buffers, the host's clock around
each call and the device's start and end, so dependencies come from the data and costs from the measurement), or
a small TOML file for what-if studies (:func:`from_toml`). Tasks keep the order the program issued them in;
dependencies are the edges of a networkx DiGraph (read after write, write after read, write after write on a
buffer, and any declared ``after``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.textfile import read_text

KINDS = ("copy", "kernel", "compute", "transfer")


@dataclass
class Task:
    """One operation of the algorithm, in the program's issue order."""

    name: str
    kind: str  # "copy" (a transfer over a link) or "kernel" (compute on a device)
    cost_s: float  # its duration on the device it was measured on (or declared)
    phase: str = ""
    direction: str | None = None  # copies: "htod" | "dtoh"
    bytes: int = 0
    device: int | None = None  # the device it ran on in the recording (None: the scheduler places it)
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    after: tuple[int, ...] = ()  # declared predecessors (indices)
    blocking: bool = False  # the host waits for it
    host_before_s: float = 0.0  # host work between the previous call's return and this call
    host_call_s: float = 0.0  # a non-blocking call's own host time (the enqueue)
    host_after_s: float = 0.0  # a blocking call: host time from the device's end to the call's return
    groups: int | None = None  # kernels: work-groups launched
    compute_units: int | None = None  # kernels: compute units of the device that gave cost_s


@dataclass
class AlgorithmGraph:
    """Tasks in issue order and their dependency graph; what the device queues add comes from the scheduler."""

    tasks: list[Task]
    name: str = "program"
    host_tail_s: float = 0.0  # host work after the last call
    queue_latency_s: float | None = None  # host call to device start on an idle device, as recorded
    queue_gap_s: float | None = None  # end of one operation to the start of the next already queued, as recorded
    measured: dict[str, Any] = field(default_factory=dict)  # the recorded run's own figures (run_s, devices)
    graph: nx.DiGraph = field(init=False, repr=False)

    def __post_init__(self) -> None:
        g = nx.DiGraph()
        g.add_nodes_from(range(len(self.tasks)))
        last_writer: dict[int, int] = {}
        readers: dict[int, list[int]] = {}
        for i, t in enumerate(self.tasks):
            for j in t.after:
                if not 0 <= j < len(self.tasks) or j == i:
                    raise UserError(f"task {t.name!r}: 'after' names a task that does not exist or itself")
                g.add_edge(j, i, why="declared")
            for b in t.reads:
                if b in last_writer and last_writer[b] != i:
                    g.add_edge(last_writer[b], i, why="read after write")
            for b in t.writes:
                for r in readers.get(b, []):
                    if r != i:
                        g.add_edge(r, i, why="write after read")
                if b in last_writer and last_writer[b] != i:
                    g.add_edge(last_writer[b], i, why="write after write")
            for b in t.reads:
                readers.setdefault(b, []).append(i)
            for b in t.writes:
                last_writer[b] = i
                readers[b] = []
        if not nx.is_directed_acyclic_graph(g):
            cycle = [self.tasks[a].name for a, _ in nx.find_cycle(g)]
            raise UserError(f"{self.name}: the dependencies form a cycle: {' -> '.join(cycle)}")
        self.graph = g

    def groups(self) -> list[int]:
        """Each task's placement group: tasks joined by dependencies (sharing data) run on one device."""
        out = [0] * len(self.tasks)
        comps = sorted(nx.weakly_connected_components(self.graph), key=min)
        for k, comp in enumerate(comps):
            for i in comp:
                out[i] = k
        return out


def clock_offsets(ops: list[dict]) -> dict[int, float]:
    """Per device, host clock minus device clock (ns): every operation starts after its call began, and a blocking
    one ends before its call returned; the middle of the offsets that satisfy both (the lower bound where no
    blocking call bounds it from above)."""
    lo: dict[int, float] = {}
    hi: dict[int, float] = {}
    for op in ops:
        if op["device_start_ns"] is None:
            continue
        d = op["device"]
        lo[d] = max(lo.get(d, -math.inf), op["host_call_ns"] - op["device_start_ns"])
        if op["blocking"]:
            hi[d] = min(hi.get(d, math.inf), op["host_return_ns"] - op["device_end_ns"])
    return {d: (lo[d] + hi[d]) / 2 if d in hi and hi[d] >= lo[d] else lo[d] for d in lo}


def host_spans(timeline: dict) -> list[dict]:
    """The recorded operations with device start and end on the host's clock, in seconds from the run's start
    (``start_s``, ``end_s``; the call as ``call_s``, ``return_s``)."""
    ops = timeline["operations"]
    offsets = clock_offsets(ops)
    t0 = timeline["host_start_ns"]
    out = []
    for op in ops:
        row = dict(op)
        row["call_s"] = (op["host_call_ns"] - t0) * 1e-9
        row["return_s"] = (op["host_return_ns"] - t0) * 1e-9
        if op["device_start_ns"] is not None and op["device"] in offsets:
            off = offsets[op["device"]]
            row["start_s"] = (op["device_start_ns"] + off - t0) * 1e-9
            row["end_s"] = (op["device_end_ns"] + off - t0) * 1e-9
        else:  # no device clock: the call's own span
            row["start_s"], row["end_s"] = row["call_s"], row["call_s"] + op["seconds"]
        out.append(row)
    return out


def _groups_of(op: dict) -> int | None:
    if op["kind"] != "kernel" or not op["global_size"] or not op["local_size"]:
        return None
    return int(math.prod(-(-g // l) for g, l in zip(op["global_size"], op["local_size"])))


def from_timeline(timeline: dict, costs: dict[str, float] | None = None) -> AlgorithmGraph:
    """The algorithm graph of a recorded run: each operation a task with its recorded duration (or, with
    ``costs``, its phase's measured seconds per call), the host's work between calls, and the queue latency and
    gap the device showed."""
    try:
        spans = host_spans(timeline)
        devices = timeline.get("devices") or [{}]
    except (KeyError, TypeError) as exc:
        raise UserError(f"not a recorded run (a timeline from `gpuprofiler measure APP --trace`): missing {exc}") \
            from None
    tasks: list[Task] = []
    latencies, gaps = [], []
    busy_until: dict[int, float] = {}
    prev_return = 0.0
    for op in spans:
        d = op["device"]
        cost = op["end_s"] - op["start_s"]
        if costs and op["phase"] in costs:
            cost = costs[op["phase"]]
        free = busy_until.get(d, -math.inf)
        if free < op["call_s"]:
            latencies.append(op["start_s"] - op["call_s"])
        else:
            gaps.append(op["start_s"] - free)
        busy_until[d] = max(free, op["end_s"])
        blocking = bool(op["blocking"])
        call_s = op["return_s"] - op["call_s"]
        after_s = 0.0
        if blocking:  # the host is held until the end (the scheduler's doing) and then for the call's tail
            after_s = max(0.0, op["return_s"] - op["end_s"])
            call_s = 0.0
        direction = None
        if op["kind"] == "copy":
            direction = "htod" if "HtoD" in op["name"] else "dtoh"
        info = devices[d] if d < len(devices) else {}
        tasks.append(Task(
            name=op["name"], kind=op["kind"], cost_s=max(0.0, cost), phase=op["phase"], direction=direction,
            bytes=int(op["bytes"]), device=d, reads=tuple(op["reads"]), writes=tuple(op["writes"]),
            blocking=blocking, host_before_s=max(0.0, op["call_s"] - prev_return), host_call_s=max(0.0, call_s),
            host_after_s=after_s, groups=_groups_of(op), compute_units=info.get("compute_units")))
        prev_return = max(prev_return, op["return_s"])
    run_s = timeline.get("run_s") or (spans[-1]["return_s"] if spans else 0.0)
    return AlgorithmGraph(
        tasks, str(timeline.get("app", "program")), host_tail_s=max(0.0, run_s - prev_return),
        queue_latency_s=float(np.median(latencies)) if latencies else None,
        queue_gap_s=float(np.median(np.clip(gaps, 0, None))) if gaps else None,
        measured={"run_s": run_s, "devices": devices, "size": timeline.get("size")})


def at_size(recorded: AlgorithmGraph, rows: list[dict], kernel_per_call: dict[str, float],
            copy_per_byte: dict[str, float], host_factor: float, size: int | None = None) -> AlgorithmGraph:
    """The program at another size: its operations there (``rows``, from a dry run), each kernel costing its phase's
    predicted seconds per call, each copy its bytes at the seconds per byte measured (per direction), and the
    recorded run's host work scaled by ``host_factor`` (operation by operation where the two runs issue the same
    operations, else all of it before the first)."""
    same = len(rows) == len(recorded.tasks) and all(r["name"] == t.name for r, t in zip(rows, recorded.tasks))
    host_total = sum(t.host_before_s + t.host_after_s for t in recorded.tasks)
    cus = recorded.tasks[0].compute_units if recorded.tasks else None
    tasks = []
    for i, r in enumerate(rows):
        if r["kind"] == "copy":
            direction = "htod" if "HtoD" in r["name"] else "dtoh"
            if direction not in copy_per_byte:
                raise UserError(f"no measured {direction} copy to price the copies at size {size}")
            cost = r["bytes"] * copy_per_byte[direction]
        else:
            if r["phase"] not in kernel_per_call:
                raise UserError(f"no prediction for phase {r['phase']!r} at size {size}")
            direction, cost = None, kernel_per_call[r["phase"]]
        was = recorded.tasks[i] if same else None
        tasks.append(Task(
            name=r["name"], kind=r["kind"], cost_s=cost, phase=r["phase"], direction=direction, bytes=int(r["bytes"]),
            device=r["device"], reads=tuple(r["reads"]), writes=tuple(r["writes"]), blocking=bool(r["blocking"]),
            host_before_s=(was.host_before_s * host_factor if was else (host_total * host_factor if i == 0 else 0.0)),
            host_call_s=was.host_call_s if was else 0.0, host_after_s=was.host_after_s * host_factor if was else 0.0,
            groups=_groups_of(r), compute_units=cus))
    return AlgorithmGraph(tasks, recorded.name, recorded.host_tail_s * host_factor if same else 0.0,
                          recorded.queue_latency_s, recorded.queue_gap_s,
                          {"devices": recorded.measured.get("devices"), "size": size})


def _number(value: Any, what: str, unit_scale: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UserError(f"{what} must be a non-negative number, got {value!r}")
    return float(value) * unit_scale


def from_toml(path: str | Path) -> AlgorithmGraph:
    """A declared algorithm: ``[[task]]`` tables with ``name``, ``kind`` (transfer|copy|compute|kernel), a cost
    (``ms`` or ``s``; or ``bytes`` for a transfer priced by the link) and ``after = [names]``; optional
    ``device``, ``direction`` (htod|dtoh) and ``groups``. Tasks are issued in file order."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path, "algorithm graph", 1 << 22))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    rows = data.get("task")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise UserError(f"{path}: an algorithm graph needs [[task]] tables")
    index: dict[str, int] = {}
    for i, row in enumerate(rows):
        name = row.get("name")
        if not isinstance(name, str) or not name or name in index:
            raise UserError(f"{path}: task {i + 1} needs a unique string 'name'")
        index[name] = i
    tasks = []
    for row in rows:
        unknown = set(row) - {"name", "kind", "ms", "s", "bytes", "after", "device", "direction", "groups", "phase"}
        if unknown:
            raise UserError(f"{path}: task {row['name']!r}: unknown key(s) {sorted(unknown)}")
        kind = row.get("kind", "compute")
        if kind not in KINDS:
            raise UserError(f"{path}: task {row['name']!r}: kind must be one of {', '.join(KINDS)}")
        kind = "copy" if kind in ("copy", "transfer") else "kernel"
        if "ms" in row and "s" in row:
            raise UserError(f"{path}: task {row['name']!r}: give its cost in ms or s, not both")
        cost = (_number(row["ms"], f"task {row['name']!r} ms", 1e-3) if "ms" in row else
                _number(row["s"], f"task {row['name']!r} s") if "s" in row else None)
        nbytes = int(_number(row.get("bytes", 0), f"task {row['name']!r} bytes"))
        if cost is None and not (kind == "copy" and nbytes):
            raise UserError(f"{path}: task {row['name']!r} needs a cost (ms or s), or bytes for a transfer")
        after = row.get("after", [])
        if not isinstance(after, list) or any(a not in index for a in after):
            raise UserError(f"{path}: task {row['name']!r}: 'after' must list names of tasks in this file")
        direction = row.get("direction", "htod" if kind == "copy" else None)
        if direction not in (None, "htod", "dtoh"):
            raise UserError(f"{path}: task {row['name']!r}: direction must be htod or dtoh")
        device = row.get("device")
        if device is not None and (isinstance(device, bool) or not isinstance(device, int) or device < 0):
            raise UserError(f"{path}: task {row['name']!r}: device must be a device index (0, 1, ...)")
        groups = row.get("groups")
        if groups is not None and (isinstance(groups, bool) or not isinstance(groups, int) or groups < 1):
            raise UserError(f"{path}: task {row['name']!r}: groups must be a positive integer")
        tasks.append(Task(name=row["name"], kind=kind, cost_s=math.nan if cost is None else cost,
                          phase=str(row.get("phase", row["name"])), direction=direction if kind == "copy" else None,
                          bytes=nbytes, device=device, after=tuple(index[a] for a in after), groups=groups))
    return AlgorithmGraph(tasks, str(data.get("name", path.stem)))
