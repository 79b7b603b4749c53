"""The CUDA backend's hold kernel as a launch hook, with pycuda's driver mocked (no GPU, no pycuda needed):
queued before each timed launch with its length in nanoseconds, doubled when the host was slower than it,
and absent from plain launches."""

import sys
import types

import numpy as np
import pytest


@pytest.fixture
def cuda_module(monkeypatch):
    """gpuprofiler.device.cuda imported against a stand-in for pycuda.driver."""
    driver = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    driver.Error, driver.LogicError, driver.CompileError = Error, type("LogicError", (Error,), {}), Error
    package = types.ModuleType("pycuda")
    package.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    monkeypatch.delitem(sys.modules, "gpuprofiler.device.cuda", raising=False)
    import gpuprofiler.device.cuda as cuda

    yield cuda
    sys.modules.pop("gpuprofiler.device.cuda", None)
    sys.modules["gpuprofiler.device"].__dict__.pop("cuda", None)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Function:
    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))


class FakeBackend:
    def __init__(self):
        self.function = Function()
        self.compiled = []

    def compile(self, source, name):
        self.compiled.append(name)
        return types.SimpleNamespace(function=self.function)


def test_hold_is_queued_before_the_launch_and_doubles_when_the_host_is_slower(cuda_module, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(cuda_module.time, "perf_counter", clock)
    backend = FakeBackend()
    hook = cuda_module.HoldHook(backend)
    hook.before_launch()
    (args, kwargs), = backend.function.calls
    assert backend.compiled == ["gpuprofiler_hold"] and args == (np.uint64(50_000),)
    assert kwargs == {"block": (1, 1, 1), "grid": (1, 1, 1)}
    clock.now += 20e-6  # the host queued the timed launch within the hold
    hook.after_launch()
    assert hook.hold_s == 50e-6
    hook.before_launch()
    clock.now += 80e-6  # the host took longer than the hold: the next hold is twice as long
    hook.after_launch()
    assert hook.hold_s == 100e-6 and backend.compiled == ["gpuprofiler_hold"]  # compiled once
    hook.hold_s = cuda_module.MAX_HOLD_S
    hook.before_launch()
    clock.now += 1.0
    hook.after_launch()
    assert hook.hold_s == cuda_module.MAX_HOLD_S  # never past the cap


def test_backend_gives_one_hook_and_plain_launches_queue_no_hold(cuda_module):
    backend = object.__new__(cuda_module.CUDABackend)
    backend._hold_hook = None
    backend._timed = lambda action: action() or "event"
    first, = backend.launch_hooks()
    second, = backend.launch_hooks()
    assert first is second and isinstance(first, cuda_module.HoldHook)
    kernel = types.SimpleNamespace(function=Function(), name="k")
    assert backend.launch(kernel, (1024,), (256,), [np.int32(3)]) == "event"
    (args, kwargs), = kernel.function.calls
    assert args == (np.int32(3),) and kwargs == {"block": (256, 1, 1), "grid": (4, 1, 1)}
    assert first._kernel is None  # the launch itself queued no hold kernel


class FakeEvent:
    """A CUDA event recorded at ``at_ms`` on the device's clock (time_since gives milliseconds, as pycuda's)."""

    def __init__(self, at_ms):
        self.at_ms = at_ms

    def time_since(self, other):
        return self.at_ms - other.at_ms


def test_cuda_event_spans_count_from_the_backends_origin(cuda_module):
    origin = FakeEvent(100.0)
    event = cuda_module.CUDAEvent(FakeEvent(102.5), FakeEvent(103.0), origin)
    assert event.seconds() == pytest.approx(0.5e-3)
    assert event.span_ns() == (2_500_000, 3_000_000)
    assert cuda_module.CUDAEvent(FakeEvent(1.0), FakeEvent(2.0)).span_ns() is None


class FakeContext:
    """pycuda's context stack, one per thread, as the driver keeps it."""

    local = None

    def __init__(self, handle):
        self.handle, self.detached = handle, False

    def push(self):
        FakeContext.stack().append(self)

    @staticmethod
    def pop():
        FakeContext.stack().pop()

    def detach(self):
        self.detached = True

    @staticmethod
    def stack():
        if not hasattr(FakeContext.local, "stack"):
            FakeContext.local.stack = []
        return FakeContext.local.stack

    @staticmethod
    def get_current():
        s = FakeContext.stack()
        return FakeContext(s[-1].handle) if s else None  # pycuda hands out a new wrapper each time


def test_a_backend_bound_on_a_pool_thread_is_let_go_there_and_closes_from_another(cuda_module, monkeypatch):
    """A Dask worker runs tasks on its pool's thread: the context is made current there for the task and taken off
    that thread's stack when it ends (a context left there makes pycuda abort the process at exit); closing from
    the main thread then pushes it there to pop and detach it."""
    import threading

    from gpuprofiler.measure.runners import base

    FakeContext.local = threading.local()
    monkeypatch.setattr(cuda_module.cuda, "Context", FakeContext, raising=False)
    backend = object.__new__(cuda_module.CUDABackend)
    backend.context = FakeContext(7)
    monkeypatch.setitem(base._backends, "cuda:5", backend)
    seen = []

    def task(ctx):
        ctx.backend()
        ctx.backend()  # a second use on the same thread pushes nothing more
        seen.append([c.handle for c in FakeContext.stack()])
        return "done"

    out = []
    worker = threading.Thread(target=lambda: out.append((base.execute(task, "cuda:5@gpu0", False, ()),
                                                         list(FakeContext.stack()))))
    worker.start()
    worker.join()
    (value, _, start, end), left = out[0]
    assert value == "done" and seen == [[7]] and left == [] and start <= end
    assert FakeContext.stack() == []  # the main thread never had it
    context = backend.context
    cuda_module.CUDABackend.close(backend)
    assert context.detached and FakeContext.stack() == [] and backend.context is None
