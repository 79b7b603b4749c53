"""The small interface every backend implements: compile, copy, launch, time, describe."""

from __future__ import annotations

import abc
import functools
import itertools
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from gpuprofiler.errors import UserError

CPU_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"


def host_caches(root: str = CPU_CACHE_DIR) -> list[dict[str, int]]:
    """The host CPU's data caches as the operating system reports them (Linux sysfs): level, size, ways, sets and
    line per level, smallest first; [] where they are not reported. A CPU device runs on these caches: their
    associativity decides when a power-of-two stride crowds a set, which no latency curve shows."""
    out = []
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith("index"))
    except OSError:
        return []
    for name in names:
        def read(key: str) -> str:
            with open(os.path.join(root, name, key)) as f:
                return f.read().strip()
        try:
            if read("type") not in ("Data", "Unified"):
                continue
            size = read("size")
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
            level = {"level": int(read("level")), "size_bytes": int(size.rstrip("KMG")) * scale,
                     "ways": int(read("ways_of_associativity")), "sets": int(read("number_of_sets")),
                     "line_bytes": int(read("coherency_line_size"))}
        except (OSError, ValueError):
            continue
        if all(v > 0 for v in level.values()):
            out.append(level)
    return sorted(out, key=lambda c: c["size_bytes"])


# glibc's mallopt parameter and the threshold a CPU device's buffers are mmapped from
M_MMAP_THRESHOLD = -3
BUFFER_MMAP_BYTES = 1 << 20


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    """The C library, loaded once (finding it runs ``ldconfig``); None where there is none to load."""
    try:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("c")
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def mmap_buffers(threshold: int = BUFFER_MMAP_BYTES, libc: Any = None) -> int | None:
    """Have the host's allocator (glibc) map every allocation of ``threshold`` bytes or more from the operating
    system, as it always maps those past 32 MiB: a CPU device's buffers are the host's allocations, and glibc
    serves those below its moving threshold (128 KiB, rising with the process's frees up to 32 MiB) from its heap.
    On the Zen 4 VM's PoCL, vadd over heap buffers (4.2M-7.6M items) took 0.74-0.91 ns a work-item against 0.59-0.63
    mapped, the 2^27 target's: the small sizes then run as a large target does. Returns the threshold set, or None
    where there is no glibc."""
    setter = getattr(_libc() if libc is None else libc, "mallopt", None)
    if setter is None:
        return None
    try:
        return threshold if setter(M_MMAP_THRESHOLD, int(threshold)) == 1 else None
    except (OSError, TypeError, ValueError):
        return None


def page_batch(path: str = "/proc/zoneinfo") -> int | None:
    """Pages Linux hands out in one batch from its free lists to a CPU's page cache (the largest zone's
    ``batch``): a fresh buffer's pages come physically contiguous in runs of about that many. None elsewhere."""
    try:
        with open(path) as f:
            batches = [int(line.split()[1]) for line in f if line.split()[:1] == ["batch:"]]
    except (OSError, ValueError, IndexError):
        return None
    return max(batches) if batches and max(batches) > 0 else None


@dataclass
class DeviceInfo:
    """What we know about a device; recorded with every measurement."""

    id: str
    backend: str
    name: str
    vendor: str
    type: str  # "gpu" | "cpu" | "accelerator" | "other"
    compute_units: int
    clock_mhz: float | None
    global_mem_bytes: int
    local_mem_bytes: int
    max_work_group_size: int
    driver: str
    platform: str = ""
    warp_size: int | None = None
    compute_capability: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        """Folder-safe name of the device, e.g. ``pocl-cpu-intel-r-xeon-r-processor``."""
        prefix = "pocl-" if "portable" in self.platform.lower() or "pocl" in self.platform.lower() else ""
        text = f"{prefix}{self.name}".lower()
        return re.sub(r"[^a-z0-9]+", "-", text).strip("-")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["slug"] = self.slug
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DeviceInfo":
        """The DeviceInfo a ``to_dict`` (a record's, a worker's) describes; keys it does not know are left out."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class Event(abc.ABC):
    """A timed operation on the device; :meth:`seconds` is valid after the queue is finished."""

    @abc.abstractmethod
    def seconds(self) -> float:
        """Device-measured duration of the operation (events), in seconds."""

    def span_ns(self) -> tuple[int, int] | None:
        """Start and end on the device's clock in nanoseconds (for timelines), where the API gives them."""
        return None


class Kernel(abc.ABC):
    """A compiled kernel function, launched through :meth:`Backend.launch`."""

    name: str


_SERIALS = itertools.count()


class Buffer(abc.ABC):
    """Device memory holding ``nbytes``."""

    nbytes: int
    serial: int  # a number no other buffer of this process has had: what a recorded run names its buffers by

    def __new__(cls, *args: Any, **kwargs: Any) -> "Buffer":
        obj = super().__new__(cls)
        obj.serial = next(_SERIALS)
        return obj


class LaunchHook:
    """What the timing engine does around each timed launch on a backend (the CUDA backend's hold kernel):
    result checks and the launches of wrapped programs do not run it."""

    def before_launch(self) -> None:
        """Just before the timed launch is enqueued."""

    def after_launch(self) -> None:
        """Just after it was enqueued (before it is waited for)."""


class Backend(abc.ABC):
    """A device reached through one API (OpenCL or CUDA)."""

    kind: str  # "opencl" | "cuda"
    info: DeviceInfo
    source_suffix: str  # ".cl" | ".cu"

    @abc.abstractmethod
    def compile(self, source: str, kernel_name: str, defines: dict[str, Any] | None = None,
                options: Sequence[str] = ()) -> Kernel:
        """Compile ``source`` and return its kernel ``kernel_name``; compile errors raise UserError with the log."""

    @abc.abstractmethod
    def alloc(self, nbytes: int) -> Buffer:
        """Allocate device memory."""

    @abc.abstractmethod
    def to_device(self, array: np.ndarray, buffer: Buffer | None = None) -> tuple[Buffer, Event]:
        """Copy a host array to (new or given) device memory."""

    @abc.abstractmethod
    def from_device(self, buffer: Buffer, out: np.ndarray) -> Event:
        """Copy device memory into the host array ``out`` (blocking)."""

    @abc.abstractmethod
    def launch(self, kernel: Kernel, global_size: Sequence[int], local_size: Sequence[int] | None,
               args: Sequence[Any]) -> Event:
        """Enqueue the kernel over ``global_size`` work-items (CUDA: threads) in groups of ``local_size``."""

    def prepare_launch(self, kernel: Kernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                       args: Sequence[Any]) -> Callable[[], Any]:
        """A function that enqueues this launch with its arguments marshalled once and no timing events of its
        own: for timing many launches in a tight loop (by default it calls :meth:`launch` each time)."""
        return lambda: self.launch(kernel, global_size, local_size, args)

    def launch_span(self, kernel: Kernel, global_size: Sequence[int], local_size: Sequence[int] | None,
                    args: Sequence[Any], launches: int) -> float:
        """Device seconds from the start of the first to the end of the last of ``launches`` launches, all
        queued before the device reaches the first: ``launches`` x the device's back-to-back launch time."""
        raise NotImplementedError(f"the {self.kind} backend cannot time launches back to back on the device")

    @property
    def peers(self) -> list["Backend"]:
        """Every device a program opened through this id may use, this one first: itself, or the sub-devices of a
        split device (``opencl:P:D/N``)."""
        return getattr(self, "_peers", None) or [self]

    def launch_hooks(self) -> Sequence[LaunchHook]:
        """Hooks the timing engine runs around each timed launch on this device (none by default)."""
        return ()

    def pinned_empty(self, nbytes: int) -> np.ndarray:
        """Host bytes in pinned (page-locked) or device-mapped memory, where the API offers it."""
        raise NotImplementedError(f"{self.kind} backend has no pinned host memory")

    @abc.abstractmethod
    def finish(self) -> None:
        """Wait until everything enqueued has completed."""

    def close(self) -> None:
        """Release the device context."""

    def bind_thread(self) -> None:
        """Make the device usable from the calling thread (CUDA: its context current there); a no-op where any
        thread may use it."""

    def unbind_thread(self) -> None:
        """Undo :meth:`bind_thread` on the calling thread, when a task on it ends."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_launches(launches: Any) -> int:
    """``launches`` as a positive int, else a UserError (a span of no launches has no time per launch)."""
    if isinstance(launches, bool) or not isinstance(launches, (int, np.integer)) or launches < 1:
        raise UserError(f"launches must be a positive integer, got {launches!r}")
    return int(launches)


def round_up(global_size: Sequence[int], local_size: Sequence[int] | None) -> tuple[int, ...]:
    """Global size rounded up to a whole number of work-groups (kernels guard their index)."""
    if local_size is None:
        return tuple(int(g) for g in global_size)
    return tuple(-(-int(g) // int(l)) * int(l) for g, l in zip(global_size, local_size))
