"""Measured launches in a worker process, one per device, so that a crashing device runtime cannot take the tool
down.

A kernel that writes out of bounds on a CPU device (PoCL) corrupts the heap of the process that launched it: the
OpenCL runtime dies with SIGSEGV or SIGABRT ("double free or corruption"), and with it anything that process had
not saved. Here the process that launches is a worker (started with multiprocessing's ``spawn``: a fresh
interpreter that opens its own context on the device). It runs the package's ordinary measuring functions
(:func:`~gpuprofiler.workloads.kernel.measure_spec`, :func:`~gpuprofiler.workloads.apps.measure_app`: compile,
upload, check, and the one timing loop of :mod:`gpuprofiler.measure.engine`) and sends each record to the parent
over a pipe as soon as it is built; the parent stores it. Nothing crosses the pipe while a size is being timed:
the messages go between timings, so the timed region is the same as in one process.

When the worker dies of a signal, the parent raises :class:`~gpuprofiler.errors.DeviceError` (exit 3): "the device
runtime crashed while running KERNEL at size N (likely an out-of-bounds access)"; every record already stored
stays. A worker that gives no result for the policy's ``timeout_s`` (a kernel that never ends) is killed: a
``DeviceError`` too. Other errors (a compile error, a wrong result) cross the pipe as they are. The worker ignores SIGINT (an
interrupted parent stops it) and dies with its parent (Linux: ``PR_SET_PDEATHSIG``).

``GPUPROFILER_ISOLATION=off`` measures in the calling process instead.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

from gpuprofiler.errors import DeviceError, GpuProfilerError, UserError, at_stage, stage
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.workloads.apps import App, load_app, measure_app
from gpuprofiler.workloads.bounds import check_sizes
from gpuprofiler.workloads.kernel import measure_spec
from gpuprofiler.workloads.spec import KernelSpec

ENV = "GPUPROFILER_ISOLATION"


def enabled() -> bool:
    """Whether measured launches run in a worker (``GPUPROFILER_ISOLATION`` not ``off``/``0``/``no``)."""
    return os.environ.get(ENV, "on").strip().lower() not in {"0", "off", "no", "false"}


class WorkerBug(RuntimeError):
    """The worker failed with an exception that is not one of the package's errors (a bug): its traceback."""


def ended_by(exitcode: int | None) -> str:
    """How a process ended: ``signal SIGSEGV``, ``exit status 1``."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


def _where(sizes: list[int]) -> str:
    return (f" at size {sizes[0]}" if len(sizes) == 1 else
            f" at one of the sizes {', '.join(map(str, sizes))} (timed in alternation)" if sizes else "")


def crash_message(what: str, sizes: list[int], exitcode: int | None) -> str:
    """The message of a worker that died while running ``what`` at ``sizes``."""
    return (f"the device runtime crashed while running {what}{_where(sizes)} (likely an out-of-bounds access): "
            f"the worker process that launched it ended with {ended_by(exitcode)}")


def hang_message(what: str, sizes: list[int], timeout: float) -> str:
    """The message of a measurement stopped after ``timeout`` seconds without a result."""
    return (f"{what}{_where(sizes)} gave no result for {timeout:g} s and was stopped as hung (a kernel that never ends? "
            f"for runs that long, raise --timeout)")


class DeviceWorker:
    """A worker process measuring on one device; :meth:`measure` runs a spec or an app there."""

    def __init__(self, device_id: str):
        self.device_id = device_id
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, device_id, os.getpid()), daemon=True,
                                name=f"gpuprofiler-worker-{device_id}")
        self.proc.start()
        child.close()
        self.running: tuple[str | None, list[int]] = (None, [])  # what runs in the worker: kernel, sizes
        self._expect("ready")

    @property
    def alive(self) -> bool:
        return self.proc.is_alive()

    def measure(self, item: KernelSpec | App, sizes: Iterable[int], policy: TimingPolicy | None = None,
                check: bool = True, on_record: Callable[[dict], None] | None = None,
                overrides: dict[str, Any] | None = None, progress: Callable[[str], None] | None = None,
                interleave: bool = True, bounds: bool = True,
                on_size: Callable[[int, list[dict]], None] | None = None,
                on_timeline: Callable[[int, dict], None] | None = None) -> list[dict]:
        """``measure_spec`` / ``measure_app`` in the worker, the launches' buffers checked here first (unless
        ``bounds`` is False: a later visit of sizes checked before); each record reaches ``on_record`` (and each
        size's ``on_size``) here, in this process, as soon as the worker has built it."""
        sizes = [int(s) for s in sizes]
        if isinstance(item, App):
            request = {"kind": "app", "path": str(item.path), "name": item.name, "timeline": on_timeline is not None}
        else:
            if bounds:
                with stage("bounds", UserError):
                    check_sizes(item, sizes, overrides, say=progress)
            request = {"kind": "spec", "spec": item, "name": item.name, "overrides": overrides}
        request.update(sizes=sizes, policy=policy, check=check, interleave=interleave)
        self.running = (request["name"], sizes[:1])
        self._send(("measure", request))
        records: list[dict] = []
        by_size: dict[int, list[dict]] = {}
        finished = False  # the worker has answered the whole request (done, or its error)
        timeout = policy.timeout_s if policy is not None else None
        try:
            while True:
                kind, *body = self._recv(timeout)
                if kind == "progress":
                    if progress:
                        progress(body[0])
                elif kind == "stage":
                    self.running = (request["name"], list(body[1]))
                elif kind == "record":
                    rec = body[0]
                    records.append(rec)
                    by_size.setdefault(int(rec["size"]), []).append(rec)
                    if on_record:
                        on_record(rec)
                elif kind == "timeline":
                    if on_timeline:
                        on_timeline(int(body[0]), body[1])
                elif kind == "size":
                    if on_size:
                        on_size(int(body[0]), by_size.get(int(body[0]), []))
                elif kind in ("done", "error", "bug"):
                    finished = True
                    if kind == "done":
                        return records
                    if kind == "error":
                        raise body[0]
                    raise WorkerBug(f"the measuring worker failed:\n{body[0]}")
        finally:
            if not finished:  # interrupted here (Ctrl-C, a failing callback): the worker is mid-request, stop it
                self.close(kill=True)

    def _send(self, message: Any) -> None:
        try:
            self.conn.send(message)
        except (OSError, EOFError):
            self._crashed()

    def _recv(self, timeout: float | None = None) -> tuple:
        """The worker's next message; with ``timeout``, a worker silent that long is stopped as hung."""
        try:
            if timeout is not None and not self.conn.poll(timeout):
                self._hung(timeout)
            return self.conn.recv()
        except (EOFError, OSError):
            self._crashed()
        raise AssertionError("unreachable")  # pragma: no cover

    def _hung(self, timeout: float) -> None:
        self.close(kill=True)
        what, sizes = self.running
        raise at_stage(DeviceError(hang_message(what or "the kernel", sizes, timeout)), "timeout")

    def _expect(self, kind: str) -> None:
        try:
            got = self._recv()
        except KeyboardInterrupt:
            self.close(kill=True)
            raise
        if got[0] == "error":
            self.close(kill=True)
            raise got[1]
        if got[0] != kind:  # pragma: no cover - a protocol mismatch is a bug
            raise WorkerBug(f"the measuring worker said {got!r}, expected {kind!r}")

    def _crashed(self) -> None:
        self.proc.join(timeout=10)
        code = self.proc.exitcode
        self.close(kill=True)
        what, sizes = self.running
        if what is None:
            raise at_stage(DeviceError(f"the device runtime crashed while opening {self.device_id} (the worker "
                                       f"process ended with {ended_by(code)})"), "device crash")
        raise at_stage(DeviceError(crash_message(what, sizes, code)), "device crash")

    def close(self, kill: bool = False) -> None:
        """Stop the worker: ask it to end (or, with ``kill``, kill it) and wait for it."""
        if self.proc.is_alive() and not kill:
            try:
                self.conn.send(("stop", None))
                self.proc.join(timeout=5)
            except (OSError, EOFError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        if not self.conn.closed:
            self.conn.close()
        _forget(self)


_workers: dict[str, DeviceWorker] = {}


def worker(device_id: str) -> DeviceWorker:
    """The running worker of ``device_id`` (started on first use, ended when this process exits)."""
    got = _workers.get(device_id)
    if got is None or not got.alive:
        got = _workers[device_id] = DeviceWorker(device_id)
    return got


def _forget(w: DeviceWorker) -> None:
    if _workers.get(w.device_id) is w:
        del _workers[w.device_id]


@atexit.register
def close_all() -> None:
    """End every worker (at exit)."""
    for w in list(_workers.values()):
        w.close()


def measure(backend: Any, item: KernelSpec | App, sizes: Iterable[int], policy: TimingPolicy | None = None,
            check: bool = True, on_record: Callable[[dict], None] | None = None,
            overrides: dict[str, Any] | None = None, progress: Callable[[str], None] | None = None,
            interleave: bool = True, bounds: bool = True,
            on_size: Callable[[int, list[dict]], None] | None = None, isolate: bool | None = None,
            on_timeline: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Measure a spec or an app on ``backend``'s device: in its worker (:class:`DeviceWorker`) unless isolation is
    off (``isolate=False``, or ``GPUPROFILER_ISOLATION=off`` where ``isolate`` is None), then in this process on
    ``backend`` itself. Either way the launches' buffers are checked first and records arrive as they finish."""
    if isolate is None:
        isolate = enabled()
    if isolate:
        return worker(backend.info.id).measure(item, sizes, policy, check, on_record, overrides, progress,
                                               interleave, bounds, on_size, on_timeline)
    if isinstance(item, App):
        return measure_app(backend, item, sizes, policy, check, on_record, progress, interleave, on_size,
                           on_timeline=on_timeline)
    return measure_spec(backend, item, sizes, policy, check, on_record, overrides, progress, interleave,
                        check_bounds=bounds, on_size=on_size)


# ---- the worker's side -----------------------------------------------------------------------------------------

def _die_with_parent(parent: int) -> None:
    """Linux: this process gets SIGKILL when its parent dies (a killed tool leaves no worker behind)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _serve(conn, device_id: str, parent: int) -> None:
    """The worker's loop: open the device, then run each request, answering with progress, stages, records and
    ``done`` (or the error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    from gpuprofiler.device import open_backend

    try:
        backend = open_backend(device_id)
    except BaseException as exc:  # noqa: BLE001 - said to the parent
        _send_error(conn, exc)
        return
    conn.send(("ready",))
    try:
        while True:
            try:
                kind, request = conn.recv()
            except (EOFError, OSError):
                return
            if kind == "stop":
                return
            try:
                _run(conn, backend, request)
                conn.send(("done",))
            except (BrokenPipeError, EOFError):
                return
            except BaseException as exc:  # noqa: BLE001 - said to the parent
                _send_error(conn, exc)
    finally:
        backend.close()


def _run(conn, backend, request: dict) -> None:
    def say(text: str) -> None:
        conn.send(("progress", text))

    def stage(what: str, sizes: list[int]) -> None:
        conn.send(("stage", what, list(sizes)))

    def record(rec: dict) -> None:
        conn.send(("record", rec))

    def size_done(size: int, _records: list[dict]) -> None:
        conn.send(("size", int(size)))

    if request["kind"] == "app":
        app = load_app(Path(request["path"]))
        def line(size: int, data: dict) -> None:
            conn.send(("timeline", int(size), data))

        measure_app(backend, app, request["sizes"], request["policy"], request["check"], record, say,
                    request["interleave"], on_size=size_done, on_stage=stage,
                    on_timeline=line if request.get("timeline") else None)
    else:
        measure_spec(backend, request["spec"], request["sizes"], request["policy"], request["check"], record,
                     request["overrides"], say, request["interleave"], check_bounds=False, on_size=size_done,
                     on_stage=stage)


def _send_error(conn, exc: BaseException) -> None:
    if isinstance(exc, MemoryError):
        exc = DeviceError("out of host memory")
    if isinstance(exc, GpuProfilerError):
        try:
            conn.send(("error", exc))
        except Exception:  # noqa: BLE001 - an error that does not pickle: its message, as the same kind
            plain = DeviceError(str(exc)) if exc.exit_code == 3 else UserError(str(exc))
            conn.send(("error", at_stage(plain, exc.stage) if exc.stage else plain))
        return
    conn.send(("bug", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
