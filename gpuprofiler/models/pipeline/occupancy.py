"""SM resources per compute capability and the occupancy they allow: resident blocks, warps, waves.

Blocks per SM are limited by threads, warps, the block slots, registers (allocated per warp in units of
256) and shared memory (allocated per block in units of the granularity, plus the per-block reserve on
sm_80 and later), as in NVIDIA's occupancy calculator. The figures are the CUDA C Programming Guide's
table of technical specifications per compute capability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuprofiler.errors import UserError

# per compute capability: SM resources (CUDA Programming Guide, "Technical Specifications per CC")
SM_RESOURCES: dict[str, dict[str, int]] = {
    "sm_70": dict(schedulers=4, max_threads=2048, max_warps=64, max_blocks=32, regs=65536, reg_unit=256,
                  max_regs_thread=255, smem=98304, smem_block=98304, smem_unit=256, smem_reserved=0),
    "sm_75": dict(schedulers=4, max_threads=1024, max_warps=32, max_blocks=16, regs=65536, reg_unit=256,
                  max_regs_thread=255, smem=65536, smem_block=65536, smem_unit=256, smem_reserved=0),
    "sm_80": dict(schedulers=4, max_threads=2048, max_warps=64, max_blocks=32, regs=65536, reg_unit=256,
                  max_regs_thread=255, smem=167936, smem_block=166912, smem_unit=128, smem_reserved=1024),
    "sm_86": dict(schedulers=4, max_threads=1536, max_warps=48, max_blocks=16, regs=65536, reg_unit=256,
                  max_regs_thread=255, smem=102400, smem_block=101376, smem_unit=128, smem_reserved=1024),
    "sm_89": dict(schedulers=4, max_threads=1536, max_warps=48, max_blocks=24, regs=65536, reg_unit=256,
                  max_regs_thread=255, smem=102400, smem_block=101376, smem_unit=128, smem_reserved=1024),
    "sm_90": dict(schedulers=4, max_threads=2048, max_warps=64, max_blocks=32, regs=65536, reg_unit=256,
                  max_regs_thread=255, smem=233472, smem_block=232448, smem_unit=128, smem_reserved=1024),
}
ARCH_ALIASES = {"sm_72": "sm_70", "sm_87": "sm_86", "sm_90a": "sm_90", "sm_100": "sm_90", "sm_100a": "sm_90",
                "sm_120": "sm_89"}


def normalise_arch(arch: str | None) -> str:
    """``sm_XX`` from ``sm_90``, ``90``, ``9.0`` or a compute capability string; unknown ones are refused."""
    if arch is None:
        return "sm_90"
    a = str(arch).strip().lower()
    if a.replace(".", "").isdigit():
        a = "sm_" + a.replace(".", "")
    if a in SM_RESOURCES:
        return a
    if a in ARCH_ALIASES:
        return ARCH_ALIASES[a]
    raise UserError(f"unknown architecture {arch!r} (known: {', '.join(SM_RESOURCES)})")


@dataclass
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    limited_by: str
    limits: dict[str, int]
    regs_per_thread: int
    smem_per_block: int

    def to_dict(self) -> dict[str, Any]:
        return {"blocks_per_sm": self.blocks_per_sm, "warps_per_sm": self.warps_per_sm,
                "limited_by": self.limited_by, "limits": self.limits, "regs_per_thread": self.regs_per_thread,
                "smem_per_block": self.smem_per_block}


def occupancy(arch: str, threads_per_block: int, regs_per_thread: int, smem_per_block: int) -> Occupancy:
    """Resident blocks per SM and what limits them; a block that cannot run at all is a UserError."""
    r = SM_RESOURCES[normalise_arch(arch)]
    warps = -(-threads_per_block // 32)
    if threads_per_block > 1024:
        raise UserError(f"{threads_per_block} threads per block: the limit is 1024")
    if regs_per_thread > r["max_regs_thread"]:
        raise UserError(f"{regs_per_thread} registers per thread: {arch} allows {r['max_regs_thread']}")
    if smem_per_block > r["smem_block"]:
        raise UserError(f"{smem_per_block} bytes of shared memory per block: {arch} allows {r['smem_block']}")
    limits = {"threads": r["max_threads"] // (warps * 32), "warps": r["max_warps"] // warps,
              "blocks": r["max_blocks"]}
    if regs_per_thread > 0:
        per_warp = math.ceil(regs_per_thread * 32 / r["reg_unit"]) * r["reg_unit"]
        limits["registers"] = (r["regs"] // per_warp) // warps
    if smem_per_block > 0:
        per_block = math.ceil((smem_per_block + r["smem_reserved"]) / r["smem_unit"]) * r["smem_unit"]
        limits["shared_memory"] = r["smem"] // per_block
    order = ("threads", "warps", "blocks", "registers", "shared_memory")
    name = min(limits, key=lambda k: (limits[k], order.index(k)))     # ties: the first in this order
    blocks = limits[name]
    if blocks < 1:
        raise UserError(f"a block of {threads_per_block} threads with {regs_per_thread} registers per thread and "
                        f"{smem_per_block} B shared memory does not fit on an {arch} SM (limited by {name})")
    return Occupancy(blocks, blocks * warps, name, limits, regs_per_thread, smem_per_block)


def blocks_on_one_sm(total_blocks: int, sms: int) -> int:
    """Blocks the busiest SM runs when the grid is spread evenly over ``sms`` SMs."""
    return -(-total_blocks // max(1, sms))
