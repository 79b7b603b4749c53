"""Tasks on a Dask distributed cluster: a device is a worker resource, so a task that needs it runs alone on it.

A worker holds a device by advertising a resource named by the device's id as that worker opens it (``dask worker
ADDRESS --resources "cuda:0=1"``), with an optional ``@tag`` where several workers of one host each see their own
GPU as ``cuda:0`` (dask-cuda's layout: ``cuda:0@gpu3``). A task asks for one unit of its device's resource, so two
measurements never share a device; a host on which two workers claim the same resource is refused. A task for one
device is restricted to its host; a task for a kind may run on any device of the kind. When the worker running a
task dies, the scheduler runs it again on another worker that holds such a device (the restarted one, on a local
cluster), up to ``distributed.scheduler.allowed-failures`` times; then it is reported failed. Results come back to
the client, which alone stores them: a task that died left nothing behind.

At most ``window`` tasks are submitted at once (twice the devices by default), so a run of a million tasks holds
a bounded number of futures on the client and the scheduler.
"""

from __future__ import annotations

import collections
import copy
import itertools
import logging
import platform
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from gpuprofiler.errors import DeviceError, GpuProfilerError, UserError
from gpuprofiler.measure.runners.base import (
    OnDone,
    OnFailed,
    Outcome,
    Runner,
    Slot,
    Task,
    TaskFailed,
    execute,
    local_devices,
    raise_failure,
)

INSTALL = "pip install 'gpuprofiler[dask]'"


def import_distributed():
    """The ``distributed`` module, or a UserError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise UserError(f"--cluster runs on Dask distributed, which is not installed: {INSTALL}") from None
    return distributed


def _describe(dask_worker=None) -> dict[str, Any]:
    """On a worker: its host, name, address and the DeviceInfo of each device resource it advertises."""
    from gpuprofiler.device import describe_devices, is_device_id

    resources = dict(dask_worker.state.total_resources)
    wanted = {r: r.partition("@")[0] for r in resources if is_device_id(r.partition("@")[0])}
    found = describe_devices(sorted(set(wanted.values())))
    devices = {}
    for resource, device_id in wanted.items():
        d = found.get(device_id)
        devices[resource] = (d.to_dict() if d is not None else
                             {"problem": f"no device {device_id} on this worker (`gpuprofiler devices` there)"})
    return {"host": platform.node(), "name": str(dask_worker.name), "address": dask_worker.address,
            "devices": devices}


def _run_there(fn: Callable[..., Any], resource: str, args: tuple) -> tuple:
    """A task on a Dask worker: launches in this worker process (the worker is the process a crash takes down)."""
    from distributed import get_worker
    from distributed.comm import get_address_host

    value, host, start, end = execute(fn, resource, False, args)
    worker = get_worker()
    return value, get_address_host(worker.address), start, end


class DaskRunner(Runner):
    """Tasks on the cluster a :class:`distributed.Client` is connected to (``client``), or at ``address``."""

    name = "dask"

    def __init__(self, address: str | None = None, client=None, window: int | None = None, cluster=None,
                 what: str | None = None):
        distributed = import_distributed()
        self.cluster = cluster
        if client is None:
            try:
                client = distributed.Client(address, timeout="20s")
            except OSError as exc:
                raise UserError(f"--cluster {address}: no Dask scheduler answered ({exc}); start one with "
                                f"`dask scheduler` and workers with `dask worker {address} --resources "
                                f"\"cuda:0=1\"`") from None
        self.client = client
        self.own = address is not None or cluster is not None
        self.window = window
        self.what = what or address or "a Dask cluster"
        self._slots: list[Slot] | None = None
        self._turn: dict[str, itertools.count] = collections.defaultdict(itertools.count)

    @classmethod
    def local(cls, workers: int, device_ids: list[str] | None = None, processes: bool = True,
              window: int | None = None) -> "DaskRunner":
        """A LocalCluster of ``workers`` worker processes (``processes``; else threads of this process) on this
        machine; its devices (``device_ids``, default :func:`~gpuprofiler.measure.runners.local_devices`) dealt out
        so that each belongs to one worker."""
        distributed = import_distributed()
        if device_ids is None:
            device_ids = local_devices()
        if not device_ids:
            raise UserError("--cluster local: this machine has no device (see `gpuprofiler devices`)")
        cluster = distributed.LocalCluster(n_workers=0, processes=processes, threads_per_worker=1,
                                           dashboard_address=":0", silence_logs=logging.ERROR)
        for i in range(workers):
            mine = device_ids[i::workers]
            spec = copy.deepcopy(cluster.new_spec)
            spec["options"].update(resources={d: 1 for d in mine}, nthreads=max(1, len(mine)))
            cluster.worker_spec[i] = spec
        cluster.scale(workers)
        client = distributed.Client(cluster)
        client.wait_for_workers(workers, timeout=120)
        return cls(client=client, window=window, cluster=cluster,
                   what=f"a local Dask cluster of {workers} worker process(es)")

    def describe(self) -> str:
        return f"{self.what} ({len(self.slots())} device(s))"

    def slots(self) -> list[Slot]:
        if self._slots is None:
            self._slots = self._discover()
        return self._slots

    def _discover(self) -> list[Slot]:
        from distributed.comm import get_address_host

        slots, problems, seen = [], [], {}
        for address, got in sorted(self.client.run(_describe).items()):
            ip = get_address_host(address)
            for resource, info in sorted(got["devices"].items()):
                if "problem" in info:
                    problems.append(f"worker {got['name']} ({address}): {info['problem']}")
                    continue
                if (ip, resource) in seen:
                    raise UserError(f"workers {seen[(ip, resource)]} and {got['name']} on host {got['host']} both "
                                    f"hold the device {resource}: give each worker of a host its own devices (with "
                                    f"dask-cuda, where each sees its GPU as cuda:0, name them cuda:0@gpu0, "
                                    f"cuda:0@gpu1, ...)")
                seen[(ip, resource)] = got["name"]
                slots.append(Slot(got["name"], got["host"], ip, resource, info))
        if problems:
            raise UserError("the cluster's workers advertise devices they do not have: " + "; ".join(problems))
        if not slots:
            raise UserError(f"{self.what}: no worker holds a device: start each worker with its device as a "
                            f"resource, e.g. `dask worker ADDRESS --resources \"cuda:0=1\"` (see the README)")
        return slots

    def _submit(self, task: Task):
        if task.slot is not None:
            resource, ips = task.slot.resource, [task.slot.ip]
        else:
            kind = self.kinds().get(task.kind or "")
            if not kind:
                raise TaskFailed(task, UserError(f"no device of the kind {task.kind} in {self.what} (it has: "
                                                 f"{', '.join(self.kinds())})"))
            names = sorted({s.resource for s in kind})
            resource = names[next(self._turn[task.kind]) % len(names)]
            ips = sorted({s.ip for s in kind if s.resource == resource})
        return self.client.submit(_run_there, task.fn, resource, task.args, resources={resource: 1}, workers=ips,
                                  allow_other_workers=False, pure=False, key=f"gpuprofiler-{uuid.uuid4().hex}")

    def run(self, tasks: Iterable[Task], on_done: OnDone, on_failed: OnFailed = raise_failure,
            on_partial=None) -> None:
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        by_place = {(s.ip, s.resource): s for s in self.slots()}
        window = self.window or max(4, 2 * len(by_place))
        given = iter(tasks)
        added: collections.deque[Task] = collections.deque()
        inflight: dict[Any, Task] = {}
        done = as_completed()

        def fill() -> None:
            while len(inflight) < window:
                task = added.popleft() if added else next(given, None)
                if task is None:
                    return
                try:
                    future = self._submit(task)
                except TaskFailed as failure:
                    on_failed(failure)
                    continue
                inflight[future] = task
                done.add(future)

        try:
            fill()
            for future in done:
                task = inflight.pop(future)
                try:
                    value, ip, start, end = future.result()
                except KilledWorker:
                    future.release()
                    on_failed(TaskFailed(task, DeviceError(
                        f"{task.label or task.key}: the worker process running it died each time it was tried (a "
                        f"device runtime crash, or the process was killed); nothing of it was stored")))
                    fill()
                    continue
                except GpuProfilerError as exc:
                    future.release()
                    on_failed(TaskFailed(task, exc))
                    fill()
                    continue
                resource = task.slot.resource if task.slot is not None else None
                slot = task.slot or next((s for (i, r), s in by_place.items() if i == ip and (resource is None or
                                          r == resource) and s.kind == task.kind), None)
                future.release()
                more = on_done(task, Outcome(value, slot, end - start))
                if more:
                    added.extend(more)
                fill()
        except BaseException:
            for future in inflight:
                future.cancel()
            raise

    def close(self) -> None:
        if self.own:
            try:
                self.client.close()
            finally:
                if self.cluster is not None:
                    self.cluster.close()
