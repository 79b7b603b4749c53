"""The loop profiler: a kernel spec's loops counted on the real device (entries, iterations, and on CUDA their
share of the work-items' cycles), its instrumented kernel checked against the spec's reference like the plain one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuprofiler.device.base import Backend
from gpuprofiler.errors import UserError
from gpuprofiler.workloads.instrument import SLOTS, Loop, instrument
from gpuprofiler.workloads.kernel import prepare, run_checked
from gpuprofiler.workloads.spec import KernelSpec


@dataclass
class LoopCount:
    """One loop's totals over every work-item of a launch."""

    loop: Loop
    entries: int
    iterations: int
    cycles: int | None       # CUDA only: clock64 cycles inside the loop, summed over the work-items

    @property
    def per_entry(self) -> float:
        return self.iterations / self.entries if self.entries else 0.0


@dataclass
class LoopProfile:
    kernel: str
    size: int
    api: str
    loops: list[LoopCount]
    cycles: int | None       # CUDA: the work-items' cycles in all
    work_items: int
    checked: bool

    def share(self, count: LoopCount) -> float | None:
        """The loop's share of the work-items' cycles (CUDA), None elsewhere."""
        if count.cycles is None or not self.cycles:
            return None
        return count.cycles / self.cycles

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "size": self.size, "api": self.api, "work_items": self.work_items,
                "checked": self.checked, "cycles": self.cycles,
                "loops": [{"index": c.loop.index, "kind": c.loop.kind, "line": c.loop.line, "source": c.loop.header,
                           "depth": c.loop.depth, "entries": c.entries, "iterations": c.iterations,
                           "iterations_per_entry": c.per_entry, "cycles": c.cycles, "share": self.share(c)}
                          for c in self.loops]}


def profile_loops(backend: Backend, spec: KernelSpec, size: int, check: bool = True, seed: int = 0) -> LoopProfile:
    """Instrument the spec's kernel, run it once at ``size`` (its outputs checked against the reference unless
    ``check`` is off) and read the loop counters."""
    path = spec.source_for(backend.kind)
    inst = instrument(path.read_text(), spec.kernel, backend.kind, str(path))
    if not inst.loops:
        raise UserError(f"{path}: the kernel {spec.kernel!r} has no loop to count")
    if backend.kind == "opencl" and "cl_khr_int64_base_atomics" not in _extensions(backend):
        raise UserError(f"{backend.info.name} has no 64-bit atomics (cl_khr_int64_base_atomics): the loop counters "
                        "cannot be gathered")
    prepared = prepare(backend, spec, size, seed, source_text=inst.source)
    counters = np.zeros(inst.slots, dtype=np.uint64)
    buf, _ = backend.to_device(counters)
    prepared.extra = [buf]
    if check:
        run_checked(backend, prepared)  # one launch, outputs compared with the reference
    else:
        backend.launch(prepared.kernel, prepared.instance.global_size, prepared.instance.local_size, prepared.args())
        backend.finish()
    backend.from_device(buf, counters)
    backend.finish()
    cuda = backend.kind == "cuda"
    counts = [LoopCount(lp, int(counters[SLOTS * lp.index]), int(counters[SLOTS * lp.index + 1]),
                        int(counters[SLOTS * lp.index + 2]) if cuda else None) for lp in inst.loops]
    return LoopProfile(spec.name, int(size), backend.kind, counts, int(counters[-1]) if cuda else None,
                       int(np.prod(prepared.instance.global_size)), check)


def _extensions(backend: Backend) -> str:
    device = getattr(backend, "device", None)
    return getattr(device, "extensions", "") or ""
