"""What a runner is: it runs units of measurement work (tasks), each on a device it holds exclusively, and hands
every result back to the caller as it finishes.

A task names the device it needs: one device (a :class:`Slot`: a calibration) or any device of a kind (the device's
slug: a kernel measured for validation or tuning). The task's function runs where the device is, as
``fn(ctx, *args)``; ``ctx`` (:class:`Context`) opens the device there. Whatever the runner, the caller stores the
results: a runner never writes a measurement itself.
"""

from __future__ import annotations

import abc
import atexit
import platform
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gpuprofiler.device.base import Backend


@dataclass(frozen=True)
class Slot:
    """A device a runner can measure on: the worker that holds it, that worker's host (``host``: its name, ``ip``:
    the address the scheduler knows it by) and the worker resource that stands for the device (its id as the
    worker opens it, optionally ``@tag`` to tell apart workers that each see their own GPU as ``cuda:0``)."""

    worker: str
    host: str
    ip: str
    resource: str
    info: dict = field(hash=False, compare=False)

    @property
    def device_id(self) -> str:
        return self.resource.partition("@")[0]

    @property
    def kind(self) -> str:
        """Devices of one kind are alike: the same slug (model name and platform)."""
        return str(self.info.get("slug") or self.info.get("name") or self.device_id)

    @property
    def name(self) -> str:
        return f"{self.host}/{self.resource}"


@dataclass
class Task:
    """One unit of work: ``fn(ctx, *args)`` (a module-level function: it may be sent to another process) run on
    ``slot``, or on any device of ``kind``; ``key`` names it (unique within a run)."""

    key: str
    fn: Callable[..., Any]
    args: tuple = ()
    kind: str | None = None
    slot: Slot | None = None
    label: str = ""

    def __post_init__(self) -> None:
        if (self.kind is None) == (self.slot is None):
            raise ValueError(f"task {self.key}: give exactly one of kind and slot")


@dataclass
class Outcome:
    """A finished task: its value, the slot it ran on and the seconds its function took there."""

    value: Any
    slot: Slot
    seconds: float


class TaskFailed(Exception):
    """A task that ended with an error (or whose worker died as often as the runner allows): the error kept."""

    def __init__(self, task: Task, error: BaseException):
        super().__init__(f"{task.label or task.key}: {error}")
        self.task, self.error = task, error


class Context:
    """What a task's function sees where it runs: the device (``backend()``, opened once per process and kept),
    whether launches go to an isolated worker process (``isolate``), and ``emit`` for partial results (the
    sequential runner hands them over at once; elsewhere they are dropped and the final value counts)."""

    def __init__(self, resource: str, isolate: bool | None, emit: Callable[[Any], None] | None = None,
                 backend: Backend | None = None):
        self.resource = resource
        self.device_id = resource.partition("@")[0]
        self.isolate = isolate
        self._emit = emit
        self._backend = backend
        self._bound: list[Backend] = []

    def backend(self) -> Backend:
        if self._backend is not None:
            return self._backend
        backend = process_backend(self.device_id)
        bind = getattr(backend, "bind_thread", None)  # a registered scheme's backend may not subclass Backend
        if bind is not None:
            bind()
            self._bound.append(backend)
        return backend

    def release(self) -> None:
        """The task is over: the devices it bound to this thread let go of it (a CUDA context left pushed on a
        pool's thread makes pycuda abort the worker process at exit)."""
        while self._bound:
            self._bound.pop().unbind_thread()

    def emit(self, partial: Any) -> None:
        if self._emit is not None:
            self._emit(partial)


_backends: dict[str, Backend] = {}
_backends_lock = threading.Lock()


def process_backend(device_id: str) -> Backend:
    """This process's backend of ``device_id``: opened on first use (a worker keeps its devices open between
    tasks), closed at exit."""
    from gpuprofiler.device import open_backend

    with _backends_lock:
        got = _backends.get(device_id)
        if got is None:
            got = _backends[device_id] = open_backend(device_id)
        return got


@atexit.register
def _close_backends() -> None:
    for backend in list(_backends.values()):
        try:
            backend.close()
        except Exception:  # noqa: BLE001 - at exit, a device that will not close is left to the OS
            pass
    _backends.clear()


def execute(fn: Callable[..., Any], resource: str, isolate: bool | None, args: tuple) -> tuple[Any, str, float, float]:
    """Run a task's function in this process on the device ``resource`` names: its value, this host's name and the
    start and end (time.time) of the run."""
    ctx = Context(resource, isolate)
    start = time.time()
    try:
        value = fn(ctx, *args)
        end = time.time()  # what releasing the device costs counts as the runner's overhead, not the task's time
    finally:
        ctx.release()
    return value, platform.node(), start, end


def local_devices() -> list[str]:
    """The devices of this machine a local cluster measures on, each physical device once: its CUDA GPUs, else its
    OpenCL GPUs (NVIDIA's OpenCL shows the CUDA GPUs again), else one CPU device (every OpenCL CPU platform runs
    on the same cores, and a CPU device at work would slow the host side of a GPU's measurements)."""
    from gpuprofiler.device import default_device_id, list_devices

    devices = [d for d in list_devices() if not d.extra.get("problem")]
    cuda = [d.id for d in devices if d.backend == "cuda"]
    gpus = [d.id for d in devices if d.backend == "opencl" and d.type == "gpu"]
    if cuda or gpus:
        return cuda or gpus
    return [default_device_id(devices)] if devices else []


OnDone = Callable[[Task, Outcome], Iterable[Task] | None]
OnFailed = Callable[[TaskFailed], None]


def raise_failure(failure: TaskFailed) -> None:
    raise failure.error


def measured_before(failure: TaskFailed, slots: list[Slot]) -> tuple[dict[int, list[dict]], Slot | None]:
    """What a failed task measured before its error (size -> records, left on the error as ``measured`` by the
    task's function, e.g. :func:`~gpuprofiler.workloads.sweep.sweep_task`) and the slot it ran on (None: unknown)."""
    got = getattr(failure.error, "measured", None)
    if not isinstance(got, dict) or not got.get("by_size"):
        return {}, None
    slot = failure.task.slot or next((s for s in slots if s.host == got.get("host")
                                      and s.resource == got.get("resource")), None)
    return dict(got["by_size"]), slot


class Runner(abc.ABC):
    """Runs tasks on the devices it holds (:meth:`slots`); :meth:`run` hands each result to ``on_done`` as it
    finishes (which may return more tasks, run after those given) and each failure to ``on_failed`` (default:
    raise it, after which nothing more starts)."""

    name = "runner"

    @abc.abstractmethod
    def slots(self) -> list[Slot]:
        """The devices this runner measures on."""

    @abc.abstractmethod
    def run(self, tasks: Iterable[Task], on_done: OnDone, on_failed: OnFailed = raise_failure,
            on_partial: Callable[[Task, Any], None] | None = None) -> None:
        """Run every task (and those ``on_done`` adds); ``on_partial`` gets what a task emits before it ends,
        where the runner can hand it over (in this process)."""

    def close(self) -> None:
        """Give back what the runner started."""

    def kinds(self) -> dict[str, list[Slot]]:
        """The runner's slots by device kind."""
        out: dict[str, list[Slot]] = {}
        for s in self.slots():
            out.setdefault(s.kind, []).append(s)
        return out

    def describe(self) -> str:
        return self.name

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
