"""Memory divergence: how each access's address depends on the thread index, and what a warp request costs.

For every memory instruction on the path, the evaluator gives the byte address of every sampled
lane (first pass through loops). Within each sampled block the address is tested for the affine form
``c + sx*tid.x + sy*tid.y + sz*tid.z`` (exactly, on every lane). A global access is then

* ``uniform``     -- the lanes of a warp row read one address (all coefficients, or the lane one, zero);
* ``coalesced``   -- consecutive lanes touch consecutive elements (lane stride = access size);
* ``strided``     -- affine with another lane stride (reported in bytes and elements);
* ``uncoalesced`` -- not affine in the thread index: it depends on loaded data (a gather through an
  index array) or on the index in a non-linear way.

Transactions per warp request are the distinct 32-byte sectors the active lanes touch (exact for
known addresses; for data-dependent ones the worst case, one sector per lane, is assumed); the
coalesced minimum is ``ceil(active lanes * size / 32)``. Shared accesses get their bank-conflict
degree (the most distinct 4-byte words any of the 32 banks must serve).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.models.pipeline.ptx_parser import TYPE_BYTES, Instruction
from gpuprofiler.models.pipeline.values import ThreadSample

SECTOR = 32
LINE = 128
BANKS = 32


@dataclass
class Access:
    """One static memory instruction on the path and how a warp request of it behaves."""

    index: int
    line: int
    opcode: str
    space: str
    kind: str                      # load | store | atomic
    bytes: int                     # per lane
    pattern: str                   # uniform | coalesced | strided | uncoalesced
    transactions: float            # 32-byte sectors per warp request (mean over sampled warps)
    ideal: float                   # sectors of a perfectly coalesced request of the same lanes
    lines: float = 0.0             # distinct 128-byte lines per warp request: the L1's cycles for it
    stride_bytes: int | None = None
    affine: dict[str, int] | None = None
    conflict: float = 1.0          # shared-memory bank-conflict degree
    why: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def uncoalesced(self) -> bool:
        return self.space == "global" and self.pattern in ("strided", "uncoalesced")

    def to_dict(self) -> dict[str, Any]:
        out = {"line": self.line, "opcode": self.opcode, "space": self.space, "kind": self.kind, "bytes": self.bytes,
               "pattern": self.pattern, "transactions": round(self.transactions, 3), "ideal": round(self.ideal, 3)}
        if self.stride_bytes is not None:
            out["stride_bytes"] = self.stride_bytes
            out["stride_elements"] = self.stride_bytes / self.bytes if self.bytes else None
        if self.affine is not None:
            out["affine"] = self.affine
        if self.space == "shared":
            out["bank_conflict"] = round(self.conflict, 3)
        if self.why:
            out["why"] = self.why
        return out


def access_bytes(ins: Instruction) -> int:
    t = ins.type or "b32"
    return TYPE_BYTES.get(t, 4) * ins.vector


def access_kind(ins: Instruction) -> str:
    if ins.base in ("atom", "red"):
        return "atomic"
    return "store" if ins.base == "st" else "load"


def _affine(addr: np.ndarray, sample: ThreadSample) -> dict[str, int] | None:
    """Coefficients of tid.x, tid.y, tid.z if the address is exactly affine in them within every block."""
    bx, by, bz = sample.launch.block
    tpb = sample.launch.threads_per_block
    a = addr.reshape(-1, tpb)
    c0 = a[:, :1]
    cx = (a[:, 1:2] - c0) if bx > 1 else np.zeros_like(c0)
    cy = (a[:, bx:bx + 1] - c0) if by > 1 else np.zeros_like(c0)
    cz = (a[:, bx * by:bx * by + 1] - c0) if bz > 1 else np.zeros_like(c0)
    tx, ty, tz = (t[:tpb] for t in sample.tid)
    model = c0 + cx * tx + cy * ty + cz * tz
    if not np.array_equal(model, a):
        return None
    if not (np.all(cx == cx[0]) and np.all(cy == cy[0]) and np.all(cz == cz[0])):
        return None
    return {"tid.x": int(cx[0, 0]), "tid.y": int(cy[0, 0]), "tid.z": int(cz[0, 0])}


def _sectors(addr: np.ndarray, size: int, mask: np.ndarray, warp: np.ndarray, n_warps: int,
             unit: int = SECTOR) -> tuple[float, float]:
    """Mean distinct sectors (or other ``unit``-byte blocks) per active warp, and the coalesced minimum."""
    w = warp[mask]
    if len(w) == 0:
        return 0.0, 0.0
    a = addr[mask]
    first = a // unit
    last = (a + size - 1) // unit
    keys = np.concatenate([w * (1 << 40) + (first & ((1 << 40) - 1)), w * (1 << 40) + (last & ((1 << 40) - 1))])
    uniq = np.unique(keys)
    per_warp = np.bincount(uniq >> 40, minlength=n_warps)
    lanes = np.bincount(w, minlength=n_warps)
    act = lanes > 0
    ideal = np.ceil(lanes[act] * size / unit)
    return float(per_warp[act].mean()), float(ideal.mean())


def _conflict(addr: np.ndarray, size: int, mask: np.ndarray, warp: np.ndarray, n_warps: int) -> float:
    """Mean over warps of the largest number of distinct words one bank serves."""
    w = warp[mask]
    if len(w) == 0:
        return 1.0
    words = [addr[mask] // 4 + k for k in range(max(1, size // 4))]
    word = np.concatenate(words)
    ww = np.tile(w, len(words))
    bank = word % BANKS
    keys = np.unique((ww.astype(np.int64) * BANKS + bank) << 40 | (word & ((1 << 40) - 1)))  # distinct words
    per_bank = np.bincount(keys >> 40, minlength=n_warps * BANKS).reshape(n_warps, BANKS)
    worst = per_bank.max(axis=1)
    act = np.bincount(w, minlength=n_warps) > 0
    return float(worst[act].mean())


def classify(ins: Instruction, record: dict[str, Any], sample: ThreadSample) -> Access:
    """The :class:`Access` of one memory instruction from its recorded lane addresses."""
    size = access_bytes(ins)
    space = ins.space or "global"          # generic addressing: assumed global
    if space == "const":
        space = "global"
    kind = access_kind(ins)
    mask = np.asarray(record["mask"], dtype=bool)
    addr = record["address"]
    warp, nw = sample.warp, sample.n_warps
    lanes = np.bincount(warp[mask], minlength=nw)
    act = lanes > 0
    worst = float((lanes[act] * (-(-size // SECTOR) if size > SECTOR else 1)).mean()) if act.any() else 0.0
    ideal_sectors = float(np.ceil(lanes[act] * size / SECTOR).mean()) if act.any() else 0.0
    if addr is None:
        acc = Access(ins.index, ins.line, ins.opcode, space, kind, size, "uncoalesced", worst, ideal_sectors,
                     lines=float((lanes[act] * max(1, -(-size // LINE))).mean()) if act.any() else 0.0,
                     why=record.get("why"))
        return acc
    addr = np.asarray(addr, dtype=np.int64)
    aff = _affine(addr, sample)
    tr, ideal = _sectors(addr, size, mask, warp, nw)
    lines, _ = _sectors(addr, size, mask, warp, nw, LINE)
    if space == "local":
        pattern = "coalesced"        # local memory is interleaved per thread by the hardware
        tr = ideal
    elif aff is None:
        pattern = "uncoalesced"
    else:
        bx, by, _ = sample.launch.block
        lane = aff["tid.x"] if bx > 1 else (aff["tid.y"] if by > 1 else aff["tid.z"])
        if lane == 0:
            pattern = "uniform"
        elif abs(lane) == size:
            pattern = "coalesced"
        else:
            pattern = "strided"
    acc = Access(ins.index, ins.line, ins.opcode, space, kind, size, pattern, tr, ideal, lines, affine=aff)
    if pattern == "strided":
        bx, by, _ = sample.launch.block
        acc.stride_bytes = aff["tid.x"] if bx > 1 else (aff["tid.y"] if by > 1 else aff["tid.z"])
    if space == "shared":
        acc.conflict = _conflict(addr, size, mask, warp, nw)
    return acc


def analyse(instructions: list[Instruction], accesses: dict[int, dict[str, Any]], sample: ThreadSample) -> dict[int, Access]:
    """Every recorded memory access of the path, classified, by instruction index."""
    return {i: classify(instructions[i], rec, sample) for i, rec in sorted(accesses.items())}
