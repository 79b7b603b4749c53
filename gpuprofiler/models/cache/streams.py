"""The address stream of a kernel launch as its caches see it, in a modelled execution order.

The max-plus graph builder executes the kernel for one symbolic work-item and evaluates every global access's
index at chosen work-groups (its integer inputs supply gathers and data-dependent loops); for a window those
work-groups are consecutive ones, so their accesses can be laid out in the order the device runs them:

* work-groups are dealt round-robin to the device's compute units (cores, SMs), which run at once;
* inside a work-group, ``lanes`` work-items advance through the code together: one on a CPU core, which runs a
  group's work-items as a loop, each to its end before the next; a warp of 32 on an NVIDIA GPU, which issues each
  access for its 32 threads at once;
* a unit's private caches (L1, a CPU's L2) see its own stream; the shared last level sees the units' streams
  interleaved.

A window of the launch (whole work-groups from a point in the grid, as many as fill a budget of accesses) is
laid out at a time; buffers sit one after another at 4 KiB-aligned addresses. Addresses become line numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.models.maxplus.builder import build_spec
from gpuprofiler.profile.hardware import view

PAGE = 4096
SECTOR = 32  # bytes a GPU's L1 and L2 fill and DRAM transfers at once: a random 4-byte read costs 32, not 128


@dataclass(frozen=True)
class Order:
    """How a device runs a launch, as its caches see it."""

    units: int       # compute units running work-groups at once
    lanes: int       # work-items advancing through the code together (1: a CPU core's loop; 32: a warp)
    line_bytes: int  # the unit a cache fills: a line, or a GPU's sector
    private: tuple[str, ...] = ("L1",)  # cache levels private to a unit; the others are shared
    sectored: bool = False  # lines of four sectors, each filled on its own (NVIDIA, AMD GPUs)

    def describe(self) -> str:
        how = "one work-item at a time" if self.lanes == 1 else f"warps of {self.lanes} in lock-step"
        unit = (f"{self.line_bytes}-byte sectors (a GPU's cache fills the sectors touched, not whole lines)"
                if self.sectored else f"{self.line_bytes}-byte lines")
        return f"work-groups round-robin over {self.units} compute unit(s), {how} inside a group, {unit}"


def device_order(profile) -> Order:
    """The execution order of the profile's device: a GPU's SMs and warps, followed in sectors, a CPU's cores
    running work-items in turn, in lines (L1 and L2 private to a core, as on current x86 and Arm cores)."""
    hw = view(profile)
    cus = int(hw.compute_units.value) if hw.compute_units.ok else 1
    if hw.kind == "gpu":
        return Order(max(cus, 1), int(hw.device_extra("warp_size") or 32), SECTOR, ("L1",), sectored=True)
    return Order(max(cus, 1), 1, 64, ("L1", "L2"))


@dataclass
class Stream:
    """A window of a launch's accesses, in execution order: per unit and merged."""

    lines: list[np.ndarray]    # per unit: line numbers in the order that unit touches them
    arrays: list[np.ndarray]   # per unit: the buffer of each access (index into ``names``)
    writes: list[np.ndarray]   # per unit: whether each access is a store
    names: list[str]
    groups: np.ndarray         # the work-groups laid out
    total_groups: int
    accesses_per_group: float
    unknown: list[str]         # arrays whose addresses depend on data the builder does not have
    footprints: dict[str, int] = field(default_factory=dict)  # lines of each buffer, where its size is known

    def merged(self, with_units: bool = False) -> tuple[np.ndarray, ...]:
        """The units' streams interleaved in proportion (as a shared cache sees them run at once): lines, buffers,
        stores (and with ``with_units`` the unit of each access)."""
        keys = np.concatenate([np.arange(len(x)) / max(len(x), 1) for x in self.lines])
        order = np.argsort(keys, kind="stable")
        parts = [self.lines, self.arrays, self.writes]
        if with_units:
            parts.append([np.full(len(x), u, dtype=np.int32) for u, x in enumerate(self.lines)])
        return tuple(np.concatenate(p)[order] for p in parts)


@dataclass(frozen=True)
class Launch:
    """A launch to analyse: its grid, and how to follow chosen work-groups of it (the graph builder with those
    groups: every global access at their work-items)."""

    build: Callable[..., Any]  # build(groups, items): the kernel followed at those work-groups' first items
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None


def spec_launch(inst, backend: str = "opencl", trips: dict[int, float] | None = None) -> Launch:
    """The launch of a spec instance, from its OpenCL (or CUDA) source (``trips``: loop counts by source line)."""
    return Launch(lambda groups, items=None: build_spec(inst, backend, groups=groups, items=items, trips=trips),
                  tuple(inst.global_size),
                  tuple(inst.local_size) if inst.local_size else None)


def as_launch(what, backend: str = "opencl") -> Launch:
    return what if isinstance(what, Launch) else spec_launch(what, backend)


def grid_groups(launch) -> tuple[int, int, int]:
    """Work-groups of a launch (or spec instance) along each of its three dimensions."""
    local = list(launch.local_size or [min(256, launch.global_size[0])]) + [1, 1, 1]
    glob = list(launch.global_size) + [1, 1, 1]
    return tuple(-(-int(g) // int(lsz)) for g, lsz in zip(glob[:3], local[:3]))


def launch_groups(launch) -> int:
    """Work-groups of a launch (or spec instance)."""
    return int(np.prod(grid_groups(launch)))


def group_items(launch) -> int:
    """Work-items of a work-group of a launch (256 at most where the launch leaves the size to the driver)."""
    return int(np.prod(list(launch.local_size or [min(256, launch.global_size[0])])))


def bases(buffers: dict[str, int]) -> dict[str, int]:
    """Each buffer's base address: one after another, page aligned."""
    out, at = {}, 0
    for name, size in buffers.items():
        out[name] = at
        at += -(-max(int(size), 1) // PAGE) * PAGE
    return out


def window(launch, order: Order, first_group: int, groups_per_unit: int, backend: str = "opencl",
           items: int | None = None) -> Stream:
    """The accesses of ``order.units * groups_per_unit`` consecutive work-groups from ``first_group`` of a launch
    (or spec instance); of each group only its first ``items`` work-items where given (a group too long to follow
    whole: its stream's beginning)."""
    launch = as_launch(launch, backend)
    total = launch_groups(launch)
    count = max(1, min(order.units * groups_per_unit, total - first_group))
    groups = np.arange(first_group, first_group + count, dtype=np.int64)
    return _assemble(launch, launch.build(groups, items), groups, [groups], order, total)[0]


def _assemble(launch: Launch, kernel, followed: np.ndarray, parts: list[np.ndarray], order: Order,
              total: int) -> list[Stream]:
    """One stream per part (some of the ``followed`` work-groups the kernel was built at: a window's run of them, or
    the probe's scattered ones), laid out in ``order``."""
    sample = kernel.sample
    accesses = kernel.accesses
    names = list(kernel.buffers) or sorted({a.array for a in accesses})
    for a in accesses:
        if a.array not in names:
            names.append(a.array)
    base = bases({n: kernel.buffers.get(n, 0) for n in names})
    unknown = sorted({a.array for a in accesses if a.addr is None})
    footprints = {n: -(-int(b) // order.line_bytes) for n, b in kernel.buffers.items() if b and b > 0}
    known = [a for a in accesses if a.addr is not None]
    per_group = sample.size // len(followed)
    items_per_group = group_items(launch)
    if not known:
        empty = [np.zeros(0, np.int64) for _ in range(order.units)]
        return [Stream(empty, list(empty), [np.zeros(0, bool) for _ in range(order.units)], names, part, total,
                       0.0, unknown, footprints) for part in parts]
    n_acc = len(known)
    arr = np.array([names.index(a.array) for a in known], dtype=np.int16 if len(names) < 1 << 15 else np.int64)
    wr = np.array([a.kind == "write" for a in known])
    lanes = order.lanes if per_group % order.lanes == 0 else 1
    position = {int(g): i for i, g in enumerate(followed)}
    shift = order.line_bytes.bit_length() - 1 if order.line_bytes & (order.line_bytes - 1) == 0 else None
    out = []
    for part in parts:
        at = np.array([position[int(g)] for g in part])
        if len(at) and (np.diff(at) == 1).all():
            cols = slice(int(at[0]) * per_group, (int(at[-1]) + 1) * per_group)  # a run of groups: a view
        else:
            cols = (at[:, None] * per_group + np.arange(per_group)[None, :]).ravel()
        # (accesses, groups, chunks of lanes, lanes): a unit's groups are every ``units``-th, and it runs, per
        # group, per chunk of lanes, each access for the chunk's lanes
        shape = (n_acc, len(part), per_group // lanes, lanes)
        line = np.empty(shape, dtype=np.int64)
        active = np.empty(shape, dtype=bool)
        for i, a in enumerate(known):
            byte = np.asarray(a.addr, dtype=np.int64)[cols] * a.elem_bytes + base[a.array]
            line[i] = (byte >> shift if shift is not None else byte // order.line_bytes).reshape(shape[1:])
            active[i] = np.asarray(a.active)[cols].reshape(shape[1:])
        units = min(order.units, len(part))
        per_unit = [[], [], []]
        every = bool(active.all())
        for u in range(units):
            view_u = (slice(None), slice(u, None, units))
            mine = line[view_u]
            laid = [x.transpose(1, 2, 0, 3) for x in (mine, np.broadcast_to(arr[:, None, None, None], mine.shape),
                                                       np.broadcast_to(wr[:, None, None, None], mine.shape))]
            keep = None if every else active[view_u].transpose(1, 2, 0, 3)
            for k, x in enumerate(laid):
                per_unit[k].append(np.ascontiguousarray(x).reshape(-1) if keep is None else x[keep])
        followed_items = max(int(sample.valid.reshape(len(followed), per_group)[at].sum()) / len(part), 1.0)
        out.append(Stream(*per_unit, names, part, total,
                          float(active.sum()) / len(part) * max(items_per_group / followed_items, 1.0), unknown,
                          footprints))
    return out


PROBED_GROUPS = 8    # work-groups spread over the grid whose first work-items the probe follows
PROBED_ITEMS = 256   # a grid of at most this many work-items is followed whole


def probe_per_item(launch, order: Order, backend: str = "opencl") -> float:
    """The mean global accesses of a work-item: over the whole grid where it is small, else over the first work-items
    (a whole warp, 32: the builder follows no fewer) of :data:`PROBED_GROUPS` work-groups spread over it, so that
    neither a stencil's boundary (the first group's first rows) stands for its interior nor a triangle's longest row
    for its mean. As costly as following a window whose work-items run long loops: the builder unrolls them."""
    launch = as_launch(launch, backend)
    total = launch_groups(launch)
    per_group = group_items(launch)
    if total * per_group <= PROBED_ITEMS:
        groups, items = np.arange(total, dtype=np.int64), None
    else:
        k = min(PROBED_GROUPS, total)
        # the middles of k equal shares of each dimension of the grid of groups (a diagonal: the linear numbering's
        # middles of a 128 x 128 grid are all in its first column)
        dims = grid_groups(launch)
        at = [((np.arange(k) + 0.5) * g / k).astype(np.int64) for g in dims]
        groups, items = np.unique(at[0] + dims[0] * (at[1] + dims[1] * at[2])), order.lanes
    one = Order(1, order.lanes, order.line_bytes, order.private)
    probe = _assemble(launch, launch.build(groups, items), groups, [groups], one, total)[0]
    return probe.accesses_per_group / max(per_group, 1)


def windows(launch, order: Order, budget: int = 1 << 22, count: int = 3, backend: str = "opencl",
            per_item: float | None = None) -> list[Stream]:
    """Up to ``count`` windows spread over the launch (its start, middle, ...), each about ``budget`` accesses, all
    followed in one pass of the graph builder. Where one work-group per unit already exceeds the budget (a GPU's
    hundred SMs, a long loop), a window holds as many units as fit: their private levels see the same streams, the
    shared level fewer of them at once; where one group does, a window is a group's first work-items.
    ``per_item``: the global accesses of one work-item, where the caller knows them (else a first pass counts)."""
    launch = as_launch(launch, backend)
    total = launch_groups(launch)
    items_per_group = group_items(launch)
    if per_item is None:
        per_item = probe_per_item(launch, order, backend)
    per_item = max(float(per_item), 1.0)
    per_group = per_item * items_per_group
    items = None
    if per_group > budget:  # one group is more than the budget: its first work-items, one unit
        items = max(order.lanes, int(budget / per_item) // order.lanes * order.lanes)
        units, groups_per_unit = 1, 1
    else:
        units = max(1, min(order.units, int(budget // per_group)))
        groups_per_unit = max(1, int(budget / (per_group * units)))
    order = Order(units, order.lanes, order.line_bytes, order.private)
    span = units * groups_per_unit
    if span >= total:
        starts = np.array([0])
    else:
        starts = np.unique(np.round(np.linspace(0, total - span, count)).astype(np.int64))
        starts = np.unique(starts - starts % units)  # whole rounds of the units
    parts = [np.arange(s, min(s + span, total), dtype=np.int64) for s in starts]
    followed = np.unique(np.concatenate(parts))
    return _assemble(launch, launch.build(followed, items), followed, parts, order, total)
