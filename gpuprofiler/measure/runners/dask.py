"""Tasks on a Dask distributed cluster: a device is a worker resource, so a task that needs it runs alone on it.

A worker holds a device by advertising a resource named by the device's id as that worker opens it (``dask worker
ADDRESS --resources "cuda:0=1"``), with an optional ``@tag`` where several workers of one host each see their own
GPU as ``cuda:0`` (dask-cuda's layout: ``cuda:0@gpu3``). A task asks for one unit of its device's resource, so two
measurements never share a device; a host on which two workers claim the same resource is refused. A task for one
device is restricted to its host; a task for a kind may run on any device of the kind. When the worker running a
task dies, the scheduler runs it again on another worker that holds such a device (the restarted one, on a local
cluster), up to ``distributed.scheduler.allowed-failures`` times; then it is reported failed. Results come back to
the client, which alone stores them: a task that died left nothing behind.

A task is submitted when a device it may use has room (two per device: one running, one waiting on its worker), so a
run of a million tasks holds a bounded number of futures on the client and the scheduler (``window`` lowers it
further). A task that waited on a worker behind one that took the worker down is tried once more alone before it is
called failed.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import logging
import platform
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from gpuprofiler.errors import DeviceError, GpuProfilerError, UserError, at_stage
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
LOOPBACK = "127.0.0.1"  # where a local cluster listens


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
            except (OSError, ValueError, TimeoutError) as exc:
                raise UserError(f"--cluster {address}: no Dask scheduler answered ({exc}); start one with "
                                f"`dask scheduler` and workers with `dask worker {address} --resources "
                                f"\"cuda:0=1\"`") from None
        self.client = client
        self.own = address is not None or cluster is not None
        self.window = window
        self.what = what or address or "a Dask cluster"
        self._slots: list[Slot] | None = None
        self._kinds: dict[str, list[Slot]] | None = None

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
        # worker processes and the scheduler talk over TCP on loopback, and the dashboard (where bokeh is installed)
        # listens there too: a local cluster answers no other machine (its dashboard asks for no authentication);
        # a cluster of threads talks in process
        cluster = distributed.LocalCluster(n_workers=0, processes=processes, threads_per_worker=1,
                                           host=LOOPBACK if processes else None,
                                           dashboard_address=f"{LOOPBACK}:0", silence_logs=logging.ERROR)
        client = None
        try:
            for i in range(workers):
                mine = device_ids[i::workers]
                spec = copy.deepcopy(cluster.new_spec)
                spec["options"].update(resources={d: 1 for d in mine}, nthreads=max(1, len(mine)))
                cluster.worker_spec[i] = spec
            cluster.scale(workers)
            client = distributed.Client(cluster)
            client.wait_for_workers(workers, timeout=120)
        except BaseException as exc:
            if client is not None:
                client.close()
            cluster.close()
            if isinstance(exc, (TimeoutError, OSError)):
                raise DeviceError(f"the local Dask cluster did not start: {type(exc).__name__}: {exc}") from None
            raise
        return cls(client=client, window=window, cluster=cluster,
                   what=f"a local Dask cluster of {workers} worker process(es)")

    def describe(self) -> str:
        return f"{self.what} ({len(self.slots())} device(s))"

    def slots(self) -> list[Slot]:
        if self._slots is None:
            self._slots = self._discover()
        return self._slots

    def kinds(self) -> dict[str, list[Slot]]:
        if self._kinds is None:  # asked for each task: the slots do not change once discovered
            self._kinds = super().kinds()
        return self._kinds

    def _discover(self) -> list[Slot]:
        from distributed.comm import get_address_host

        slots, problems, seen = [], [], {}
        try:
            described = self.client.run(_describe)
        except Exception as exc:  # noqa: BLE001 - a worker that cannot describe itself (no gpuprofiler there?)
            raise DeviceError(f"{self.what}: asking the workers for their devices failed ({type(exc).__name__}: "
                              f"{exc}); each worker needs gpuprofiler installed") from None
        for address, got in sorted(described.items()):
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

    def _choices(self, task: Task) -> list[tuple[str, list[str]]]:
        """Where ``task`` may run: (resource, the hosts that hold it)."""
        if task.slot is not None:
            if task.slot not in self.kinds().get(task.slot.kind, ()):
                raise TaskFailed(task, UserError(f"{task.slot.name} is not a device of {self.what}"))
            return [(task.slot.resource, [task.slot.ip])]
        kind = self.kinds().get(task.kind or "")
        if not kind:
            raise TaskFailed(task, UserError(f"no device of the kind {task.kind} in {self.what} (it has: "
                                             f"{', '.join(self.kinds())})"))
        return [(name, sorted({s.ip for s in kind if s.resource == name})) for name in sorted({s.resource for s in kind})]

    def run(self, tasks: Iterable[Task], on_done: OnDone, on_failed: OnFailed = raise_failure,
            on_partial=None) -> None:
        """Each task submitted when a device it may use has room, on the least loaded of its resources: two per
        device, one running and the next waiting on its worker, so the device does not idle while a result travels
        back. A task whose worker died each time it was tried is tried once more alone on its device (it may only
        have waited behind the task that took the worker down); dying alone too, it goes to ``on_failed``, as does a
        task that fails. Each result goes to ``on_done`` as it arrives."""
        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        by_place = {(s.ip, s.resource): s for s in self.slots()}
        devices = collections.Counter(r for _, r in by_place)
        depth = 2  # tasks per device: one running, one waiting
        limit = self.window or depth * len(by_place)  # tasks in flight at most
        load: collections.Counter[str] = collections.Counter()
        alone: set[str] = set()  # resources running a task alone
        held: set[str] = set()  # resources kept free for a task waiting to run alone
        retried: dict[int, str] = {}  # tasks given their try alone (by id): the resource they died on
        given = iter(tasks)
        added: collections.deque[Task] = collections.deque()
        waiting: collections.deque[Task] = collections.deque()  # no room for them yet
        inflight: dict[Any, tuple[Task, str]] = {}
        done = as_completed()

        def submit(task: Task) -> bool:
            """Submitted (or failed at once): True; no room for it now: False."""
            try:
                choices = self._choices(task)
            except TaskFailed as failure:
                on_failed(failure)
                return True
            solo = id(task) in retried
            if solo:
                choices = [c for c in choices if c[0] == retried[id(task)]]
            free = [(depth * devices[r] - load[r], r, ips) for r, ips in choices
                    if r not in alone and (load[r] == 0 if solo else r not in held and load[r] < depth * devices[r])]
            if task.slot is not None:
                free = [c for c in free if sum(t.slot == task.slot for t, _ in inflight.values()) < (1 if solo else
                                                                                                   depth)]
            if not free or len(inflight) >= limit:
                return False
            _, resource, ips = max(free)
            future = self.client.submit(_run_there, task.fn, resource, task.args, resources={resource: 1},
                                        workers=ips, allow_other_workers=False, pure=False,
                                        key=f"gpuprofiler-{uuid.uuid4().hex}")
            load[resource] += 1
            if solo:
                alone.add(resource)
                held.discard(resource)
            inflight[future] = (task, resource)
            done.add(future)
            return True

        def fill() -> None:
            for _ in range(len(waiting)):
                task = waiting.popleft()
                if not submit(task):
                    waiting.append(task)
            while len(waiting) < len(by_place) and len(inflight) < limit:
                task = added.popleft() if added else next(given, None)
                if task is None:
                    return
                if not submit(task):
                    waiting.append(task)

        def slot_of(task: Task, resource: str, ip: str) -> Slot:
            got = task.slot or by_place.get((ip, resource))
            if got is None:  # a worker that joined after the run began: described by its kind's first device
                first = self.kinds()[task.kind][0]
                got = Slot(ip, ip, ip, resource, first.info)
            return got

        try:
            fill()
            while inflight:
                future = next(done)
                task, resource = inflight.pop(future)
                load[resource] -= 1
                if id(task) in retried:
                    alone.discard(resource)
                try:
                    value, ip, start, end = future.result()
                except KilledWorker:
                    future.release()
                    if id(task) not in retried:  # once more, alone on its device (nothing new goes there meanwhile)
                        retried[id(task)] = resource
                        held.add(resource)
                        waiting.appendleft(task)
                        fill()
                        continue
                    failure = TaskFailed(task, at_stage(DeviceError(
                        f"{task.label or task.key}: the worker process running it died each time it was tried, the "
                        f"last time with nothing else on its device (a device runtime crash, or the process was "
                        f"killed); nothing of it was stored"), "device crash"))
                except GpuProfilerError as exc:
                    failure = TaskFailed(task, exc)
                except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - the cluster's, said as a failure
                    failure = TaskFailed(task, DeviceError(f"{task.label or task.key}: {type(exc).__name__}: {exc}"))
                else:
                    failure = None
                future.release()
                if failure is not None:
                    on_failed(failure)
                else:
                    more = on_done(task, Outcome(value, slot_of(task, resource, ip), end - start))
                    if more:
                        added.extend(more)
                fill()
            for task in [*waiting, *added, *given]:  # nothing in flight and these not placed: no device for them
                on_failed(TaskFailed(task, DeviceError(f"{task.label or task.key}: no device of the cluster is left "
                                                       f"to run it")))
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
