"""Discrete-event list scheduling of an algorithm graph on a machine.

The host issues the tasks in the program's order (its own work between calls, as recorded, holds it; a blocking
call holds it until the operation ends). Each device has a queue:

- **in-order**: one resource per device runs its copies and kernels one after another, as an OpenCL in-order
  queue or a CUDA stream does (the second of two queued operations starts the recorded queue gap after the first);
- **out-of-order**: the device's kernels, its uploads and its downloads are three resources (a compute engine and
  a copy engine per direction), so a transfer overlaps a kernel where the data allow.

A task starts when the host has issued it (plus the queue latency), its resource is free and every task it depends
on has ended. Placement: a recorded task keeps its device where the machine has it; otherwise each placement group
(tasks that share data) goes whole to the device where its first task would start earliest (list scheduling).
A kernel measured on a device of C compute units runs on one of C' in proportion to its waves of work-groups,
ceil(groups / C') / ceil(groups / C) (all its work-groups alike; memory-bound kernels scale less), divided by the
device's ``rate`` (its compute units' speed relative to the measurement's: sub-devices that together fill a
physical device run at the rate the whole device showed). A copy keeps its measured cost, or is priced by the
link's measured curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.simulate.algorithm import AlgorithmGraph, Task
from gpuprofiler.simulate.architecture import Machine

QUEUES = ("in-order", "out-of-order")
PLACEMENTS = ("recorded", "earliest")


@dataclass
class Slot:
    """One task's place in the simulated timeline."""

    task: int
    name: str
    phase: str
    kind: str
    resource: str  # "host", "dev0", "dev0.htod", ...
    device: int | None
    start_s: float
    end_s: float
    bound_by: str = ""  # what decided the start: "host", "queue", "data", or "" (time zero)
    after: int | None = None  # the slot index that bound it


@dataclass
class Schedule:
    """A simulated run: every slot, the makespan, utilisation per resource and the critical path."""

    slots: list[Slot]
    makespan_s: float
    machine: str
    queue: str
    placement: str
    critical_path: list[int] = field(default_factory=list)  # slot indices, first to last

    def utilisation(self) -> dict[str, float]:
        """Busy seconds over the makespan, per resource."""
        busy: dict[str, float] = {}
        for s in self.slots:
            busy[s.resource] = busy.get(s.resource, 0.0) + (s.end_s - s.start_s)
        return {r: (b / self.makespan_s if self.makespan_s > 0 else 0.0) for r, b in sorted(busy.items())}

    def critical(self) -> list[dict[str, Any]]:
        return [{"name": self.slots[i].name, "resource": self.slots[i].resource,
                 "start_s": self.slots[i].start_s, "end_s": self.slots[i].end_s,
                 "bound_by": self.slots[i].bound_by} for i in self.critical_path]

    def summary(self) -> dict[str, Any]:
        path = self.critical()
        return {"machine": self.machine, "queue": self.queue, "placement": self.placement,
                "makespan_s": self.makespan_s, "utilisation": self.utilisation(),
                "critical_path": {"steps": len(path), "busy_s": sum(s["end_s"] - s["start_s"] for s in path),
                                  "first": path[0]["name"] if path else None,
                                  "last": path[-1]["name"] if path else None}}


def kernel_cost(task: Task, compute_units: int) -> float:
    """The kernel's cost on a device of ``compute_units``, scaled by its waves of work-groups from the device that
    gave the cost."""
    measured_on = task.compute_units
    if task.kind != "kernel" or not measured_on or measured_on == compute_units:
        return task.cost_s
    groups = task.groups or max(measured_on, compute_units)
    return task.cost_s * math.ceil(groups / compute_units) / math.ceil(groups / measured_on)


def copy_cost(task: Task, machine: Machine, device: int) -> float:
    if not math.isnan(task.cost_s):
        return task.cost_s
    link = machine.devices[device].links.get(task.direction or "htod")
    if link is None:
        raise UserError(f"task {task.name!r}: a transfer given in bytes needs the link's figures: pass --profile")
    return link.seconds(task.bytes)


def simulate(alg: AlgorithmGraph, machine: Machine, queue: str = "in-order", placement: str | None = None) -> Schedule:
    """List-schedule ``alg`` on ``machine``; ``placement`` defaults to "recorded" when the machine has exactly the
    devices the recording used, else "earliest"."""
    if queue not in QUEUES:
        raise UserError(f"queue must be one of {', '.join(QUEUES)}")
    ndev = len(machine.devices)
    recorded = all(t.device is not None and t.device < ndev for t in alg.tasks)
    used = {t.device for t in alg.tasks}
    placement = placement or ("recorded" if recorded and len(used) == ndev else "earliest")
    if placement not in PLACEMENTS:
        raise UserError(f"placement must be one of {', '.join(PLACEMENTS)}")
    if placement == "recorded" and not recorded:
        raise UserError(f"placement 'recorded' needs every task's device on the machine ({ndev} device(s))")
    latency = [alg.queue_latency_s if alg.queue_latency_s is not None else (d.launch_s or 0.0)
               for d in machine.devices]
    gap = alg.queue_gap_s or 0.0
    groups = alg.groups()
    group_device: dict[int, int] = {}
    free: dict[str, tuple[float, int | None]] = {}  # resource -> (free at, slot that holds it)
    slots: list[Slot] = []
    slots_of: dict[int, Slot] = {}  # task -> its slot
    slot_index: dict[int, int] = {}
    host_t, host_slot = 0.0, None
    preds = alg.graph.pred

    def resource(task: Task, d: int) -> str:
        if queue == "in-order":
            return f"dev{d}"
        return f"dev{d}.{task.direction}" if task.kind == "copy" else f"dev{d}"

    def start_on(task: Task, d: int, issued: float) -> tuple[float, str, int | None]:
        r = resource(task, d)
        at, bound, by = issued + latency[d], "host", host_slot
        busy, holder = free.get(r, (-math.inf, None))
        if busy + gap > at:
            at, bound, by = busy + gap, "queue", holder
        return at, bound, by

    for i, task in enumerate(alg.tasks):
        if task.host_before_s > 0:
            slots.append(Slot(-1, "host", "host", "host", "host", None, host_t, host_t + task.host_before_s,
                              "host" if host_slot is not None else "", host_slot))
            host_slot = len(slots) - 1
            host_t += task.host_before_s
        issued = host_t
        if placement == "recorded":
            d = int(task.device)
        elif groups[i] in group_device:
            d = group_device[groups[i]]
        else:
            d = min(range(ndev), key=lambda k: (start_on(task, k, issued)[0], k))
        group_device[groups[i]] = d
        at, bound, by = start_on(task, d, issued)
        for j in preds[i]:
            if slots_of[j].end_s > at:
                at, bound, by = slots_of[j].end_s, "data", slot_index[j]
        dev = machine.devices[d]
        cost = copy_cost(task, machine, d) if task.kind == "copy" else kernel_cost(task, dev.compute_units) / dev.rate
        slot = Slot(i, task.name, task.phase, task.kind, resource(task, d), d, at, at + cost, bound, by)
        slots.append(slot)
        slots_of[i], slot_index[i] = slot, len(slots) - 1
        free[slot.resource] = (slot.end_s, len(slots) - 1)
        if task.blocking:
            host_t = max(host_t + task.host_call_s, slot.end_s + task.host_after_s)
            host_slot = len(slots) - 1
        else:
            host_t += task.host_call_s
    if alg.host_tail_s > 0:
        slots.append(Slot(-1, "host", "host", "host", "host", None, host_t, host_t + alg.host_tail_s, "host",
                          host_slot))
        host_t += alg.host_tail_s
    end = max([host_t] + [s.end_s for s in slots])
    return Schedule(slots, end, machine.name, queue, placement, _critical_path(slots, end))


def _critical_path(slots: list[Slot], end: float) -> list[int]:
    """From the slot that ends last, back through what bound each start: the chain that sets the makespan."""
    if not slots:
        return []
    last = max(range(len(slots)), key=lambda k: (slots[k].end_s, k))
    path = [last]
    while slots[path[-1]].after is not None and len(path) <= len(slots):
        path.append(slots[path[-1]].after)
    return path[::-1]


def scaling(alg: AlgorithmGraph, machines: list[Machine], queue: str = "in-order") -> dict[str, Any]:
    """Makespans on machines of 1..k devices, the speedups, and Amdahl's serial fraction fitted to them (least
    squares of 1/S = f + (1 - f)/p), with Gustafson's scaled speedup p - f (p - 1) from the same f."""
    rows = []
    for m in machines:
        s = simulate(alg, m, queue, "earliest" if len(m.devices) > 1 else None)
        rows.append({"devices": len(m.devices), "machine": m.name, "makespan_s": s.makespan_s})
    base = rows[0]["makespan_s"]
    p = np.array([r["devices"] for r in rows], float)
    speed = np.array([base / r["makespan_s"] if r["makespan_s"] > 0 else math.nan for r in rows])
    f = None
    if len(rows) > 1 and np.all(np.isfinite(speed)) and np.ptp(p) > 0:
        x, y = 1 - 1 / p, 1 - 1 / speed  # 1/S = 1 - (1 - f)(1 - 1/p)  =>  1 - 1/S = (1 - f) x
        denom = float(x @ x)
        if denom > 0:
            f = float(min(1.0, max(0.0, 1 - (x @ y) / denom)))
    for r, s in zip(rows, speed):
        r["speedup"] = float(s)
        r["efficiency"] = float(s / r["devices"])
        r["amdahl_speedup"] = None if f is None else 1 / (f + (1 - f) / r["devices"])
        r["gustafson_speedup"] = None if f is None else r["devices"] - f * (r["devices"] - 1)
    return {"rows": rows, "serial_fraction": f}
