"""A launch's accesses to its arrays: every global load and store of the kernel's code, with its element index at
every followed work-item, the work-items that may make it and those that certainly do.

The buffer-bounds check (:mod:`gpuprofiler.workloads.bounds`) follows the corner work-groups of the launch
(:func:`~gpuprofiler.kernelcode.sample.corner_groups`), where an index that moves monotonically with the thread
ids takes its extreme values; the code's guards are followed exactly (early returns, both arms of a branch, each
loop to its own end), so an access counts only for the work-items that reach it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from gpuprofiler.kernelcode.interpret import Array, Data, Executor, launch_shape, local_extents, run_kernel
from gpuprofiler.kernelcode.sample import corner_groups, make_sample
from gpuprofiler.kernelcode.source import DTYPE, parse


@dataclass
class Access:
    """One global access of the kernel's code, in program order (``seq``), at every followed work-item: its
    element index (``addr``, in ``elem_bytes`` elements; None where it depends on data the trace does not have),
    whether it runs (``active``) and, in an exact trace, whether it certainly does (``must``); ``span`` elements
    from ``addr`` on (``vload4``: 4)."""

    seq: int
    kind: str          # "read" | "write"
    array: str
    elem_bytes: int
    addr: np.ndarray | None
    active: np.ndarray
    span: int = 1
    must: np.ndarray | None = None
    line: int | None = None


class Tracer(Executor):
    """An exact execution that records every global access and computes only integer values."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.accesses: list[Access] = []

    def _record(self, kind: str, array: Array, index, where, span: int) -> np.ndarray | None:
        addr = self.values_of(index)
        if array.space in ("global", "constant"):
            line = getattr(getattr(where, "coord", None), "line", None)
            self.accesses.append(Access(len(self.accesses), kind, array.name, array.elem_bytes,
                                        None if addr is None else np.asarray(addr, dtype=np.int64),
                                        self.mask & self.sample.valid, span, self.must & self.sample.valid, line))
        return addr

    def checkpoint(self) -> int:
        return len(self.accesses)

    def rollback(self, mark: int) -> None:
        del self.accesses[mark:]

    def arithmetic(self, marks: list[int]) -> bool:
        passes = [self.accesses[a:b] for a, b in zip(marks, marks[1:])]
        if len({len(p) for p in passes}) != 1:
            return False
        for group in zip(*passes):
            first = group[0]
            if any((a.kind, a.array, a.elem_bytes, a.span, a.line) != (first.kind, first.array, first.elem_bytes,
                                                                         first.span, first.line) for a in group):
                return False
            if any(not (np.array_equal(a.active, first.active) and np.array_equal(a.must, first.must))
                   for a in group):
                return False
            if any(a.addr is None for a in group):
                if not all(a.addr is None for a in group):
                    return False
                continue
            steps = [np.asarray(b.addr) - np.asarray(a.addr) for a, b in zip(group, group[1:])]
            if any(not np.array_equal(steps[0], d) for d in steps[1:]):
                return False
        return True

    def load(self, array: Array, index, where, span: int = 1) -> Data:
        addr = self._record("read", array, index, where, span)
        dtype = DTYPE.get(array.elem, "int")
        values = None
        if dtype == "int" and span == 1 and addr is not None and array.name in self.contents:
            values = np.asarray(self.contents[array.name](addr), dtype=np.int64)
        return Data(dtype, values=values)

    def store(self, array: Array, index, value: Data, where, span: int = 1) -> None:
        self._record("write", array, index, where, span)

    def operation(self, op: str, operands: list[Any], where, cop: str | None = None) -> Data:
        datas = [v for v in operands if isinstance(v, Data)]
        dtype = "double" if any(d.dtype == "double" for d in datas) else (
            "float" if any(d.dtype == "float" for d in datas) else "int")
        if op == "cvt":
            dtype = "int"
        values = self.int_values(operands, cop) if dtype == "int" else None
        return Data(dtype, const=all(d.const for d in datas), values=values)


def trace(source: str, kernel_name: str, scalars: dict[str, Any], global_size, local_size,
          filename: str = "kernel", defines: dict[str, Any] | None = None,
          contents: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
          groups: np.ndarray | None = None, max_statements: int = 1 << 14) -> Tracer:
    """Execute ``kernel_name`` exactly at the work-groups ``groups`` (default: the launch's corners) and return the
    tracer with its :attr:`~Tracer.accesses` and notes (a CodeError where the code cannot be followed, TooLarge past
    ``max_statements`` statements). ``global_size`` is what the device runs (whole work-groups where a work-group
    size is given); ``contents`` gives integer arrays' values by element index (gathers, data-dependent loops)."""
    parsed = parse(source, filename, defines)
    glob, sizes, notes = launch_shape(global_size, local_size)
    picks = corner_groups(glob or [1], sizes if local_size else None) if groups is None else groups
    scalars = {k: (v.item() if hasattr(v, "item") else v) for k, v in scalars.items()}
    tracer = Tracer(filename, scalars, sizes, local_extents(parsed, filename), make_sample(glob, sizes, groups=picks),
                    dict(contents or {}), notes=notes, global_size=glob, max_statements=max_statements,
                    widths=parsed.widths, exact=True, local_given=bool(local_size))
    return run_kernel(tracer, parsed, kernel_name)


@dataclass
class Extent:
    """What a launch does to one array, in bytes from its start: the range the work-items that certainly make an
    access reach (``low``, ``high``; None where none certainly does), the range any may reach, and the lines of
    accesses whose index the trace does not know."""

    array: str
    low: int | None = None
    high: int | None = None
    may_low: int | None = None
    may_high: int | None = None
    reads: bool = False
    writes: bool = False
    unknown: list[int | None] = field(default_factory=list)


def extents(accesses: list[Access]) -> dict[str, Extent]:
    """Each array's :class:`Extent` over ``accesses`` (bytes: an element ``k`` of ``e``-byte elements spans
    ``k*e .. (k + span)*e - 1``)."""
    out: dict[str, Extent] = {}
    for a in accesses:
        if not a.active.any():
            continue
        ext = out.setdefault(a.array, Extent(a.array))
        if a.kind == "read":
            ext.reads = True
        else:
            ext.writes = True
        if a.addr is None:
            ext.unknown.append(a.line)
            continue
        addr = np.broadcast_to(a.addr, a.active.shape)
        first, last = addr * a.elem_bytes, (addr + a.span) * a.elem_bytes - 1
        lo, hi = int(first[a.active].min()), int(last[a.active].max())
        ext.may_low = lo if ext.may_low is None else min(ext.may_low, lo)
        ext.may_high = hi if ext.may_high is None else max(ext.may_high, hi)
        must = a.must if a.must is not None else a.active
        if must.any():
            lo, hi = int(first[must].min()), int(last[must].max())
            ext.low = lo if ext.low is None else min(ext.low, lo)
            ext.high = hi if ext.high is None else max(ext.high, hi)
    return out
