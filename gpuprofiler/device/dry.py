"""A backend that runs nothing: it records what a program would launch, for static models of whole programs.

Buffers keep the host arrays copied into them (the inputs a kernel would read: a sparse matrix's row pointers),
and each launch keeps its buffers' contents as they were when it was launched;
kernels do not run, so a buffer no copy filled reads back as ones (a program that divides by a reduction's
result keeps going). Every event takes no time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gpuprofiler.device.base import Backend, Buffer, DeviceInfo, Event, Kernel

SUFFIX = {"opencl": ".cl", "cuda": ".cu"}


class DryEvent(Event):
    def seconds(self) -> float:
        return 0.0


@dataclass
class DryKernel(Kernel):
    name: str
    source: str
    defines: dict[str, Any]
    path: Path | None = None


@dataclass(eq=False)
class DryBuffer(Buffer):
    nbytes: int
    data: np.ndarray | None = None  # the host array last copied in (None: never written by a copy)


@dataclass
class DryLaunch:
    """One launch the program made: the kernel, its grid and block, and its arguments (scalars and buffers)."""

    kernel: DryKernel
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple[Any, ...]


@dataclass
class DryBackend(Backend):
    """Records launches; ``kind`` decides which source a program reads (``.cl`` or ``.cu``)."""

    kind: str = "opencl"
    sources: dict[str, Path] = field(default_factory=dict)   # source text -> the file it was read from
    launches: list[DryLaunch] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.source_suffix = SUFFIX[self.kind]
        self.info = DeviceInfo(id=f"dry:{self.kind}", backend=self.kind, name="dry run (nothing executes)",
                               vendor="", type="other", compute_units=0, clock_mhz=0, global_mem_bytes=0,
                               local_mem_bytes=0, max_work_group_size=1024, driver="", platform="dry run")

    def compile(self, source: str, kernel_name: str, defines: dict[str, Any] | None = None,
                options: Sequence[str] = ()) -> DryKernel:
        return DryKernel(kernel_name, source, dict(defines or {}), self.sources.get(source))

    def alloc(self, nbytes: int) -> DryBuffer:
        return DryBuffer(int(nbytes))

    def to_device(self, array: np.ndarray, buffer: Buffer | None = None) -> tuple[Buffer, Event]:
        buf = buffer if isinstance(buffer, DryBuffer) else DryBuffer(int(array.nbytes))
        # integer data (what models read: row pointers, indices) is copied, so later host edits do not reach it
        buf.data = np.array(array, copy=True) if array.dtype.kind in "iub" else array
        return buf, DryEvent()

    def from_device(self, buffer: Buffer, out: np.ndarray) -> Event:
        data = getattr(buffer, "data", None)
        if data is not None and data.nbytes == out.nbytes:
            out[...] = data.reshape(out.shape).view(out.dtype) if data.dtype != out.dtype else data.reshape(out.shape)
        else:
            out[...] = 1
        return DryEvent()

    def launch(self, kernel: Kernel, global_size: Sequence[int], local_size: Sequence[int] | None,
               args: Sequence[Any]) -> Event:
        # each buffer as it is now: a later copy into it replaces its array, not this launch's
        snapshot = tuple(DryBuffer(a.nbytes, a.data) if isinstance(a, DryBuffer) else a for a in args)
        self.launches.append(DryLaunch(kernel, tuple(int(g) for g in global_size),
                                       None if local_size is None else tuple(int(x) for x in local_size),
                                       snapshot))
        return DryEvent()

    def finish(self) -> None:
        pass
