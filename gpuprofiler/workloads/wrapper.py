"""Wrapping real runs: every kernel launch and copy of a user's program is recorded and summed per phase.

A program is a Python function ``run(ctx, n)``. It reaches the device through
the :class:`RunContext` it is given (``ctx.compile``, ``ctx.to_device``,
``ctx.launch``, ``ctx.from_device``), so each operation's device event is kept.
Code that calls pyopencl/pycuda directly (``ctx.native``) hands its events to
``ctx.record(name, event)``. ``with ctx.region("solve"):`` names a phase that
spans several kernels, like an NVTX range. ``ctx.devices`` lists one context per device the program may use (the
sub-devices of a split device; just ``[ctx]`` otherwise).

Each operation also keeps what a timeline and a task graph need: the device it ran on, the buffers it read and
wrote (a kernel's buffer arguments count as both), whether the host waited for it, and the host's clock when the
call began and returned beside the device's start and end.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from gpuprofiler.device.base import Backend, Buffer, Event, Kernel
from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import fixed
from gpuprofiler.workloads.checking import poison

HTOD = "memcpy HtoD"
DTOH = "memcpy DtoH"


WORK_UNITS = {"copy": "bytes", "kernel": "work-items"}


@dataclass(slots=True)
class Operation:
    """One recorded device operation."""

    name: str  # kernel name or copy direction
    phase: str  # region name if inside one, else ``name``
    kind: str  # "kernel" | "copy"
    event: Event
    global_size: tuple[int, ...] = ()
    local_size: tuple[int, ...] | None = None
    nbytes: int = 0
    device: int = 0  # index into the run's devices
    reads: tuple[int, ...] = ()  # buffers' serials (numbered 0, 1, ... in first use order by the timeline)
    writes: tuple[int, ...] = ()
    blocking: bool = False  # the host waited for it to finish
    host_ns: tuple[int, int] = (0, 0)  # perf_counter_ns when the call began and returned

    def timeline(self, index: int) -> dict[str, Any]:
        """This operation as a timeline row (plain data; the device's clock, valid after the queue is finished)."""
        span = self.event.span_ns()
        return {"index": index, "name": self.name, "phase": self.phase, "kind": self.kind, "device": self.device,
                "reads": list(self.reads), "writes": list(self.writes), "blocking": self.blocking,
                "bytes": int(self.nbytes), "global_size": list(self.global_size),
                "local_size": None if self.local_size is None else list(self.local_size),
                "host_call_ns": self.host_ns[0], "host_return_ns": self.host_ns[1],
                "device_start_ns": None if span is None else span[0],
                "device_end_ns": None if span is None else span[1], "seconds": self.event.seconds()}


class SettledEvent(Event):
    """A finished operation's times as numbers: what a run keeps once its queue is done, so that runs held for
    later (a timeline is built from one of them) hold no runtime objects."""

    __slots__ = ("_seconds", "_span")

    def __init__(self, seconds: float, span: tuple[int, int] | None):
        self._seconds, self._span = seconds, span

    def seconds(self) -> float:
        return self._seconds

    def span_ns(self) -> tuple[int, int] | None:
        return self._span


@dataclass
class Recorder:
    """The operations of one run, in order."""

    operations: list[Operation] = field(default_factory=list)
    regions: list[str] = field(default_factory=list)
    detail: bool = True  # buffers and host clocks kept (off only to measure what keeping them costs)

    def add(self, name: str, kind: str, event: Event, **extra) -> None:
        phase = self.regions[-1] if self.regions else name
        self.operations.append(Operation(name, phase, kind, event, **extra))

    def settle(self) -> None:
        """Replace each operation's device event by its times (valid after the queue is finished)."""
        for op in self.operations:
            if not isinstance(op.event, SettledEvent):
                op.event = SettledEvent(op.event.seconds(), op.event.span_ns())

    def timeline(self) -> list[dict[str, Any]]:
        """Every operation as a timeline row, in the order the program issued them, its buffers numbered 0, 1, ...
        as the run first used them."""
        rows = [op.timeline(i) for i, op in enumerate(self.operations)]
        number: dict[int, int] = {}
        for row in rows:
            for key in ("reads", "writes"):
                row[key] = [number.setdefault(b, len(number)) for b in row[key]]
        return rows

    def phase_times(self) -> dict[str, dict[str, Any]]:
        """Per phase: calls, total device seconds, kind, and its work: bytes copied for copies, work-items
        launched for kernels (None where a phase mixes the two or holds an operation of unknown size);
        valid after the queue is finished."""
        phases: dict[str, dict[str, Any]] = {}
        for op in self.operations:
            p = phases.setdefault(op.phase, {"calls": 0, "total_s": 0.0, "kind": op.kind, "kernels": [],
                                             "work": 0, "work_unit": WORK_UNITS.get(op.kind)})
            p["calls"] += 1
            p["total_s"] += op.event.seconds()
            if op.name not in p["kernels"]:
                p["kernels"].append(op.name)
            work = op.nbytes if op.kind == "copy" else math.prod(op.global_size) if op.global_size else 0
            if p["work"] is None or p["work_unit"] is None or WORK_UNITS.get(op.kind) != p["work_unit"] \
                    or work <= 0:
                p["work"], p["work_unit"] = None, None
            else:
                p["work"] += int(work)
        return phases


_BUFFER_TYPES: dict[type, bool] = {}


def _is_buffer(arg: Any) -> bool:
    """isinstance(arg, Buffer), answered once per type (an ABC's isinstance is slow for a launch's every argument)."""
    kind = type(arg)
    known = _BUFFER_TYPES.get(kind)
    if known is None:
        known = _BUFFER_TYPES[kind] = isinstance(arg, Buffer)
    return known


class RunContext:
    """What a wrapped program sees: the device, with every operation recorded."""

    def __init__(self, backend: Backend, recorder: Recorder | None = None, base_dir: Path | None = None,
                 poison: bool = False, peers: Sequence[Backend] | None = None):
        self.backend = backend
        self.poison = poison  # checked run: fresh buffers start as NaN / max int, so unwritten output shows
        self.recorder = recorder if recorder is not None else Recorder()
        self.base_dir = base_dir or Path.cwd()
        self.device_index = 0
        self._devices = [self]
        for k, other in enumerate(list(peers or [])[1:], start=1):
            ctx = RunContext(other, self.recorder, self.base_dir, poison)
            ctx.device_index, ctx._devices = k, self._devices
            self._devices.append(ctx)

    @property
    def devices(self) -> list["RunContext"]:
        """One context per device the program may use, this one first (a program splits its work over them)."""
        return self._devices

    @property
    def kind(self) -> str:
        """``"opencl"`` or ``"cuda"``: lets a program pick its source file."""
        return self.backend.kind

    @property
    def native(self) -> Backend:
        """The backend, for direct pyopencl/pycuda use (``.queue``, ``.context``)."""
        return self.backend

    def source(self, stem: str) -> str:
        """Text of ``stem.cl`` or ``stem.cu`` (by backend) next to the program file."""
        return (self.base_dir / f"{stem}{self.backend.source_suffix}").read_text()

    def compile(self, source: str, kernel_name: str, defines: dict[str, Any] | None = None) -> Kernel:
        """Compile (cached per source and defines, so repeated runs do not recompile)."""
        return self.backend.compile(source, kernel_name, defines)

    def to_device(self, array: np.ndarray, buffer: Buffer | None = None) -> Buffer:
        if not self.recorder.detail:
            buf, event = self.backend.to_device(np.ascontiguousarray(array), buffer)
            self.recorder.add(HTOD, "copy", event, nbytes=int(array.nbytes))
            return buf
        t0 = time.perf_counter_ns()
        buf, event = self.backend.to_device(np.ascontiguousarray(array), buffer)
        t1 = time.perf_counter_ns()
        self.recorder.add(HTOD, "copy", event, nbytes=int(array.nbytes), device=self.device_index,
                          writes=(buf.serial,), blocking=True, host_ns=(t0, t1))
        return buf

    def empty(self, shape, dtype) -> Buffer:
        """Uninitialised device array (poisoned during a checked run; that upload is not recorded)."""
        buf = self.backend.alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize)
        if self.poison:
            self.backend.to_device(poison(np.empty(shape, dtype)), buf)
        return buf

    def from_device(self, buffer: Buffer, out: np.ndarray) -> np.ndarray:
        if not self.recorder.detail:
            self.recorder.add(DTOH, "copy", self.backend.from_device(buffer, out), nbytes=int(out.nbytes))
            return out
        t0 = time.perf_counter_ns()
        event = self.backend.from_device(buffer, out)
        t1 = time.perf_counter_ns()
        self.recorder.add(DTOH, "copy", event, nbytes=int(out.nbytes), device=self.device_index,
                          reads=(buffer.serial,), blocking=True, host_ns=(t0, t1))
        return out

    def launch(self, kernel: Kernel, global_size: Sequence[int], local_size: Sequence[int] | None,
               *args: Any) -> Event:
        if not self.recorder.detail:
            event = self.backend.launch(kernel, global_size, local_size, args)
            self.recorder.add(kernel.name, "kernel", event, global_size=tuple(global_size),
                              local_size=None if local_size is None else tuple(local_size))
            return event
        t0 = time.perf_counter_ns()
        event = self.backend.launch(kernel, global_size, local_size, args)
        t1 = time.perf_counter_ns()
        serials, nbytes = [], 0
        for a in args:
            if _is_buffer(a):
                serials.append(a.serial)
                nbytes += a.nbytes
        used = tuple(serials)
        rec = self.recorder  # the fields in order, no keywords: this runs for every launch of a measured program
        rec.operations.append(Operation(kernel.name, rec.regions[-1] if rec.regions else kernel.name, "kernel", event,
                                        tuple(global_size), None if local_size is None else tuple(local_size),
                                        nbytes, self.device_index, used, used, False, (t0, t1)))
        return event

    def record(self, name: str, event: Event, kind: str = "kernel") -> None:
        """Add an operation the program enqueued itself (wrap a pyopencl event with CLEvent): no buffers known."""
        t = time.perf_counter_ns()
        self.recorder.add(name, kind, event, device=self.device_index, host_ns=(t, t))

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        """Operations inside are summed as phase ``name`` (nested regions: the innermost wins)."""
        self.recorder.regions.append(name)
        try:
            yield
        finally:
            self.recorder.regions.pop()

    def finish(self) -> None:
        for ctx in self._devices:
            ctx.backend.finish()


_OVERHEAD: "weakref.WeakKeyDictionary[Backend, dict[str, float]]" = weakref.WeakKeyDictionary()


def launch_overhead(backend: Backend, launches: int = 400) -> dict[str, float]:
    """Host time per launch that recording adds: ``ctx.launch`` against a bare backend launch of an empty kernel.

    Measured once per opened backend (every app measurement reports it). Bare and wrapped launches
    alternate in each of the engine's samples, so drift in the machine's load hits both; medians are reported.
    """
    if backend in _OVERHEAD:
        return _OVERHEAD[backend]
    source = {"opencl": "__kernel void empty(int n) { }",
              "cuda": 'extern "C" __global__ void empty(int n) { }'}[backend.kind]
    kernel = backend.compile(source, "empty")
    arg = np.int32(0)
    ctx = RunContext(backend)
    bare: list[float] = []
    wrapped: list[float] = []

    def pair() -> float:
        t0 = time.perf_counter()
        backend.launch(kernel, (1,), (1,), (arg,))
        t1 = time.perf_counter()
        ctx.launch(kernel, (1,), (1,), arg)
        t2 = time.perf_counter()
        bare.append(t1 - t0)
        wrapped.append(t2 - t1)
        if len(bare) % 50 == 0:  # keep the queue and the recorder short
            backend.finish()
            ctx.recorder.operations.clear()
        return t2 - t1

    # the first launches warm up JIT and caches; the engine keeps them apart
    timing = Engine(fixed(launches, warmup=20)).sample(pair)
    backend.finish()
    del bare[:len(timing.warmup_s)], wrapped[:len(timing.warmup_s)]
    b, w = float(np.median(bare)), float(np.median(wrapped))
    _OVERHEAD[backend] = {"bare_launch_s": b, "wrapped_launch_s": w, "overhead_per_launch_s": w - b}
    return _OVERHEAD[backend]
