"""Backends (OpenCL, CUDA) behind one interface; the API modules are imported only when used.

Device ids: ``opencl:P:D`` (platform P, device D) and ``cuda:I``. The default is
the first CUDA GPU, else the first OpenCL GPU, else the first OpenCL CPU (PoCL).
"""

from __future__ import annotations

import importlib.util
import re

from gpuprofiler.device.base import Backend, Buffer, DeviceInfo, Event, Kernel
from gpuprofiler.errors import UserError

__all__ = ["Backend", "Buffer", "DeviceInfo", "Event", "Kernel", "list_devices", "open_backend", "default_device_id"]


def cuda_available() -> bool:
    """True when pycuda is importable (it says nothing about whether a GPU is present)."""
    return importlib.util.find_spec("pycuda") is not None


def list_devices() -> list[DeviceInfo]:
    """Every device reachable through CUDA (if pycuda is installed) and OpenCL."""
    devices: list[DeviceInfo] = []
    if cuda_available():
        from gpuprofiler.device import cuda

        devices += cuda.list_devices()
    if importlib.util.find_spec("pyopencl") is not None:
        from gpuprofiler.device import opencl

        devices += opencl.list_devices()
    return devices


def default_device_id(devices: list[DeviceInfo] | None = None) -> str:
    """First CUDA GPU, else first OpenCL GPU, else the PoCL CPU, else any OpenCL device; a device known not to
    compile kernels (``extra["problem"]``) only when there is no other."""
    devices = list_devices() if devices is None else devices
    devices = [d for d in devices if not d.extra.get("problem")] + [d for d in devices if d.extra.get("problem")]
    for test in (
        lambda d: d.backend == "cuda",
        lambda d: d.backend == "opencl" and d.type == "gpu",
        lambda d: d.backend == "opencl" and "portable" in d.platform.lower(),
        lambda d: True,
    ):
        for dev in devices:
            if test(dev):
                return dev.id
    raise UserError("no device found: install pyopencl and pocl-binary-distribution (pip install gpuprofiler)")


def open_backend(device_id: str | None = None) -> Backend:
    """Open the device ``device_id`` (or the default) and return its backend."""
    device_id = device_id or default_device_id()
    m = re.fullmatch(r"opencl:(\d+):(\d+)(?:/(\d+)(?:/(\d+))?)?|cuda:(\d+)", device_id.strip())
    if not m:
        raise UserError(f"unknown device id {device_id!r}: expected opencl:P:D, opencl:P:D/N (split into N "
                        "sub-devices), opencl:P:D/N/K (the first K of them) or cuda:I (see `gpuprofiler devices`)")
    if m.group(5) is not None:
        if not cuda_available():
            raise UserError("device cuda:* needs pycuda: pip install 'gpuprofiler[cuda]' where the CUDA toolkit is")
        from gpuprofiler.device.cuda import CUDABackend

        return CUDABackend(int(m.group(5)))
    if importlib.util.find_spec("pyopencl") is None:
        raise UserError("device opencl:* needs pyopencl: pip install pyopencl")
    from gpuprofiler.device.opencl import OpenCLBackend, open_split

    if m.group(3) is not None:
        return open_split(int(m.group(1)), int(m.group(2)), int(m.group(3)),
                          None if m.group(4) is None else int(m.group(4)))
    return OpenCLBackend(int(m.group(1)), int(m.group(2)))
