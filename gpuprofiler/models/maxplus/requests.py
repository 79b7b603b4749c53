"""What each access asks of the memory system, from whole work-groups followed numerically (the *sample*).

The builder executes one symbolic work-item; beside it, it evaluates every index at the sampled work-items:
whole work-groups spread evenly over the grid, padded to whole warps. After the kernel is built, all accesses
are counted at once (vectorised over accesses x warps x lanes):

* a global access: the distinct 128-byte lines and 32-byte sectors each warp's request touches (mean over the
  warps that execute it) and the share of the launch's warps that execute it;
* per global array read: its distinct sectors per work-group over the sum of its requests' sectors, the share
  of requested sectors the work-group's L1 does not already hold (neighbouring rows, the copies of an
  unrolled loop, a lane walking its row);
* a local-memory access: the passes each warp's request needs, the most distinct 4-byte words in one of the
  32 banks.
"""

from __future__ import annotations

import numpy as np

from gpuprofiler.kernelcode.sample import WARP, Sample

SECTOR, LINE, BANKS = 32, 128, 32


def _distinct_per_warp(keys: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Distinct active keys in each warp: ``keys`` and ``active`` are (accesses, lanes); returns (accesses, warps)."""
    a, lanes = keys.shape
    k = np.where(active, keys, -1).reshape(a, lanes // WARP, WARP)
    k = np.sort(k, axis=2)
    distinct = (np.diff(k, axis=2) != 0).sum(axis=2) + 1
    return distinct - (k[:, :, 0] == -1)


def global_requests(addr: np.ndarray, active: np.ndarray, elem_bytes: np.ndarray, sample: Sample) -> dict:
    """Per access (rows of ``addr``: element indices at the sampled lanes): mean lines and sectors per warp request
    and the share of warps executing it."""
    byte = addr * elem_bytes[:, None]
    warp_active = active.reshape(len(addr), sample.warps, WARP).any(axis=2)
    n_active = warp_active.sum(axis=1)
    valid_warps = max(int(sample.valid.reshape(sample.warps, WARP).any(axis=1).sum()), 1)
    lines = _distinct_per_warp(byte // LINE, active).sum(axis=1)
    sectors = _distinct_per_warp(byte // SECTOR, active).sum(axis=1)
    denom = np.maximum(n_active, 1)
    return {"lines": lines / denom, "sectors": sectors / denom, "warps": n_active / valid_warps}


def bank_passes(addr: np.ndarray, active: np.ndarray, elem_bytes: np.ndarray, sample: Sample) -> dict:
    """Per local access: mean passes per warp request (most distinct words in one bank) and share of warps."""
    a = len(addr)
    words = (addr * elem_bytes[:, None]) // 4
    k = np.sort(np.where(active, words, -1).reshape(a, sample.warps, WARP), axis=2)
    first = np.concatenate([np.ones((a, sample.warps, 1), bool), np.diff(k, axis=2) != 0], axis=2) & (k >= 0)
    row = np.broadcast_to(np.arange(a * sample.warps).reshape(a, sample.warps, 1), k.shape)
    slot = (row * BANKS + k % BANKS)[first]
    counts = np.bincount(slot, minlength=a * sample.warps * BANKS).reshape(a, sample.warps, BANKS)
    worst = counts.max(axis=2)
    warp_active = active.reshape(a, sample.warps, WARP).any(axis=2)
    n_active = warp_active.sum(axis=1)
    valid_warps = max(int(sample.valid.reshape(sample.warps, WARP).any(axis=1).sum()), 1)
    return {"wavefronts": worst.sum(axis=1) / np.maximum(n_active, 1), "warps": n_active / valid_warps}


def annotate(arcs: list, sample: Sample) -> dict[str, float]:
    """Write each access arc's request figures into its ``info`` (dropping the sampled addresses) and return each
    global array's L1 miss share (distinct sectors per work-group over requested sectors)."""
    groups: dict[tuple, list] = {}
    for arc in arcs:
        if "_addr" not in arc.info:
            continue
        local = arc.kind in ("local_read", "local_write")
        groups.setdefault((local, arc.info["_addr"] is None), []).append(arc)
    requested: dict[str, float] = {}
    touched: dict[str, list] = {}
    for (local, unknown), members in groups.items():
        for start in range(0, len(members), 256):  # bounded memory: 256 accesses at a time
            chunk = members[start:start + 256]
            active = np.stack([a.info.pop("_mask") & sample.valid for a in chunk])
            elem = np.array([a.info["elem_bytes"] for a in chunk], dtype=np.int64)
            if unknown:
                for a in chunk:
                    a.info.pop("_addr")
                lanes = active.reshape(len(chunk), sample.warps, WARP).sum(axis=2)
                n_active = (lanes > 0).sum(axis=1)
                per = lanes.sum(axis=1) / np.maximum(n_active, 1)
                valid_warps = max(int(sample.valid.reshape(sample.warps, WARP).any(axis=1).sum()), 1)
                figures = ({"wavefronts": per, "warps": n_active / valid_warps} if local else
                           {"lines": per, "sectors": per, "warps": n_active / valid_warps})
            else:
                addr = np.stack([a.info.pop("_addr") for a in chunk]).astype(np.int64)
                figures = (bank_passes if local else global_requests)(addr, active, elem, sample)
                if not local:
                    for j, a in enumerate(chunk):
                        if a.kind == "read":
                            touched.setdefault(a.info["array"], []).append((addr[j], active[j], elem[j]))
            for j, a in enumerate(chunk):
                for name, vals in figures.items():
                    a.info[name] = float(vals[j])
                if not local and a.kind == "read":
                    requested[a.info["array"]] = requested.get(a.info["array"], 0.0) + float(
                        figures["sectors"][j] * figures["warps"][j])
    miss: dict[str, float] = {}
    valid_warps = max(int(sample.valid.reshape(sample.warps, WARP).any(axis=1).sum()), 1)
    for name, rows in touched.items():
        keys = np.concatenate([((sample.group << 40) | ((addr * eb // SECTOR) & ((1 << 40) - 1)))[act]
                               for addr, act, eb in rows])
        total = requested.get(name, 0.0) * valid_warps
        miss[name] = min(1.0, len(np.unique(keys)) / total) if total > 0 else 1.0
    return miss
