"""The elements a launch reaches in each array, from the max-plus graph builder's index expressions.

The builder executes the kernel for every work-item of chosen work-groups and records each global access's element
index there (:attr:`~gpuprofiler.models.maxplus.graph.Kernel.accesses`); here those work-groups are the launch's
extreme ones -- the corners of its grid of work-groups (the first and the last in one dimension), whole, so their
first and last work-items too -- where an index that moves monotonically with the thread ids takes its smallest and
largest values. A gather's index comes from the spec's integer inputs (their declared initial values), so
``x[cols[p]]`` is checked against ``x``. An array with an access the builder cannot place (an index read from
floating-point data, a pointer it cannot follow) is left out, for the declared shapes to check
(:func:`gpuprofiler.workloads.bounds.check_instance`); a kernel it cannot read at all gives None.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from gpuprofiler.device.base import round_up
from gpuprofiler.models.maxplus.builder import build_spec
from gpuprofiler.workloads.bounds import Reach
from gpuprofiler.workloads.spec import SpecInstance


def corner_groups(global_size, local_size) -> np.ndarray:
    """The linear numbers (dimension 0 fastest) of the work-groups at the corners of the launch's grid, with the
    builder's default work-group (256 work-items along dimension 0) where the launch gives none."""
    glob = [max(1, int(g)) for g in (list(global_size) + [1, 1, 1])[:3]]
    local = [max(1, int(x)) for x in (list(local_size or [min(256, glob[0])]) + [1, 1, 1])[:3]]
    dims = [-(-g // lsz) for g, lsz in zip(glob, local)]
    corners = {int(np.ravel_multi_index(c, dims, order="F"))
               for c in itertools.product(*[sorted({0, d - 1}) for d in dims])}
    return np.array(sorted(corners), dtype=np.int64)


# statements the builder may execute for one check (loops unrolled): a few tenths of a second of Python at most; a
# kernel whose loops run longer at this size (covariance, nbody at its target) is checked against its declared
# shapes instead
MAX_STATEMENTS = 1 << 14


def reaches(inst: SpecInstance, backend: str = "opencl", max_statements: int = MAX_STATEMENTS) -> list[Reach] | None:
    """Per array argument the builder follows at every access, the lowest and highest element index the launch
    reaches; None where it cannot read the kernel (or would execute more than ``max_statements`` statements).
    The launch is what the device runs: the global size rounded up to whole work-groups (a CUDA grid of whole
    blocks, an OpenCL range padded to its work-group size), whose extra work-items run the kernel too."""
    if inst.local_size:
        inst = dataclasses.replace(inst, global_size=list(round_up(inst.global_size, inst.local_size)))
    try:
        kernel = build_spec(inst, backend, groups=corner_groups(inst.global_size, inst.local_size),
                            max_statements=max_statements, exact=True)
    except Exception:  # noqa: BLE001 - a kernel the builder cannot follow: the declared shapes
        return None
    arrays = {a.name for a in inst.spec.args if not a.is_scalar}
    unknown = {a.array for a in kernel.accesses if a.addr is None}
    found: dict[str, dict] = {}
    for a in kernel.accesses:
        if a.array not in arrays or a.array in unknown:
            continue
        active = np.asarray(a.active, dtype=bool)
        addr = np.asarray(a.addr)
        if addr.shape != active.shape:
            addr = np.broadcast_to(addr, active.shape)
        if not active.any():
            continue
        idx = addr[active]
        lo, hi = int(idx.min()), int(idx.max())
        got = found.setdefault(a.array, {"low": lo, "high": hi, "elem": a.elem_bytes, "reads": False,
                                         "writes": False})
        if a.elem_bytes != got["elem"]:  # accessed with elements of several widths: compare in bytes of the widest
            width = max(a.elem_bytes, got["elem"])
            got["low"] = min(got["low"] * got["elem"], lo * a.elem_bytes) // width
            got["high"] = -(-(max((got["high"] + 1) * got["elem"], (hi + 1) * a.elem_bytes)) // width) - 1
            got["elem"] = width
        else:
            got["low"], got["high"] = min(got["low"], lo), max(got["high"], hi)
        got["reads" if a.kind == "read" else "writes"] = True
    how = "kernel's index expressions at the launch's first and last work-groups"
    return [Reach(name, f["low"], f["high"], f["elem"], f["reads"], f["writes"], how) for name, f in found.items()]
