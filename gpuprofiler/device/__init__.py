"""Backends (OpenCL, CUDA) behind one interface; the API modules are imported only when used.

Device ids: ``opencl:P:D`` (platform P, device D) and ``cuda:I``. The default is
the first CUDA GPU, else the first OpenCL GPU, else the first OpenCL CPU (PoCL).
"""

from __future__ import annotations

import importlib.util
import re

from gpuprofiler.device.base import Backend, Buffer, DeviceInfo, Event, Kernel
from gpuprofiler.errors import UserError

__all__ = ["Backend", "Buffer", "DeviceInfo", "Event", "Kernel", "list_devices", "open_backend", "default_device_id",
           "register_scheme", "is_device_id", "describe_devices"]

# device ids of other schemes (``NAME:...``): a plugin's backend, a simulated fleet. NAME -> (open, list)
_SCHEMES: dict[str, tuple] = {}


def register_scheme(name: str, opener, lister) -> None:
    """Devices of another kind under ids ``NAME:...``: ``opener(id)`` returns its Backend, ``lister()`` its
    DeviceInfos (listed after CUDA's and OpenCL's)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name in ("opencl", "cuda"):
        raise ValueError(f"device scheme {name!r}: a lower-case name other than opencl and cuda")
    _SCHEMES[name] = (opener, lister)


def unregister_scheme(name: str) -> None:
    _SCHEMES.pop(name, None)


def is_device_id(text: str) -> bool:
    """Whether ``text`` has the form of a device id (``opencl:P:D[/N[/K]]``, ``cuda:I``, a registered scheme's)."""
    return bool(re.fullmatch(r"opencl:\d+:\d+(?:/\d+(?:/\d+)?)?|cuda:\d+", text)) or \
        text.partition(":")[0] in _SCHEMES and bool(text.partition(":")[2])


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
    for _, lister in list(_SCHEMES.values()):
        devices += lister()
    return devices


def describe_devices(device_ids: list[str]) -> dict[str, DeviceInfo]:
    """The DeviceInfo of each of ``device_ids`` found on this machine (listing only the APIs they name)."""
    schemes = {i.partition(":")[0] for i in device_ids}
    found: list[DeviceInfo] = []
    if schemes & {"opencl", "cuda"}:
        found = list_devices()
    else:
        for name in schemes & set(_SCHEMES):
            found += _SCHEMES[name][1]()
    return {d.id: d for d in found if d.id in device_ids}


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
    scheme = device_id.strip().partition(":")[0]
    if scheme in _SCHEMES:
        return _SCHEMES[scheme][0](device_id.strip())
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
