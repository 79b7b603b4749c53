"""What else ran on the host's cores while a measurement ran: the CPU time other processes took on the cores this
process may use (Linux ``/proc/stat``, time stolen by a hypervisor included), beside the load average. On a CPU
device (PoCL) those cores are the device: another process on them slows every sample alike, which no statistic of
the samples can see, so a record says what it shared the cores with."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

CONTENDED_SHARE = 0.25  # other processes took at least this share of the cores' time: the record is contended
JUDGED_S = 0.5  # core-seconds a measurement must span to be judged: /proc/stat counts in ticks of 10 ms
_BUSY = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (guest time is counted in user)


@dataclass(frozen=True)
class Snapshot:
    wall_s: float
    busy_s: float | None  # the cores' busy time, every process's (None: no /proc/stat)
    own_s: float          # this process's CPU time, all its threads
    cpus: int


def _cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _busy(cpus: set[int]) -> float | None:
    """Busy seconds of ``cpus`` since boot, from /proc/stat; None where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as fh:
            text = fh.read().decode("ascii", "replace")
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    total = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            fields = rest.split()
            total += sum(int(fields[i]) for i in _BUSY if i < len(fields))
    return total / tick if total else None


def snapshot() -> Snapshot:
    """The cores' busy time and this process's own, now."""
    cpus = _cpus()
    t = os.times()
    return Snapshot(time.monotonic(), _busy(cpus), t.user + t.system, len(cpus))


def between(start: Snapshot, end: Snapshot) -> dict[str, Any] | None:
    """What other processes took of the cores from ``start`` to ``end``: ``other_cpu_s`` (their CPU seconds),
    ``share`` (of the cores' time, 0..1), ``wall_s``, ``cpus`` and the 1-minute load average; None without
    /proc/stat."""
    wall = end.wall_s - start.wall_s
    if start.busy_s is None or end.busy_s is None or wall <= 0:
        return None
    other = max(0.0, (end.busy_s - start.busy_s) - (end.own_s - start.own_s))
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"other_cpu_s": other, "wall_s": wall, "cpus": end.cpus, "share": min(1.0, other / (wall * end.cpus)),
            "load1": load}


def contended(contention: dict[str, Any] | None, device_type: str | None) -> bool:
    """Whether a record on a device of ``device_type`` shared its cores: a CPU device whose cores other processes
    took :data:`CONTENDED_SHARE` of while it ran, over at least :data:`JUDGED_S` core-seconds (shorter spans are a
    few clock ticks: not judged); a GPU's own time does not depend on the host's cores."""
    return bool(device_type == "cpu" and contention and contention.get("share", 0.0) >= CONTENDED_SHARE
                and contention.get("wall_s", 0.0) * contention.get("cpus", 1) >= JUDGED_S)


def combine(parts: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Several stretches' contention as one (a measurement timed in blocks): CPU seconds and wall time summed, the
    share of their sums, the highest load; None where none was measured."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    other, wall, cpus = sum(p["other_cpu_s"] for p in parts), sum(p["wall_s"] for p in parts), parts[-1]["cpus"]
    loads = [p["load1"] for p in parts if p.get("load1") is not None]
    return {"other_cpu_s": other, "wall_s": wall, "cpus": cpus, "share": min(1.0, other / (wall * cpus)),
            "load1": max(loads) if loads else None}
