"""Sweeps: a kernel spec or an app measured at several sizes, as per-phase, per-run device times.

For a spec the one phase is its kernel; for an app the phases come from the run wrapper
(kernels, copies, named regions). Runs are aligned: ``phases[p][i][r]`` and
``totals[i][r]`` belong to the same run r at size ``sizes[i]``.
"""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gpuprofiler.errors import GpuProfilerError, UserError
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.stats import Summary, model_value, summarize
from gpuprofiler.workloads import isolated
from gpuprofiler.workloads.apps import App, load_app
from gpuprofiler.workloads.builtin import located
from gpuprofiler.workloads.spec import KernelSpec, load_spec


@dataclass
class Sweep:
    name: str
    kind: str  # "kernel" | "app"
    sizes: list[int]
    phases: dict[str, list[np.ndarray]]
    totals: list[np.ndarray]
    records: list[dict] = field(default_factory=list)
    # per phase and size, the work the run wrapper counted (bytes copied, work-items launched); None: unknown
    work: dict[str, list[float | None]] = field(default_factory=dict)

    def figures(self) -> np.ndarray:
        """The modelling figure of the whole-run device time, per size."""
        return np.array([model_value(t) for t in self.totals])

    def shares(self) -> dict[str, np.ndarray]:
        """Each phase's median share of the run's device time, per size."""
        out = {}
        for name, per_size in self.phases.items():
            out[name] = np.array([float(np.median(p / np.maximum(t, 1e-300))) for p, t in zip(per_size, self.totals)])
        return out

    def total_summary(self, index: int = 0) -> Summary:
        """The whole-run device time's figures at the ``index``-th size (the only one, for a measured target):
        the modelling figure and the median, with their intervals."""
        return summarize(self.totals[index])

    def subset(self, keep: list[int]) -> "Sweep":
        return Sweep(self.name, self.kind, [self.sizes[i] for i in keep],
                     {p: [v[i] for i in keep] for p, v in self.phases.items()}, [self.totals[i] for i in keep],
                     [r for r in self.records if r["size"] in {self.sizes[i] for i in keep}],
                     {p: [v[i] for i in keep] for p, v in self.work.items()})


def from_records(records: list[dict]) -> Sweep:
    """A Sweep from measurement records (``measure`` output or stored JSON lines) of one spec or app."""
    if not records:
        raise ValueError("no records")
    sizes = sorted({int(r["size"]) for r in records})
    names = sorted({r["phase"] for r in records})
    kind = records[0].get("kind", "kernel")
    phases: dict[str, list[np.ndarray]] = {n: [] for n in names}
    totals = []
    work: dict[str, list[float | None]] = {n: [] for n in names}
    for size in sizes:
        at = {r["phase"]: np.asarray(r["samples_s"], float) for r in records if int(r["size"]) == size}
        counted = {r["phase"]: r.get("work") for r in records if int(r["size"]) == size}
        for n in names:
            work[n].append(counted.get(n))
        runs = max(len(v) for v in at.values())
        for n in names:
            v = at.get(n, np.zeros(runs))
            phases[n].append(v if len(v) == runs else np.resize(v, runs))
        totals.append(np.sum([phases[n][-1] for n in names], axis=0))
    return Sweep(records[0]["kernel"], kind, sizes, phases, totals, list(records), work)


def item_digest(path: Path, item: Any) -> str:
    """A digest of the item's file and its kernel sources: a changed kernel is measured again."""
    h = hashlib.sha256(path.read_bytes())
    sources = getattr(item, "sources", None) or {}
    for key in sorted(sources):
        src = Path(sources[key])
        if src.is_file():
            h.update(src.read_bytes())
    for src in sorted(path.parent.glob(path.stem + ".c[lu]")) if path.suffix == ".py" else []:
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


def load_target(path: Path) -> KernelSpec | App:
    return load_app(path) if path.suffix == ".py" else load_spec(path)


def run_sweep(backend: Any, item: KernelSpec | App, sizes: list[int], policy: TimingPolicy | None = None,
              check: bool = True, on_record: Callable[[dict], None] | None = None,
              progress: Callable[[str], None] | None = None, bounds: bool = True,
              isolate: bool | None = False, on_size: Callable[[int, list[dict]], None] | None = None) -> Sweep:
    """The item measured at ``sizes`` (records to ``on_record`` as they finish, each size's to ``on_size``): in this
    process, or with ``isolate`` (None: unless ``GPUPROFILER_ISOLATION=off``) in the device's worker process
    (:mod:`gpuprofiler.workloads.isolated`); a spec's buffers checked first (unless ``bounds`` is False)."""
    records = isolated.measure(backend, item, sizes, policy, check, on_record, progress=progress, bounds=bounds,
                               on_size=on_size, isolate=isolate)
    return from_records(records)


def working_set(item: KernelSpec | App, size: int) -> float | None:
    """Bytes the run touches at ``size``: the spec's arrays (or its work.bytes), or the app's ``working_set(n)``."""
    if isinstance(item, App):
        fn = getattr(item.module, "working_set", None)
        return float(fn(size)) if callable(fn) else None
    return float(item.instantiate(item.valid_size(size)).array_bytes)


def work_items(item: KernelSpec | App, size: int) -> float | None:
    """Work-items launched at ``size`` (specs only)."""
    if isinstance(item, App):
        fn = getattr(item.module, "work_items", None)
        return float(fn(size)) if callable(fn) else None
    return float(np.prod(item.instantiate(item.valid_size(size)).global_size))


def work_count(item: KernelSpec | App):
    """The spec's declared work as a function of size (bytes moved, else flops), or None."""
    if isinstance(item, App):
        fn = getattr(item.module, "work", None)
        return fn if callable(fn) else None
    if item.bytes is None and item.flops is None:
        return None
    key = "bytes" if item.bytes is not None else "flops"

    def work(n: float) -> float:
        value = getattr(item.instantiate(item.valid_size(n)), key)
        return float(value)

    return work


def sweep_task(ctx, ref: tuple[str, str], digest: str, sizes: list[int], policy: TimingPolicy | None,
               bounds: bool = True, check: bool = True) -> dict[int, list[dict]]:
    """A runner's task: the item (found by ``ref``, checked to be the one of ``digest``) measured at ``sizes`` on
    the task's device, timed together in alternation (its buffers checked first, unless ``bounds`` is False: a later
    visit); each size's records,
    also emitted (``ctx.emit``) as each size finishes. On an error, the sizes finished before it ride on the error
    (``measured``: :func:`~gpuprofiler.measure.runners.base.measured_before`), so that the client keeps them."""
    path = located(ref)
    item = load_target(path)
    if item_digest(path, item) != digest:
        raise UserError(f"{path}: this machine's copy differs from the one the client measures (another version "
                        f"of the kernel or of gpuprofiler?)")
    by_size: dict[int, list[dict]] = {}

    def size_done(size: int, records: list[dict]) -> None:
        by_size[int(size)] = list(records)
        ctx.emit((int(size), list(records)))

    try:
        run_sweep(ctx.backend(), item, sizes, policy, check=check, bounds=bounds, isolate=ctx.isolate,
                  on_size=size_done)
    except GpuProfilerError as exc:
        exc.measured = {"by_size": dict(by_size), "host": platform.node(), "resource": ctx.resource}
        raise
    return by_size
