"""CUDA backend through pycuda: the device's primary context, kernels timed with CUDA events."""

from __future__ import annotations

import atexit
import time
from typing import Any, Callable, Sequence

import numpy as np

from gpuprofiler.device.base import Backend, Buffer, DeviceInfo, Event, Kernel, LaunchHook, check_launches
from gpuprofiler.device.cuda_hold import HOLD_SOURCE
from gpuprofiler.errors import DeviceError, UserError, at_stage

try:
    import pycuda.driver as cuda
except ImportError as exc:  # pragma: no cover - depends on the machine
    raise UserError("the CUDA backend needs pycuda: pip install 'gpuprofiler[cuda]' "
                    f"on a machine with the CUDA toolkit (CUDA_ROOT set) ({exc})") from None


MAX_HOLD_S = 0.01
SPAN_HOLD_PER_LAUNCH_S = 10e-6   # first guess of the host's time to queue one prepared launch
MAX_SPAN_HOLD_S = 0.2            # longest hold a launch span may queue before it gives up


def _init() -> bool:
    try:
        cuda.init()
        return True
    except cuda.Error:
        return False


def describe(index: int, device: "cuda.Device") -> DeviceInfo:
    attr = device.get_attributes()
    a = cuda.device_attribute
    major, minor = device.compute_capability()
    return DeviceInfo(
        id=f"cuda:{index}",
        backend="cuda",
        name=device.name(),
        vendor="NVIDIA",
        type="gpu",
        compute_units=int(attr[a.MULTIPROCESSOR_COUNT]),
        clock_mhz=attr[a.CLOCK_RATE] / 1000.0,
        global_mem_bytes=int(device.total_memory()),
        local_mem_bytes=int(attr[a.MAX_SHARED_MEMORY_PER_BLOCK]),
        max_work_group_size=int(attr[a.MAX_THREADS_PER_BLOCK]),
        driver=f"CUDA driver {cuda.get_driver_version()}",
        platform="CUDA",
        warp_size=int(attr[a.WARP_SIZE]),
        compute_capability=f"{major}.{minor}",
        extra={
            "memory_clock_mhz": attr.get(a.MEMORY_CLOCK_RATE, 0) / 1000.0,
            "memory_bus_width_bits": int(attr.get(a.GLOBAL_MEMORY_BUS_WIDTH, 0)),
            "l2_cache_bytes": int(attr.get(a.L2_CACHE_SIZE, 0)),
            "max_threads_per_sm": int(attr[a.MAX_THREADS_PER_MULTIPROCESSOR]),
            "registers_per_sm": int(attr.get(a.MAX_REGISTERS_PER_MULTIPROCESSOR, 0)),
            "shared_memory_per_sm": int(attr.get(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 0)),
            "double": True,
        },
    )


def list_devices() -> list[DeviceInfo]:
    if not _init():
        return []
    return [describe(i, cuda.Device(i)) for i in range(cuda.Device.count())]


class CUDAEvent(Event):
    def __init__(self, start: "cuda.Event", end: "cuda.Event", origin: "cuda.Event | None" = None):
        self.start, self.end, self.origin = start, end, origin

    def seconds(self) -> float:
        return self.end.time_since(self.start) * 1e-3

    def span_ns(self) -> tuple[int, int] | None:
        """Start and end in nanoseconds since the backend's origin event (CUDA events have no absolute clock)."""
        if self.origin is None:
            return None
        return (int(round(self.start.time_since(self.origin) * 1e6)), int(round(self.end.time_since(self.origin) * 1e6)))


class CUDAKernel(Kernel):
    def __init__(self, function, name: str, module):
        self.function, self.name, self.module = function, name, module


class CUDABuffer(Buffer):
    def __init__(self, allocation, nbytes: int):
        self.allocation, self.nbytes = allocation, nbytes


def _arg_format(name: str, args: Sequence[Any]) -> tuple[str, list]:
    """pycuda's struct format of a launch's arguments (``P`` for device memory, the numpy type's character for
    a numpy scalar) and the values to pack; anything else is a UserError."""
    fmt, values = [], []
    for i, a in enumerate(args):
        if isinstance(a, CUDABuffer):
            fmt.append("P")
            values.append(int(a.allocation))
        elif isinstance(a, np.generic):
            fmt.append(a.dtype.char)
            values.append(a)
        else:
            raise UserError(f"argument {i} of {name} is a {type(a).__name__}: pass device buffers or numpy "
                            "scalars (np.int32(...)) so that its C type is known")
    return "".join(fmt), values


def _translate(exc: Exception, what: str) -> Exception:
    if isinstance(exc, cuda.LogicError):
        return UserError(f"{what}: {exc}")
    return DeviceError(f"{what}: {type(exc).__name__}: {exc}")


class CUDABackend(Backend):
    kind = "cuda"
    source_suffix = ".cu"

    def __init__(self, index: int = 0):
        if not _init() or index >= cuda.Device.count():
            raise UserError(f"unknown device cuda:{index}; see `gpuprofiler devices`")
        self.device = cuda.Device(index)
        self.context = self.device.retain_primary_context()
        self.context.push()
        self.info = describe(index, self.device)
        self._modules: dict[tuple, Any] = {}
        self._hold_hook: HoldHook | None = None
        self._origin = cuda.Event()  # the zero of this backend's event timeline
        self._origin.record()
        # pycuda aborts the interpreter if a context is still pushed when it unloads
        atexit.register(self.close)

    def bind_thread(self) -> None:
        """Make this backend's context current on the calling thread: a worker's pool may run a task on another
        thread than the one that opened the device."""
        if self.context is None:
            return
        current = cuda.Context.get_current()
        if current is None or current.handle != self.context.handle:
            self.context.push()

    def unbind_thread(self) -> None:
        """Take this backend's context off the calling thread's stack (a task ends on a pool's thread: a context
        left pushed there makes pycuda abort the process at exit)."""
        if self.context is None:
            return
        current = cuda.Context.get_current()
        if current is not None and current.handle == self.context.handle:
            cuda.Context.pop()

    def _timed(self, action) -> CUDAEvent:
        start, end = cuda.Event(), cuda.Event()
        start.record()
        action()
        end.record()
        return CUDAEvent(start, end, self._origin)

    def compile(self, source: str, kernel_name: str, defines: dict[str, Any] | None = None,
                options: Sequence[str] = ()) -> CUDAKernel:
        from pycuda.compiler import SourceModule

        opts = [f"-D{k}={v}" for k, v in (defines or {}).items()] + list(options)
        key = (source, tuple(opts))
        module = self._modules.get(key)
        if module is None:
            try:
                module = SourceModule(source, options=opts, no_extern_c=True)
            except cuda.CompileError as exc:
                raise at_stage(UserError(f"CUDA compile error:\n{(exc.stderr or str(exc)).strip()}"), "compile") from None
            except cuda.Error as exc:
                raise _translate(exc, f"loading the module of {kernel_name}") from None
            self._modules[key] = module
        try:
            function = module.get_function(kernel_name)
        except cuda.LogicError:
            raise at_stage(UserError(f"kernel {kernel_name!r} not found in the source (declare it extern \"C\")"),
                           "compile") from None
        return CUDAKernel(function, kernel_name, module)

    def alloc(self, nbytes: int) -> CUDABuffer:
        try:
            return CUDABuffer(cuda.mem_alloc(max(int(nbytes), 1)), int(nbytes))
        except cuda.Error as exc:
            raise _translate(exc, f"allocating {nbytes} bytes") from None

    def to_device(self, array: np.ndarray, buffer: CUDABuffer | None = None) -> tuple[CUDABuffer, CUDAEvent]:
        array = np.ascontiguousarray(array)
        buffer = buffer or self.alloc(array.nbytes)
        try:
            event = self._timed(lambda: cuda.memcpy_htod(buffer.allocation, array))
        except cuda.Error as exc:
            raise _translate(exc, "host-to-device copy") from None
        return buffer, event

    def from_device(self, buffer: CUDABuffer, out: np.ndarray) -> CUDAEvent:
        try:
            return self._timed(lambda: cuda.memcpy_dtoh(out, buffer.allocation))
        except cuda.Error as exc:
            raise _translate(exc, "device-to-host copy") from None

    @staticmethod
    def _shape(global_size: Sequence[int], local_size: Sequence[int] | None) -> tuple[tuple, tuple]:
        """(block, grid) of a launch over ``global_size`` threads in blocks of ``local_size``."""
        local = tuple(int(x) for x in (local_size or [min(256, int(global_size[0]))]))
        dims = len(global_size)
        block = local + (1,) * (3 - len(local))
        grid = tuple(-(-int(g) // int(l)) for g, l in zip(global_size, local)) + (1,) * (3 - dims)
        return block, grid[:3]

    def launch(self, kernel: CUDAKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
               args: Sequence[Any]) -> CUDAEvent:
        """Launch between two events (timed launches have the hold kernel queued first: :class:`HoldHook`)."""
        block, grid = self._shape(global_size, local_size)
        native = [a.allocation if isinstance(a, CUDABuffer) else a for a in args]
        try:
            return self._timed(lambda: kernel.function(*native, block=block, grid=grid))
        except cuda.Error as exc:
            raise _translate(exc, f"launching {kernel.name}") from None

    def prepare_launch(self, kernel: CUDAKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                       args: Sequence[Any]) -> Callable[[], None]:
        """cuLaunchKernel alone per call: the argument buffer is packed once (pycuda's prepared-call packing),
        no events; where pycuda lacks the raw launch, its prepared call (which packs per call)."""
        block, grid = self._shape(global_size, local_size)
        fmt, values = _arg_format(kernel.name, args)
        function = kernel.function
        raw = getattr(function, "_launch_kernel", None)
        try:
            from pycuda._pvt_struct import pack
        except ImportError:
            pack = None
        if raw is not None and pack is not None:
            buf = pack(fmt, *values)

            def call() -> None:
                raw(grid, block, buf, 0, None)
        else:
            function.prepare(fmt)

            def call() -> None:
                function.prepared_async_call(grid, block, None, *values)

        def go() -> None:
            try:
                call()
            except cuda.Error as exc:
                raise _translate(exc, f"launching {kernel.name}") from None

        return go

    def hold(self, seconds: float) -> None:
        """Queue the hold kernel: the GPU spins for ``seconds`` on its global timer (see :class:`HoldHook`)."""
        function = getattr(self, "_hold_function", None)
        if function is None:
            function = self._hold_function = self.compile(HOLD_SOURCE, "gpuprofiler_hold").function
        try:
            function(np.uint64(int(seconds * 1e9)), block=(1, 1, 1), grid=(1, 1, 1))
        except cuda.Error as exc:
            raise _translate(exc, "launching the hold kernel") from None

    def launch_span(self, kernel: CUDAKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                    args: Sequence[Any], launches: int) -> float:
        """CUDA events recorded before the first and after the last of ``launches`` prepared launches, all
        queued behind the hold kernel. Where the host took longer to queue them than the hold lasted (the GPU
        may have waited for it), the span is taken again with a hold twice as long, up to MAX_SPAN_HOLD_S."""
        launches = check_launches(launches)
        go = self.prepare_launch(kernel, global_size, local_size, args)
        hold_s = min(max(50e-6, launches * SPAN_HOLD_PER_LAUNCH_S), MAX_SPAN_HOLD_S)
        while True:
            self.finish()
            start, end = cuda.Event(), cuda.Event()
            t0 = time.perf_counter()
            self.hold(hold_s)
            start.record()
            for _ in range(launches):
                go()
            end.record()
            host_s = time.perf_counter() - t0
            try:
                end.synchronize()
                span = end.time_since(start) * 1e-3
            except cuda.Error as exc:
                raise _translate(exc, f"timing {launches} launches of {kernel.name}") from None
            if host_s < hold_s:
                return span
            if hold_s >= MAX_SPAN_HOLD_S:
                raise DeviceError(f"the host took {host_s * 1e3:.1f} ms to queue {launches} launches of {kernel.name}, "
                                  f"longer than the longest hold ({MAX_SPAN_HOLD_S * 1e3:.0f} ms): the events "
                                  "would time the host, not the GPU")
            hold_s = min(2 * hold_s, MAX_SPAN_HOLD_S)

    def launch_hooks(self) -> Sequence[LaunchHook]:
        if self._hold_hook is None:
            self._hold_hook = HoldHook(self)
        return (self._hold_hook,)

    def pinned_empty(self, nbytes: int) -> np.ndarray:
        """Page-locked host memory (cudaHostAlloc)."""
        return cuda.pagelocked_empty(int(nbytes), np.uint8)

    def finish(self) -> None:
        try:
            cuda.Context.synchronize()
        except cuda.Error as exc:
            raise _translate(exc, "synchronizing") from None

    def close(self) -> None:
        if self.context is None:
            return
        context, self.context = self.context, None
        atexit.unregister(self.close)
        try:
            current = cuda.Context.get_current()
            if current is None or current.handle != context.handle:  # pushed on another thread (a worker's pool)
                context.push()
            context.pop()
            context.detach()
        except Exception:  # noqa: BLE001 - closing a context that is already gone
            pass


class HoldHook(LaunchHook):
    """Queues a kernel that keeps the GPU busy for ``hold_s`` before each timed launch.

    pycuda packs a launch's arguments in Python (tens of microseconds), and an idle GPU records the start
    event at once, so the events around a plain launch time the host as well. With the GPU still busy
    with the hold kernel, the start event fires when the GPU reaches the timed kernel. Where the host
    took longer than the hold, the hold doubles for the next launch (up to ``MAX_HOLD_S``).
    """

    def __init__(self, backend: CUDABackend, hold_s: float = 50e-6):
        self.backend = backend
        self.hold_s = hold_s
        self._kernel = None
        self._queued = 0.0

    def before_launch(self) -> None:
        if self._kernel is None:
            self._kernel = self.backend.compile(HOLD_SOURCE, "gpuprofiler_hold").function
        self._queued = time.perf_counter()
        try:
            self._kernel(np.uint64(self.hold_s * 1e9), block=(1, 1, 1), grid=(1, 1, 1))
        except cuda.Error as exc:
            raise _translate(exc, "launching the hold kernel") from None

    def after_launch(self) -> None:
        if time.perf_counter() - self._queued > self.hold_s and self.hold_s < MAX_HOLD_S:
            self.hold_s *= 2
