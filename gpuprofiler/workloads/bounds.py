"""Buffer bounds before anything is compiled or launched: every array a kernel argument points to must hold the
elements the launch reaches.

A *reach* is what a launch does to one array argument: the lowest and highest element it reads or writes. The
kernel's code is followed exactly at the launch's corner work-groups (:mod:`gpuprofiler.kernelcode.trace`: early
returns, both arms of a branch, ternaries, clamps, loop bounds, grid-stride loops, the padding work-items of a
launch rounded up to whole work-groups), so an access counts only for the work-items that reach it.

A launch is refused (:class:`~gpuprofiler.errors.UserError`, naming the argument, the element and both sizes) only
where the check proves it: a work-item that certainly makes an access reaches past its array. Where it cannot
decide (an index read from data the spec does not give, a guard on such data, code the trace cannot follow), it
says so in one line and the launch goes ahead, in the isolated worker that contains a crash. On a CPU device an
access past a buffer corrupts the host process's heap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from gpuprofiler.device.base import round_up
from gpuprofiler.errors import UserError
from gpuprofiler.kernelcode.source import CodeError
from gpuprofiler.kernelcode.trace import Extent, extents, trace
from gpuprofiler.textfile import read_text
from gpuprofiler.workloads.spec import MAX_SOURCE_BYTES, KernelSpec, SpecInstance

# statements the trace may execute for one check (loops unrolled): a few tenths of a second of Python at most; a
# kernel whose loops run longer at this size is not decided (its launches run in the isolated worker)
MAX_STATEMENTS = 1 << 14


@dataclass(frozen=True)
class Reach:
    """The elements a launch reaches in one array argument: indices ``low`` .. ``high`` of ``elem_bytes``-byte
    elements, read (``reads``), written (``writes``) or both, as found ``how``."""

    arg: str
    low: int
    high: int
    elem_bytes: int
    reads: bool = False
    writes: bool = False
    how: str = "index expressions"

    @property
    def verb(self) -> str:
        return "reads and writes" if self.reads and self.writes else "writes" if self.writes else "reads"


@dataclass
class Bounds:
    """A launch's reaches that the check proves (``reaches``), and one line per array or reason it could not decide
    (``undecided``)."""

    reaches: list[Reach] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)


def elements(inst: SpecInstance, name: str) -> int:
    """Elements of the array argument ``name`` at the instance's size."""
    return int(np.prod(inst.shapes[name], dtype=np.int64)) if inst.shapes[name] else 1


def launched(inst: SpecInstance) -> list[int]:
    """The global size the device runs: rounded up to whole work-groups where the launch names their size (a CUDA
    grid of whole blocks, an OpenCL range padded to its work-group size), whose extra work-items run the kernel too."""
    if inst.local_size:
        return list(round_up(inst.global_size, inst.local_size))
    return list(inst.global_size)


def source_text(spec: KernelSpec, backend: str = "opencl") -> tuple[Path, str] | None:
    """The spec's kernel source for ``backend`` (else its other one), as text; None without one."""
    kinds = [backend] + [k for k in ("opencl", "cuda") if k != backend]
    path = next((spec.sources[k] for k in kinds if k in spec.sources), None)
    if path is None:
        return None
    return Path(path), read_text(path, f"{spec.path}: kernel source", MAX_SOURCE_BYTES)


def code_reaches(inst: SpecInstance, backend: str = "opencl", max_statements: int = MAX_STATEMENTS) -> Bounds:
    """What the kernel's code shows at the launch's corner work-groups: the proven reach of every array argument it
    accesses (the work-items that certainly make each access) and what it cannot decide."""
    spec = inst.spec
    out = Bounds()
    try:
        found = source_text(spec, backend)
        if found is None:
            out.undecided.append("the spec has no kernel source to follow")
            return out
        path, text = found
        arrays = [a for a in spec.args if not a.is_scalar]
        contents = {a.name: inst.elements(a.name) for a in arrays if a.dtype.kind in "iu"}
        tracer = trace(text, spec.kernel, inst.scalars, launched(inst), inst.local_size, str(path), inst.defines,
                       contents, max_statements=max_statements)
    except (CodeError, ValueError, TypeError, ArithmeticError, RecursionError, KeyError, IndexError) as exc:
        out.undecided.append(f"the kernel's code could not be followed ({_short(exc)})")
        return out
    isz = {a.name: a.dtype.itemsize for a in spec.args if not a.is_scalar}
    for name, ext in extents(tracer.accesses).items():
        if name not in isz:
            continue
        size = isz[name]
        if ext.unknown:
            lines = ", ".join(f"line {x}" for x in sorted({x for x in ext.unknown if x is not None})) or "an access"
            out.undecided.append(f"`{name}`: an index read from data the spec does not give ({lines})")
        if ext.low is not None:
            out.reaches.append(Reach(name, ext.low // size, ext.high // size, size, ext.reads, ext.writes,
                                     "kernel's code followed at the launch's first and last work-groups"))
        nbytes = elements(inst, name) * size
        if ext.may_low is not None and not (0 <= ext.may_low and ext.may_high < nbytes) and (
                ext.low is None or (0 <= ext.low and ext.high < nbytes)):
            out.undecided.append(f"`{name}`: work-items that may reach element {_element(ext, size, nbytes)} "
                                 f"(the buffer holds {elements(inst, name)}) run under conditions on data the "
                                 "check does not have")
    return out


def _element(ext: Extent, size: int, nbytes: int) -> int:
    return ext.may_high // size if ext.may_high >= nbytes else ext.may_low // size


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def violations(inst: SpecInstance, reaches: Iterable[Reach]) -> list[str]:
    """A message for every reach that leaves its array (empty: all inside)."""
    spec = inst.spec
    args = {a.name: a for a in spec.args if not a.is_scalar}
    out = []
    for r in reaches:
        arg = args.get(r.arg)
        if arg is None:
            continue
        count = elements(inst, r.arg)
        nbytes = count * arg.dtype.itemsize
        first, last = r.low * r.elem_bytes, (r.high + 1) * r.elem_bytes  # the bytes reached: [first, last)
        if first >= 0 and last <= nbytes:
            continue
        what = f"element {r.high}" if last > nbytes else f"element {r.low} (before the buffer's start)"
        if r.elem_bytes != arg.dtype.itemsize:
            what += f" of {r.elem_bytes}-byte elements"
        holds = f"{count} {arg.dtype.name}"
        glob = f"global {list(inst.global_size)}" + (
            f" run as {launched(inst)} (whole work-groups of {list(inst.local_size)})"
            if launched(inst) != list(inst.global_size) else "")
        out.append(f"argument `{r.arg}`: the launch {r.verb} {what} but the buffer holds {holds} "
                   f"(at {spec.size}={inst.size}, {glob}, shape {list(inst.shapes[r.arg])}; from the {r.how})")
    return out


ENV = "GPUPROFILER_BOUNDS"


def enabled() -> bool:
    """Whether launches are checked (``GPUPROFILER_BOUNDS`` not ``off``: the way past a check that is wrong)."""
    return os.environ.get(ENV, "on").strip().lower() not in {"0", "off", "no", "false"}


def check_instance(inst: SpecInstance, say: Callable[[str], None] | None = None) -> Bounds:
    """Refuse (UserError) a launch that is proven to reach past one of its arrays, or that has an empty buffer (no
    device allocates one); returns what was checked, and tells ``say`` in one line what it could not decide.
    Nothing is checked with ``GPUPROFILER_BOUNDS=off``."""
    if not enabled():
        return Bounds()
    empty = [Reach(a.name, 0, 0, a.dtype.itemsize, reads=not a.output, writes=a.output,
                   how="declared shapes: an empty buffer, which no device allocates and no launch can use")
             for a in inst.spec.args if not a.is_scalar and elements(inst, a.name) == 0]
    problems = violations(inst, empty)
    got = code_reaches(inst) if not problems else Bounds()
    problems += violations(inst, got.reaches)
    if problems:
        raise UserError(f"{inst.spec.path}: {'; '.join(problems)}. The launch would run past the buffer: fix the "
                        f"shape or the launch size in the spec (where this check is wrong, {ENV}=off skips it)")
    if got.undecided and say is not None:
        say(f"{inst.spec.name}: bounds at {inst.spec.size}={inst.size} not decided: {'; '.join(got.undecided)}; "
            "the launch runs in the isolated worker, which contains a crash")
    return got


def check_sizes(spec: KernelSpec, sizes: Iterable[int], overrides: dict[str, Any] | None = None,
                say: Callable[[str], None] | None = None) -> None:
    """:func:`check_instance` at every size, before anything is compiled; what it cannot decide is said once."""
    said: set[str] = set()

    def once(line: str) -> None:
        key = line.split(": ", 2)[-1]
        if key not in said and say is not None:
            said.add(key)
            say(line)

    for size in sizes:
        check_instance(spec.instantiate(int(size), overrides), say=once)

