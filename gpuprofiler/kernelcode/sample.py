"""The work-items a kernel's code is followed at: whole work-groups, each padded to whole warps.

A *sample* is either as many work-groups as fit a budget of work-items, evenly spaced over the grid (what the
models price), or chosen work-groups (the corners of the grid, where an index that moves monotonically with the
thread ids takes its extreme values: the buffer-bounds check).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

WARP = 32  # lanes a sample's work-groups are padded to
SAMPLE_ITEMS = 1024  # work-items followed numerically by default


@dataclass
class Sample:
    """Whole work-groups, each padded to whole warps: each lane's thread ids, work-group, and validity."""

    ids: dict[str, np.ndarray]
    group: np.ndarray
    valid: np.ndarray          # a real work-item inside the global size (not warp padding, not past the grid)
    warps: int                 # warps in the sample (lanes = 32 * warps)

    @property
    def size(self) -> int:
        return len(self.group)


def make_sample(global_size: list[int] | None, local_size: list[int], limit: int = SAMPLE_ITEMS,
                groups: np.ndarray | None = None, items: int | None = None) -> Sample:
    """As many whole work-groups as fit ``limit`` work-items (at least one), evenly spaced over the grid; or the
    work-groups numbered ``groups`` (linear, dimension 0 fastest), whatever their count, and of each only its first
    ``items`` work-items (whole warps) where given."""
    local = [max(1, int(x)) for x in (list(local_size) + [1, 1, 1])[:3]]
    glob = [max(1, int(x)) for x in (list(global_size or local) + [1, 1, 1])[:3]]
    per_group = int(np.prod(local))
    padded = -(-per_group // WARP) * WARP
    dims = [-(-g // lsz) for g, lsz in zip(glob, local)]
    total = int(np.prod(dims))
    if groups is not None:
        picks = np.asarray(groups, dtype=np.int64)
        picks = picks[(picks >= 0) & (picks < total)]
        if not len(picks):
            raise ValueError(f"no work-group among {groups!r}: the launch has {total}")
    else:
        count = max(1, min(total, limit // padded))
        picks = np.unique(np.round(np.linspace(0, total - 1, count)).astype(np.int64))
    bx, by, bz = (np.asarray(v, dtype=np.int64) for v in np.unravel_index(picks, dims, order="F"))
    lin = np.arange(padded if items is None else min(padded, -(-max(int(items), 1) // WARP) * WARP), dtype=np.int64)
    lx, ly, lz = lin % local[0], (lin // local[0]) % local[1], lin // (local[0] * local[1])
    g = len(picks)
    ids = {"lx": np.tile(lx, g), "ly": np.tile(ly, g), "lz": np.tile(lz, g),
           "bx": np.repeat(bx, len(lin)), "by": np.repeat(by, len(lin)), "bz": np.repeat(bz, len(lin))}
    valid = np.tile(lin < per_group, g)
    for d, name in enumerate("xyz"):
        valid &= ids["b" + name] * local[d] + ids["l" + name] < glob[d]
    return Sample(ids, np.repeat(np.arange(g, dtype=np.int64), len(lin)), valid, g * len(lin) // WARP)


def corner_groups(global_size, local_size, depth: int = 2) -> np.ndarray:
    """The linear numbers (dimension 0 fastest) of the work-groups at the corners of the launch's grid: the first
    and last ``depth`` along each dimension (a guard that cuts less than a work-group off a dimension's end leaves
    its last active work-item in one of the last two), with a default work-group of 256 work-items along dimension
    0 where the launch gives none."""
    glob = [max(1, int(g)) for g in (list(global_size) + [1, 1, 1])[:3]]
    local = [max(1, int(x)) for x in (list(local_size or [min(256, glob[0])]) + [1, 1, 1])[:3]]
    dims = [-(-g // lsz) for g, lsz in zip(glob, local)]
    ends = [sorted({k for k in list(range(depth)) + list(range(d - depth, d)) if 0 <= k < d}) for d in dims]
    corners = {int(np.ravel_multi_index(c, dims, order="F")) for c in itertools.product(*ends)}
    return np.array(sorted(corners), dtype=np.int64)
