"""The default runner: every task in this process, one after the other, on the device the command opened."""

from __future__ import annotations

import collections
import platform
import time
from collections.abc import Iterable

from gpuprofiler.device.base import Backend
from gpuprofiler.errors import GpuProfilerError
from gpuprofiler.measure.runners.base import (
    Context,
    OnDone,
    OnFailed,
    Outcome,
    Runner,
    Slot,
    Task,
    TaskFailed,
    raise_failure,
)


class SequentialRunner(Runner):
    """Tasks run here in order on ``backend`` (its launches in the device's isolated worker process unless
    ``isolate`` says otherwise, as without a runner); a task's partial results (``ctx.emit``) reach
    ``on_partial`` at once, so what finishes is stored as it finishes."""

    name = "sequential"

    def __init__(self, backend: Backend, isolate: bool | None = None):
        self.backend = backend
        self.isolate = isolate
        self.slot = Slot("local", platform.node(), "127.0.0.1", backend.info.id, backend.info.to_dict())

    def slots(self) -> list[Slot]:
        return [self.slot]

    def run(self, tasks: Iterable[Task], on_done: OnDone, on_failed: OnFailed = raise_failure,
            on_partial=None) -> None:
        given = iter(tasks)  # taken one at a time: a task is made when its turn comes
        queue: collections.deque[Task] = collections.deque()
        while True:
            task = queue.popleft() if queue else next(given, None)
            if task is None:
                return
            if task.slot is not None and task.slot != self.slot or task.kind is not None and task.kind != self.slot.kind:
                on_failed(TaskFailed(task, GpuProfilerError(f"needs {task.kind or task.slot.name}, and this run "
                                                            f"has only {self.slot.kind} ({self.slot.device_id})")))
                continue
            emit = (lambda partial, t=task: on_partial(t, partial)) if on_partial else None
            ctx = Context(self.slot.resource, self.isolate, emit, self.backend)
            t0 = time.perf_counter()
            try:
                value = task.fn(ctx, *task.args)
            except GpuProfilerError as exc:
                on_failed(TaskFailed(task, exc))
                continue
            more = on_done(task, Outcome(value, self.slot, time.perf_counter() - t0))
            if more:
                queue.extendleft(reversed(list(more)))
