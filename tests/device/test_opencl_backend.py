"""The OpenCL backend on the real PoCL device."""

import numpy as np
import pytest

from gpuprofiler.device import default_device_id, list_devices, open_backend
from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.device.opencl import compile_problem
from gpuprofiler.errors import UserError


def _cpu(id_, version):
    return DeviceInfo(id=id_, backend="opencl", name="pthread-AMD EPYC", vendor="AMD", type="cpu", compute_units=2,
                      clock_mhz=None, global_mem_bytes=1, local_mem_bytes=1, max_work_group_size=1, driver="",
                      platform="Portable Computing Language",
                      extra={"problem": p} if (p := compile_problem(version)) else {})


def test_a_pocl_that_cannot_target_this_cpu_is_named_and_not_the_default():
    broken = "OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-generic"
    assert "apt-get install pocl-opencl-icd" in compile_problem(broken)
    for good in ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512",
                 "OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3", "OpenCL 3.0 CUDA 12.4"):
        assert compile_problem(good) is None
    devices = [_cpu("opencl:0:0", broken), _cpu("opencl:1:0", "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-znver3")]
    assert default_device_id(devices) == "opencl:1:0"
    assert default_device_id(devices[:1]) == "opencl:0:0"  # the only one: chosen, and its compile error explains


def test_pocl_is_listed_and_described():
    devices = list_devices()
    pocl = sorted((d for d in devices if "portable" in d.platform.lower()), key=lambda d: bool(d.extra.get("problem")))
    assert pocl, devices
    d = pocl[0]
    assert d.type == "cpu" and d.compute_units >= 1 and d.global_mem_bytes > 0 and d.max_work_group_size >= 1
    assert d.slug.startswith("pocl-")
    if not any(x.type == "gpu" for x in devices):
        assert default_device_id(devices) == d.id


def test_compile_copy_launch_time(pocl):
    src = "__kernel void twice(int n, __global float *x) { int i = get_global_id(0); if (i < n) x[i] *= 2.0f; }"
    kernel = pocl.compile(src, "twice")
    host = np.arange(1000, dtype=np.float32)
    buf, up = pocl.to_device(host)
    event = pocl.launch(kernel, (1000,), (64,), [np.int32(1000), buf])  # global rounded up to 1024
    out = np.empty_like(host)
    down = pocl.from_device(buf, out)
    pocl.finish()
    assert np.array_equal(out, host * 2)
    for ev in (up, event, down):
        assert 0 < ev.seconds() < 10


def test_compile_error_carries_the_log(pocl):
    with pytest.raises(UserError, match="OpenCL compile error") as info:
        pocl.compile("__kernel void broken(__global float *x) { x[0] = undefined_name; }", "broken")
    assert "undefined_name" in str(info.value)


def test_missing_kernel_name(pocl):
    with pytest.raises(UserError, match="not found"):
        pocl.compile("__kernel void a(int n) { }", "b")


def test_unknown_device_ids():
    for bad in ("opencl:9:9", "gpu0", "cuda"):
        with pytest.raises(UserError):
            open_backend(bad)


class _Libc:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return self.answer


def test_the_host_allocator_maps_buffers_from_the_threshold():
    """glibc's mallopt(M_MMAP_THRESHOLD) is asked for the threshold; a refusal or no mallopt gives None."""
    from gpuprofiler.device.base import BUFFER_MMAP_BYTES, M_MMAP_THRESHOLD, mmap_buffers

    libc = _Libc(1)
    assert mmap_buffers(1 << 20, libc) == 1 << 20 and libc.calls == [(M_MMAP_THRESHOLD, 1 << 20)]
    assert mmap_buffers(1 << 20, _Libc(0)) is None
    assert mmap_buffers(1 << 20, object()) is None
    assert BUFFER_MMAP_BYTES == 1 << 20


def test_a_cpu_devices_buffers_are_mapped_as_a_large_targets_are():
    """Opening the PoCL device sets the threshold in this process (glibc) and records it with the device."""
    backend = open_backend()
    assert backend.info.type == "cpu"
    assert backend.info.extra.get("buffers_mmapped_from_bytes") == 1 << 20
