"""Launches timed for the launch microbenchmark: prepared launches (arguments marshalled once) and the device
span of many launches queued back to back. CUDA with pycuda's driver mocked (the order of what reaches the
stream is checked exactly), OpenCL on the real PoCL device, and a real GPU where one is."""

import importlib.util
import sys
import types

import numpy as np
import pytest

from gpuprofiler.errors import DeviceError, UserError

# --------------------------------------------------------------------------------------------------
# CUDA, mocked: a log of what the backend sends to the driver, a host clock the mock advances
# --------------------------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Driver:
    """Stand-in for pycuda.driver and pycuda._pvt_struct: every call is appended to ``log``."""

    def __init__(self, clock, host_per_launch=2e-6, span_ms=1.25):
        self.log, self.clock, self.host_per_launch, self.span_ms = [], clock, host_per_launch, span_ms
        self.packed = []
        log = self.log
        outer = self

        class Error(Exception):
            pass

        class Event:
            count = 0

            def __init__(self):
                Event.count += 1
                self.name = f"event{Event.count}"

            def record(self, stream=None):
                log.append(("record", self.name))

            def synchronize(self):
                log.append(("synchronize", self.name))

            def time_since(self, other):
                return outer.span_ms

        class Context:
            @staticmethod
            def synchronize():
                log.append(("finish",))

        self.Error, self.Event, self.Context = Error, Event, Context

    def module(self):
        driver = types.ModuleType("pycuda.driver")
        driver.Error, driver.LogicError, driver.CompileError = self.Error, type("LogicError", (self.Error,), {}), \
            self.Error
        driver.Event, driver.Context = self.Event, self.Context
        return driver

    def pack(self, fmt, *values):
        self.packed.append((fmt, values))
        return b"packed:" + fmt.encode()


class Function:
    """A kernel function: the raw launch of pycuda's prepared calls and its prepared call."""

    def __init__(self, driver, raw=True):
        self.driver = driver
        if raw:
            self._launch_kernel = self.raw
        self.prepared = None

    def raw(self, grid, block, buf, shared, stream):
        self.driver.clock.now += self.driver.host_per_launch
        self.driver.log.append(("launch", grid, block, buf, shared, stream))

    def prepare(self, fmt):
        self.prepared = fmt

    def prepared_async_call(self, grid, block, stream, *values):
        self.driver.clock.now += self.driver.host_per_launch
        self.driver.log.append(("prepared_call", grid, block, stream, values))


class Hold:
    def __init__(self, driver):
        self.driver = driver

    def __call__(self, ns, block, grid):
        self.driver.log.append(("hold", int(ns)))


@pytest.fixture
def cuda(monkeypatch):
    """(gpuprofiler.device.cuda imported against the mocked driver, the driver, a backend without a device)."""
    clock = Clock()
    driver = Driver(clock)
    package = types.ModuleType("pycuda")
    package.driver = driver.module()
    pvt = types.ModuleType("pycuda._pvt_struct")
    pvt.pack = driver.pack
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", package.driver)
    monkeypatch.setitem(sys.modules, "pycuda._pvt_struct", pvt)
    monkeypatch.delitem(sys.modules, "gpuprofiler.device.cuda", raising=False)
    import gpuprofiler.device.cuda as module

    monkeypatch.setattr(module.time, "perf_counter", clock)
    backend = object.__new__(module.CUDABackend)
    backend.kind = "cuda"
    backend._hold_hook = None
    backend.compile = lambda source, name: types.SimpleNamespace(function=Hold(driver))
    yield module, driver, backend
    sys.modules.pop("gpuprofiler.device.cuda", None)
    sys.modules["gpuprofiler.device"].__dict__.pop("cuda", None)


def test_prepared_launch_packs_the_arguments_once(cuda):
    module, driver, backend = cuda
    kernel = module.CUDAKernel(Function(driver), "k", None)
    buffer = module.CUDABuffer(0xABC0, 64)
    go = backend.prepare_launch(kernel, (1000,), (256,), [np.int32(5), buffer, np.float64(2.5)])
    for _ in range(3):
        go()
    assert driver.packed == [("iPd", (np.int32(5), 0xABC0, np.float64(2.5)))]
    assert driver.log == [("launch", (4, 1, 1), (256, 1, 1), b"packed:iPd", 0, None)] * 3
    assert not [e for e in driver.log if e[0] in ("record", "hold")]  # no events, no hold kernel


def test_prepared_launch_without_the_raw_launch_uses_the_prepared_call(cuda):
    module, driver, backend = cuda
    function = Function(driver, raw=False)
    go = backend.prepare_launch(module.CUDAKernel(function, "k", None), (64, 4), (32, 2), [np.uint32(7)])
    go()
    assert function.prepared == "I" and driver.packed == []
    assert driver.log == [("prepared_call", (2, 2, 1), (32, 2, 1), None, (np.uint32(7),))]


@pytest.mark.parametrize("bad", [5, 2.5, "x", None])
def test_prepared_launch_refuses_arguments_of_unknown_c_type(cuda, bad):
    module, driver, backend = cuda
    with pytest.raises(UserError, match=r"argument 1 of k is a \w+: pass device buffers or numpy scalars"):
        backend.prepare_launch(module.CUDAKernel(Function(driver), "k", None), (1,), (1,), [np.int32(0), bad])


def test_launch_span_queues_every_launch_behind_the_hold_between_two_events(cuda):
    module, driver, backend = cuda
    kernel = module.CUDAKernel(Function(driver), "empty", None)
    span = backend.launch_span(kernel, (1,), (1,), [np.int32(0)], 100)
    assert span == pytest.approx(1.25e-3)  # the events' time, ms -> s
    hold_ns = int(100 * module.SPAN_HOLD_PER_LAUNCH_S * 1e9)
    launch = ("launch", (1, 1, 1), (1, 1, 1), b"packed:i", 0, None)
    start, end = driver.log[2][1], driver.log[103][1]
    assert driver.log == ([("finish",), ("hold", hold_ns), ("record", start)] + [launch] * 100
                          + [("record", end), ("synchronize", end)])
    assert len(driver.packed) == 1


def test_launch_span_doubles_the_hold_when_the_host_was_slower(cuda):
    module, driver, backend = cuda
    driver.host_per_launch = 25e-6   # 100 launches take 2.5 ms to queue; the first hold is 1 ms
    kernel = module.CUDAKernel(Function(driver), "empty", None)
    backend.launch_span(kernel, (1,), (1,), [np.int32(0)], 100)
    holds = [e[1] for e in driver.log if e[0] == "hold"]
    assert holds == [1_000_000, 2_000_000, 4_000_000]  # 1 and 2 ms were too short, 4 ms covers 2.5 ms
    assert [e[0] for e in driver.log].count("launch") == 300


def test_launch_span_fails_when_the_host_outlasts_the_longest_hold(cuda):
    module, driver, backend = cuda
    driver.host_per_launch = 1e-3    # 1 s to queue 1000 launches: longer than any hold
    kernel = module.CUDAKernel(Function(driver), "empty", None)
    with pytest.raises(DeviceError, match="longer than the longest hold"):
        backend.launch_span(kernel, (1,), (1,), [np.int32(0)], 1000)
    holds = [e[1] for e in driver.log if e[0] == "hold"]
    assert holds[-1] == int(module.MAX_SPAN_HOLD_S * 1e9) and holds == sorted(holds)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_launch_span_needs_a_positive_count(cuda, bad):
    module, driver, backend = cuda
    with pytest.raises(UserError, match="launches must be a positive integer"):
        backend.launch_span(module.CUDAKernel(Function(driver), "k", None), (1,), (1,), [np.int32(0)], bad)
    assert driver.log == []


def test_launch_microbenchmark_on_mocked_cuda(cuda):
    """The round trip is launch + synchronize pairs with nothing else (no hold kernel, no events); the
    back-to-back figure is the events' span over the launches."""
    from gpuprofiler.microbench import launch

    module, driver, backend = cuda
    kernel = module.CUDAKernel(Function(driver), "empty", None)
    trips = launch.round_trip_samples(backend, kernel, [np.int32(0)], launches=4, rounds=2)
    assert len(trips) == 2
    pair = [("launch", (1, 1, 1), (1, 1, 1), b"packed:i", 0, None), ("finish",)]
    assert driver.log == ([("finish",)] + pair * 4) * 3  # a warm-up round, then two
    driver.log.clear()
    spans = launch.back_to_back_samples(backend, kernel, [np.int32(0)], launches=50, rounds=3)
    assert spans == [pytest.approx(1.25e-3 / 50)] * 3
    assert [e[0] for e in driver.log].count("launch") == 50 * 4


# --------------------------------------------------------------------------------------------------
# OpenCL on PoCL
# --------------------------------------------------------------------------------------------------

WRITE = "__kernel void put(__global int *out, int v) { out[0] = v; }\n"
EMPTY = "__kernel void empty(int n) { }\n"


def test_prepared_launch_keeps_its_own_arguments(pocl):
    kernel = pocl.compile(WRITE, "put")
    buf = pocl.alloc(4)
    go = pocl.prepare_launch(kernel, (1,), (1,), [buf, np.int32(7)])
    pocl.launch(kernel, (1,), (1,), [buf, np.int32(3)])  # the same kernel with other arguments
    event = go()
    pocl.finish()
    out = np.zeros(1, np.int32)
    pocl.from_device(buf, out)
    assert out[0] == 7 and event.seconds() > 0


def test_launch_span_on_pocl(pocl):
    kernel = pocl.compile(EMPTY, "empty")
    pocl.launch_span(kernel, (1,), (1,), [np.int32(0)], 20)  # warm-up
    few = min(pocl.launch_span(kernel, (1,), (1,), [np.int32(0)], 10) for _ in range(3))
    many = min(pocl.launch_span(kernel, (1,), (1,), [np.int32(0)], 200) for _ in range(3))
    assert 0 < few < many                       # a span holds every launch
    assert 1e-9 < many / 200 < 1e-3            # per launch: between a nanosecond and a millisecond
    with pytest.raises(UserError, match="launches must be a positive integer"):
        pocl.launch_span(kernel, (1,), (1,), [np.int32(0)], 0)


def test_launch_span_bad_arguments_and_a_failed_launch(pocl):
    kernel = pocl.compile(EMPTY, "empty")
    with pytest.raises(UserError, match=r"kernel empty takes 1 argument\(s\), 2 given"):
        pocl.launch_span(kernel, (1,), (1,), [np.int32(0), np.int32(1)], 5)
    too_big = pocl.info.max_work_group_size * 2
    with pytest.raises(UserError, match="INVALID_WORK_GROUP_SIZE"):
        pocl.launch_span(kernel, (too_big,), (too_big,), [np.int32(0)], 5)  # fails once the gate is queued
    assert pocl.launch_span(kernel, (1,), (1,), [np.int32(0)], 5) > 0     # the gate was released: the queue runs


# --------------------------------------------------------------------------------------------------
# a real CUDA GPU
# --------------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.skipif(importlib.util.find_spec("pycuda") is None, reason="pycuda is not installed")
def test_launch_figures_on_gpu():
    from gpuprofiler.device import list_devices, open_backend
    from gpuprofiler.microbench import launch

    ids = [d.id for d in list_devices() if d.backend == "cuda"]
    if not ids:
        pytest.skip("no CUDA device")
    with open_backend(ids[0]) as backend:
        r = launch.measure(backend, quick=True)
    b2b, trip = r["back_to_back_s"], r["round_trip_s"]
    assert b2b["status"] == "ok" and 0.3e-6 < b2b["value"] < 50e-6, b2b
    assert trip["status"] == "ok" and b2b["value"] < trip["value"] < 1e-3, trip
