"""A program's kernel launches without a device: ``run(ctx, n)`` against the dry-run backend.

Static models predict a whole program phase by phase from this list: each launch's kernel source, defines,
grid, block and arguments, the host arrays copied into its buffers included (what data-dependent loops read).
Kernels do not run, so results read back are ones; a program whose launches depend on its results may take
another path than on a device, and the trace says how many launches it saw per phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuprofiler.device.dry import DryBackend, DryKernel
from gpuprofiler.workloads.apps import App, load_app
from gpuprofiler.workloads.wrapper import Recorder, RunContext


@dataclass(frozen=True)
class TracedLaunch:
    """One kernel launch of a program, with the phase it is timed in."""

    phase: str
    kernel: DryKernel
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: tuple[Any, ...]


class _TracingContext(RunContext):
    """A run context that remembers which file each source text came from (PTX is compiled from files)."""

    def source(self, stem: str) -> str:
        path = self.base_dir / f"{stem}{self.backend.source_suffix}"
        text = path.read_text()
        self.backend.sources[text] = path
        return text


def trace_operations(app: App, size: int, kind: str = "opencl") -> list[dict]:
    """Every operation ``app`` makes at ``size`` (launches and copies, with their buffers and bytes), as timeline
    rows without times: the program's graph at a size not run."""
    backend = DryBackend(kind)
    recorder = Recorder()
    app.call("run", app.run_fn, _TracingContext(backend, recorder, app.path.parent), int(size))
    return recorder.timeline()


def trace_app(app: App, size: int, kind: str = "opencl") -> list[TracedLaunch]:
    """The launches ``app`` makes at ``size``, in order (its own errors are UserErrors naming its file)."""
    return list(_trace(str(app.path), int(size), kind))


@lru_cache(maxsize=4)
def _trace(path: str, size: int, kind: str) -> tuple[TracedLaunch, ...]:
    app = load_app(Path(path))
    backend = DryBackend(kind)
    recorder = Recorder()
    ctx = _TracingContext(backend, recorder, app.path.parent)
    app.call("run", app.run_fn, ctx, size)
    kernels = [op for op in recorder.operations if op.kind == "kernel"]
    return tuple(TracedLaunch(op.phase, launch.kernel, launch.global_size, launch.local_size, launch.args)
                 for op, launch in zip(kernels, backend.launches))
