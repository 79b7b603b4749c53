"""Buffer bounds before anything is compiled or launched: every array a kernel argument points to must hold the
elements the launch reaches.

A *reach* is what a launch does to one array argument: the lowest and highest element index it reads or writes.
Reaches come, where the kernel's index expressions can be followed, from a *deriver* the caller passes (the
max-plus graph builder evaluates every global access's index at the launch's extreme work-groups:
:func:`gpuprofiler.models.maxplus.bounds.reaches`; this stage cannot import it); an array the deriver does not
follow, or every array where no deriver is given or it cannot read the kernel, is checked against the spec's
declared shapes instead (:func:`declared_reaches`: in a one-dimensional launch, an output array of fewer elements
than work-items but at least half as many -- the shape of an elementwise kernel's output gone one short, or a
launch doubled over its arrays). A mismatch is a :class:`~gpuprofiler.errors.UserError` naming the argument and
both sizes; on a CPU device such a launch corrupts the host process's heap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from gpuprofiler.device.base import round_up
from gpuprofiler.errors import UserError
from gpuprofiler.workloads.spec import KernelSpec, SpecInstance


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


# what a deriver returns: the reaches of the arrays it followed (an array it could not follow is left out), or
# None where it cannot read the kernel at all
Deriver = Callable[[SpecInstance], "Sequence[Reach] | None"]


def elements(inst: SpecInstance, name: str) -> int:
    """Elements of the array argument ``name`` at the instance's size."""
    return int(np.prod(inst.shapes[name], dtype=np.int64)) if inst.shapes[name] else 1


def declared_reaches(inst: SpecInstance, names: Iterable[str] | None = None) -> list[Reach]:
    """What the declared shapes say for a one-dimensional launch: an elementwise kernel writes one element per
    work-item, so an output array of fewer elements than work-items, but at least half as many, is taken to be
    written up to the last work-item (a reduction's output of one element per work-group is left alone). Only the
    arrays ``names`` (default: every output)."""
    spec = inst.spec
    if len(inst.global_size) != 1:
        return []
    items = int(inst.global_size[0])
    wanted = None if names is None else set(names)
    out = []
    for arg in spec.args:
        if arg.is_scalar or not arg.output or (wanted is not None and arg.name not in wanted):
            continue
        count = elements(inst, arg.name)
        if items / 2 <= count < items:
            out.append(Reach(arg.name, 0, items - 1, arg.dtype.itemsize, writes=True,
                             how=f"declared shapes: a one-dimensional launch of {items} work-items, one element each"))
    return out


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
        launched = list(round_up(inst.global_size, inst.local_size))
        glob = f"global {list(inst.global_size)}" + (
            f" run as {launched} (whole work-groups of {list(inst.local_size)})"
            if launched != list(inst.global_size) else "")
        out.append(f"argument `{r.arg}`: the launch {r.verb} {what} but the buffer holds {holds} "
                   f"(at {spec.size}={inst.size}, {glob}, shape {list(inst.shapes[r.arg])}; from the {r.how})")
    return out


ENV = "GPUPROFILER_BOUNDS"


def enabled() -> bool:
    """Whether launches are checked (``GPUPROFILER_BOUNDS`` not ``off``: the way past a check that is wrong)."""
    return os.environ.get(ENV, "on").strip().lower() not in {"0", "off", "no", "false"}


def check_instance(inst: SpecInstance, derive: Deriver | None = None) -> list[Reach]:
    """Refuse (UserError) a launch that reaches past one of its arrays; returns the reaches checked. ``derive``
    follows the kernel's index expressions; arrays it leaves out are checked against the declared shapes. Nothing is
    checked with ``GPUPROFILER_BOUNDS=off``."""
    if not enabled():
        return []
    followed: list[Reach] = []
    if derive is not None:
        got = derive(inst)
        followed = list(got or [])
    seen = {r.arg for r in followed}
    arrays = [a.name for a in inst.spec.args if not a.is_scalar and a.name not in seen]
    empty = [Reach(a.name, 0, 0, a.dtype.itemsize, reads=not a.output, writes=a.output,
                   how="declared shapes: an empty buffer, which no device allocates and no launch can use")
             for a in inst.spec.args if not a.is_scalar and elements(inst, a.name) == 0 and a.name not in seen]
    checked = followed + declared_reaches(inst, arrays) + empty
    problems = violations(inst, checked)
    if problems:
        raise UserError(f"{inst.spec.path}: {'; '.join(problems)}. The launch would run past the buffer: fix the "
                        f"shape or the launch size in the spec (where this check is wrong, {ENV}=off skips it)")
    return checked


def check_sizes(spec: KernelSpec, sizes: Iterable[int], overrides: dict[str, Any] | None = None,
                derive: Deriver | None = None) -> None:
    """:func:`check_instance` at every size, before anything is compiled."""
    for size in sizes:
        check_instance(spec.instantiate(int(size), overrides), derive)
