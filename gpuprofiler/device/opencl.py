"""OpenCL backend through pyopencl: a profiling queue, events timed by the device."""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np
import pyopencl as cl

from gpuprofiler.device.base import (
    Backend,
    Buffer,
    DeviceInfo,
    Event,
    Kernel,
    check_launches,
    host_caches,
    mmap_buffers,
    page_batch,
    round_up,
)
from gpuprofiler.errors import DeviceError, UserError, at_stage

_USER_CODES = {"INVALID_WORK_GROUP_SIZE", "INVALID_WORK_ITEM_SIZE", "INVALID_KERNEL_ARGS", "INVALID_ARG_SIZE",
               "INVALID_ARG_VALUE", "INVALID_GLOBAL_WORK_SIZE", "INVALID_KERNEL_NAME", "INVALID_BUFFER_SIZE"}
_TYPES = {cl.device_type.GPU: "gpu", cl.device_type.CPU: "cpu", cl.device_type.ACCELERATOR: "accelerator"}


def _check_arity(kernel: "cl.Kernel", name: str, native: Sequence[Any]) -> None:
    """A launch gives the kernel exactly its arguments (pyopencl would fail with a TypeError)."""
    wanted = kernel.get_info(cl.kernel_info.NUM_ARGS)
    if len(native) != wanted:
        raise UserError(f"kernel {name} takes {wanted} argument(s), {len(native)} given "
                        "(the spec's [[args]] must list them all, in order)")


def _translate(exc: cl.Error, what: str) -> Exception:
    """Map a pyopencl error to UserError (bad request) or DeviceError (the device failed)."""
    code = getattr(exc, "code", None)
    name = ""
    if code is not None:
        name = next((k for k, v in vars(cl.status_code).items() if v == code and k.isupper()), str(code))
    cls = UserError if name in _USER_CODES else DeviceError
    return cls(f"{what}: {name or type(exc).__name__}: {exc}")


GENERIC_CPU_HINT = ("PoCL's LLVM does not recognise this CPU model (it reports 'generic'), so this PoCL cannot "
                    "compile kernels here; use another PoCL build (Debian/Ubuntu: apt-get install pocl-opencl-icd, "
                    "then pick it with --device, see `gpuprofiler devices`)")


def compile_problem(driver_version: str) -> str | None:
    """Why a device cannot compile kernels, known before trying: a PoCL CPU device whose LLVM did not recognise the
    host CPU names its target 'generic' (its HSTR ends in ``-generic``), which LLVM then refuses as a target CPU."""
    if re.search(r"HSTR:\s*pthread-x86_64-[\w.-]*-generic\b", driver_version):
        return GENERIC_CPU_HINT
    return None


def platforms() -> list:
    try:
        return cl.get_platforms()
    except cl.Error:
        return []


def describe(platform_index: int, device_index: int, device: "cl.Device") -> DeviceInfo:
    """DeviceInfo of an OpenCL device (warp/wavefront width from vendor extensions where known)."""
    warp = None
    ext = device.extensions
    if "cl_nv_device_attribute_query" in ext:
        warp = int(device.get_info(0x4003))  # CL_DEVICE_WARP_SIZE_NV
    elif "cl_amd_device_attribute_query" in ext:
        warp = int(device.get_info(0x4043))  # CL_DEVICE_WAVEFRONT_WIDTH_AMD
    dtype = next((v for k, v in _TYPES.items() if device.type & k), "other")
    return DeviceInfo(
        id=f"opencl:{platform_index}:{device_index}",
        backend="opencl",
        name=device.name.strip(),
        vendor=device.vendor.strip(),
        type=dtype,
        compute_units=int(device.max_compute_units),
        clock_mhz=float(device.max_clock_frequency) or None,
        global_mem_bytes=int(device.global_mem_size),
        local_mem_bytes=int(device.local_mem_size),
        max_work_group_size=int(device.max_work_group_size),
        driver=f"{device.driver_version} ({device.version})",
        platform=device.platform.name.strip(),
        warp_size=warp,
        extra={
            "double": bool(device.double_fp_config) if hasattr(device, "double_fp_config") else "cl_khr_fp64" in ext,
            "max_mem_alloc_bytes": int(device.max_mem_alloc_size),
            "global_mem_cache_bytes": int(device.global_mem_cache_size),
            "global_mem_cacheline_bytes": int(device.global_mem_cacheline_size),
            "profiling_timer_resolution_ns": int(device.profiling_timer_resolution),
            **({"problem": problem} if (problem := compile_problem(device.version)) else {}),
            **({"host_caches": caches} if dtype == "cpu" and (caches := host_caches()) else {}),
            **({"page_run_pages": run} if dtype == "cpu" and (run := page_batch()) else {}),
        },
    )


def list_devices() -> list[DeviceInfo]:
    return [describe(p, d, dev) for p, plat in enumerate(platforms()) for d, dev in enumerate(plat.get_devices())]


class CLEvent(Event):
    def __init__(self, event: "cl.Event"):
        self.event = event

    def seconds(self) -> float:
        return (self.event.profile.end - self.event.profile.start) * 1e-9

    def span_ns(self) -> tuple[int, int]:
        return int(self.event.profile.start), int(self.event.profile.end)

    def launch_latency(self) -> float:
        """Profiling start minus queued time: clpeak's "kernel launch latency"."""
        return (self.event.profile.start - self.event.profile.queued) * 1e-9


class CLKernel(Kernel):
    def __init__(self, kernel: "cl.Kernel", name: str, program: "cl.Program"):
        self.kernel, self.name, self.program = kernel, name, program


class CLBuffer(Buffer):
    def __init__(self, buffer: "cl.Buffer", nbytes: int):
        self.buffer, self.nbytes = buffer, nbytes


class OpenCLBackend(Backend):
    kind = "opencl"
    source_suffix = ".cl"

    def __init__(self, platform_index: int = 0, device_index: int = 0, device: "cl.Device | None" = None,
                 info: DeviceInfo | None = None):
        if device is None:
            plats = platforms()
            try:
                device = plats[platform_index].get_devices()[device_index]
            except IndexError:
                raise UserError(f"unknown device opencl:{platform_index}:{device_index}; "
                                "see `gpuprofiler devices`") from None
        self.device = device
        self.info = info or describe(platform_index, device_index, device)
        if self.info.type == "cpu" and (threshold := mmap_buffers()) is not None:
            self.info.extra["buffers_mmapped_from_bytes"] = threshold
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self._programs: dict[tuple, cl.Program] = {}
        self._pinned: list = []

    def compile(self, source: str, kernel_name: str, defines: dict[str, Any] | None = None,
                options: Sequence[str] = ()) -> CLKernel:
        opts = [f"-D{k}={v}" for k, v in (defines or {}).items()] + list(options)
        key = (source, tuple(opts))
        program = self._programs.get(key)
        if program is None:
            program = cl.Program(self.context, source)
            try:
                program.build(options=opts)
            except cl.Error as exc:
                try:
                    log = program.get_build_info(self.device, cl.program_build_info.LOG)
                except cl.Error:
                    log = ""
                hint = f"\n{GENERIC_CPU_HINT}" if "unknown target CPU 'generic'" in (log or str(exc)) else ""
                raise at_stage(UserError(f"OpenCL compile error:\n{(log or str(exc)).strip()}{hint}"), "compile") from None
            self._programs[key] = program
        try:
            kernel = cl.Kernel(program, kernel_name)
        except cl.Error:
            names = program.get_info(cl.program_info.KERNEL_NAMES)
            raise at_stage(UserError(f"kernel {kernel_name!r} not found in the source (it has: {names})"),
                           "compile") from None
        return CLKernel(kernel, kernel_name, program)

    def alloc(self, nbytes: int) -> CLBuffer:
        try:
            return CLBuffer(cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size=max(int(nbytes), 1)), int(nbytes))
        except cl.Error as exc:
            raise _translate(exc, f"allocating {nbytes} bytes") from None

    def to_device(self, array: np.ndarray, buffer: CLBuffer | None = None) -> tuple[CLBuffer, CLEvent]:
        array = np.ascontiguousarray(array)
        buffer = buffer or self.alloc(array.nbytes)
        try:
            event = cl.enqueue_copy(self.queue, buffer.buffer, array, is_blocking=True)
        except cl.Error as exc:
            raise _translate(exc, "host-to-device copy") from None
        return buffer, CLEvent(event)

    def from_device(self, buffer: CLBuffer, out: np.ndarray) -> CLEvent:
        try:
            return CLEvent(cl.enqueue_copy(self.queue, out, buffer.buffer, is_blocking=True))
        except cl.Error as exc:
            raise _translate(exc, "device-to-host copy") from None

    def launch(self, kernel: CLKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
               args: Sequence[Any]) -> CLEvent:
        native = [a.buffer if isinstance(a, CLBuffer) else a for a in args]
        _check_arity(kernel.kernel, kernel.name, native)
        try:
            kernel.kernel.set_args(*native)
            event = cl.enqueue_nd_range_kernel(self.queue, kernel.kernel, round_up(global_size, local_size),
                                               None if local_size is None else tuple(int(x) for x in local_size))
        except cl.Error as exc:
            raise _translate(exc, f"launching {kernel.name}") from None
        return CLEvent(event)

    def _prepared(self, kernel: CLKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                  args: Sequence[Any]) -> Callable[..., "cl.Event"]:
        """Enqueue function of a private copy of the kernel whose arguments are set once (later launches of
        ``kernel`` with other arguments do not change it)."""
        native = [a.buffer if isinstance(a, CLBuffer) else a for a in args]
        try:
            clone = cl.Kernel(kernel.program, kernel.name)
            _check_arity(clone, kernel.name, native)
            clone.set_args(*native)
        except cl.Error as exc:
            raise _translate(exc, f"setting the arguments of {kernel.name}") from None
        except TypeError as exc:  # pyopencl: a value that does not fit the argument's type
            raise UserError(f"setting the arguments of {kernel.name}: {exc}") from None
        gsize = round_up(global_size, local_size)
        lsize = None if local_size is None else tuple(int(x) for x in local_size)
        queue, enqueue = self.queue, cl.enqueue_nd_range_kernel

        def go(wait_for=None) -> "cl.Event":
            return enqueue(queue, clone, gsize, lsize, wait_for=wait_for)

        return go

    def prepare_launch(self, kernel: CLKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                       args: Sequence[Any]) -> Callable[[], CLEvent]:
        """clEnqueueNDRangeKernel alone per call: the arguments are set once, on a private copy of the kernel."""
        go = self._prepared(kernel, global_size, local_size, args)

        def launch() -> CLEvent:
            try:
                return CLEvent(go())
            except cl.Error as exc:
                raise _translate(exc, f"launching {kernel.name}") from None

        return launch

    def launch_span(self, kernel: CLKernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                    args: Sequence[Any], launches: int) -> float:
        """Profiling START of the first launch to END of the last; the first waits on a user event that is
        set only after every launch is queued, so the device never waits for the host in between."""
        launches = check_launches(launches)
        go = self._prepared(kernel, global_size, local_size, args)
        gate = cl.UserEvent(self.context)
        try:
            first = last = go([gate])
            for _ in range(launches - 1):
                last = go()
        except cl.Error as exc:
            raise _translate(exc, f"launching {kernel.name}") from None
        finally:
            gate.set_status(cl.command_execution_status.COMPLETE)
        self.finish()
        return (last.profile.end - first.profile.start) * 1e-9

    def pinned_empty(self, nbytes: int) -> np.ndarray:
        """Host memory the device can reach directly: a buffer allocated with ALLOC_HOST_PTR, mapped."""
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, size=max(int(nbytes), 1))
        array, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE, 0, (int(nbytes),),
                                         np.uint8, is_blocking=True)
        self._pinned.append(buf)
        return array

    def finish(self) -> None:
        try:
            self.queue.finish()
        except cl.Error as exc:
            raise _translate(exc, "waiting for the queue") from None

    def close(self) -> None:
        self._programs.clear()
        self._pinned.clear()
        for peer in self.peers[1:]:
            peer.close()


def open_split(platform_index: int, device_index: int, parts: int, use: int | None = None) -> OpenCLBackend:
    """The device split by fission into ``parts`` sub-devices of equal compute units, the first ``use`` of them
    (all by default) opened, each with its own context and profiling queue; the first is returned, the others are
    its ``peers``."""
    whole = OpenCLBackend(platform_index, device_index)
    cus = whole.info.compute_units
    use = parts if use is None else use
    if parts < 1 or cus % parts or not 1 <= use <= parts:
        raise UserError(f"opencl:{platform_index}:{device_index} has {cus} compute units: it splits into a divisor "
                        f"of that many equal sub-devices, and 1..N of them are used (got /{parts}/{use})")
    try:
        subs = whole.device.create_sub_devices([cl.device_partition_property.EQUALLY, cus // parts])
    except (cl.Error, cl.LogicError, cl.RuntimeError) as exc:
        raise UserError(f"opencl:{platform_index}:{device_index} cannot be split into sub-devices: {exc}") from None
    whole.close()
    backends = []
    for k, sub in enumerate(subs[:use]):
        info = describe(platform_index, device_index, sub)
        info.id = f"opencl:{platform_index}:{device_index}/{parts}" + (f"/{use}" if use != parts else "")
        info.extra["sub_device"] = {"index": k, "parts": parts, "used": use,
                                    "parent_compute_units": cus}
        backends.append(OpenCLBackend(device=sub, info=info))
    backends[0]._peers = backends
    return backends[0]
