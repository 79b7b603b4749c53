"""Task lists: every PTX instruction on the path as (id, list id, unit class, latency, writes, reads, block).

Unit classes follow the SM's sub-pipelines: ``fp32 fp64 int sfu conv`` (per scheduler), the long
sequences ptxas expands (``fdiv ddiv idiv``), ``ldg stg atomg`` (global memory), ``lds sts`` (shared),
``local``, ``param const s2r shfl branch barrier fence misc``. A latency comes from the hardware
profile where it measured that opcode on an NVIDIA GPU (CUDA: inline-PTX chains named by opcode;
OpenCL on an NVIDIA GPU: the OpenCL op chains), else from :data:`DEFAULT_LATENCY` for the compute
capability; every latency carries its source, and the output lists which came from where.

The defaults are approximate figures (cycles) from published microbenchmark studies -- Jia et al.
2018/2019 for Volta and Turing, Abdelkhalik et al. 2022 for Ampere, Luo et al. 2024 and this
project's brief for Hopper -- rounded; they are a starting point, and ``gpuprofiler calibrate`` on the
device replaces them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from gpuprofiler.models.pipeline.divergence import Access
from gpuprofiler.models.pipeline.ptx_parser import Entry, Instruction
from gpuprofiler.profile.hardware import view

UNIT_CLASSES = ("fp32", "fp64", "int", "sfu", "conv", "fdiv", "ddiv", "idiv", "ldg", "stg", "atomg", "lds", "sts",
                "local", "param", "const", "s2r", "shfl", "branch", "barrier", "fence", "misc")

_BASE = dict(fp32=4, fp64=8, int=4, sfu=18, conv=14, fdiv=40, ddiv=80, idiv=60, lds=29, local=33, l1=33, l2=263,
             dram=479, s2r=20, param=4, const=8, shfl=24, branch=4, barrier=20, fence=200, misc=4)
DEFAULT_LATENCY: dict[str, dict[str, int]] = {
    "sm_70": {**_BASE, "lds": 19, "local": 28, "l1": 28, "l2": 193, "dram": 400, "shfl": 22},
    "sm_75": {**_BASE, "fp64": 48, "ddiv": 200, "lds": 19, "local": 32, "l1": 32, "l2": 188, "dram": 400,
              "shfl": 22},
    "sm_80": {**_BASE, "lds": 23, "local": 33, "l1": 33, "l2": 200, "dram": 470},
    "sm_86": {**_BASE, "fp64": 48, "ddiv": 200, "lds": 23, "local": 33, "l1": 33, "l2": 200, "dram": 450},
    "sm_89": {**_BASE, "fp64": 48, "ddiv": 200, "lds": 23, "local": 33, "l1": 33, "l2": 270, "dram": 470},
    "sm_90": dict(_BASE),
}
# lanes per scheduler partition (a warp instruction occupies its pipe 32 / lanes cycles)
LANES: dict[str, dict[str, float]] = {
    "sm_70": dict(fp32=16, int=16, fp64=8, sfu=4),
    "sm_75": dict(fp32=16, int=16, fp64=0.5, sfu=4),
    "sm_80": dict(fp32=16, int=16, fp64=8, sfu=4),
    "sm_86": dict(fp32=32, int=16, fp64=0.5, sfu=4),
    "sm_89": dict(fp32=32, int=16, fp64=0.5, sfu=4),
    "sm_90": dict(fp32=32, int=16, fp64=16, sfu=4),
}
# SASS instructions of the sequences ptxas emits (pipe occupancy in issue cycles)
SEQUENCE_CYCLES = dict(fdiv=10, ddiv=20, idiv=20)
# per-scheduler pipe of each unit class; "mem" and "smem" are shared by the whole SM
PIPE_OF = dict(fp32="fma", fp64="fp64", int="alu", sfu="sfu", conv="sfu", fdiv="sfu", ddiv="fp64", idiv="alu",
               ldg="mem", stg="mem", atomg="mem", local="mem", const="misc", lds="smem", sts="smem", shfl="smem",
               param="misc", s2r="misc", branch="misc", barrier="misc", fence="misc", misc="misc")

# OpenCL op (instructions_cl) -> (unit class, opcode bases it times)
_OPENCL_OPS = {"float_add": ("fp32", ("add", "sub")), "float_mul": ("fp32", ("mul",)),
               "float_fma": ("fp32", ("fma",)), "float_mad": ("fp32", ("mad",)), "float_div": ("fdiv", ("div",)),
               "float_sqrt": ("fdiv", ("sqrt",)), "native_sin": ("sfu", ("sin", "cos")),
               "native_exp": ("sfu", ("ex2",)), "native_recip": ("sfu", ("rcp",)),
               "double_add": ("fp64", ("add", "sub")), "double_mul": ("fp64", ("mul",)),
               "double_fma": ("fp64", ("fma", "mad")), "double_div": ("ddiv", ("div",)),
               "int_add": ("int", ("add", "sub")), "int_mul": ("int", ("mul",)), "int_mad24": ("int", ("mad24",)),
               "local_load": ("lds", ("ld",)), "barrier": ("barrier", ("bar", "barrier"))}
_SPECIAL_S2R = ("%tid", "%ctaid", "%laneid", "%warpid", "%clock", "%smid", "%lanemask", "%globaltimer")


def unit_class(ins: Instruction) -> str:
    """The sub-pipeline class of one instruction."""
    b, t = ins.base, ins.type
    space = ins.space
    if b in ("ld", "ldu", "prefetch", "prefetchu"):
        return {"param": "param", "shared": "lds", "local": "local", "const": "const"}.get(space or "", "ldg")
    if b == "st":
        return {"shared": "sts", "local": "local", "param": "misc"}.get(space or "", "stg")
    if b in ("atom", "red"):
        return "lds" if space == "shared" else "atomg"
    if b in ("bra", "ret", "exit", "trap"):
        return "branch"
    if b in ("bar", "barrier"):
        return "misc" if "warp" in ins.mods else "barrier"
    if b in ("membar", "fence"):
        return "fence"
    if b == "mov" and len(ins.operands) > 1 and ins.operands[1].kind == "special":
        return "s2r" if ins.operands[1].name.startswith(_SPECIAL_S2R) else "param"
    if b in ("shfl", "match", "redux"):
        return "shfl"
    if b in ("vote", "activemask", "elect", "nanosleep", "pmevent", "griddepcontrol", "discard", "applypriority",
             "createpolicy", "isspacep"):
        return "misc"
    if b in ("sin", "cos", "lg2", "ex2", "tanh", "rsqrt") or (b in ("rcp", "sqrt") and "approx" in ins.mods):
        return "fp64" if t == "f64" and b != "rsqrt" else "sfu"
    if b in ("div", "rem", "rcp", "sqrt"):
        if t and t[0] == "f":
            return "ddiv" if t == "f64" else ("sfu" if "approx" in ins.mods or "full" in ins.mods else "fdiv")
        return "idiv"
    if b == "cvt":
        types = ins.types
        if len(types) >= 2 and (types[-1][0] == "f") != (types[-2][0] == "f"):
            return "conv"
        if len(types) >= 2 and types[-1][0] == "f" and types[-1] != types[-2]:
            return "fp64" if "f64" in types[-2:] else "conv"
        return "int"
    if t and t[0] == "f" or t in ("bf16", "bf16x2"):
        return "fp64" if t == "f64" else "fp32"
    return "int"


@dataclass
class LatencyTable:
    """Latency (cycles) per unit class and per measured opcode, each with its source."""

    arch: str
    by_class: dict[str, float]
    class_source: dict[str, str]
    by_opcode: dict[str, tuple[float, str]] = field(default_factory=dict)   # opcode -> (cycles, profile key)
    by_base: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)  # (class, base) -> ...

    def lookup(self, ins: Instruction, cls: str) -> tuple[float, str]:
        """Latency of ``ins`` and where it came from."""
        hit = self.by_opcode.get(ins.opcode)
        if hit is None:
            hit = self.by_opcode.get(_normal_opcode(ins))
        if hit is None:
            hit = self.by_base.get((cls, ins.base))
        if hit is not None:
            return hit
        return self.by_class[cls], self.class_source[cls]


def _normal_opcode(ins: Instruction) -> str:
    """``add.rn.ftz.f32`` -> ``add.f32``: the naming of the PTX microbenchmarks (rounding kept for fma/mad/div)."""
    keep = {"rn", "lo", "approx", "ftz", "global", "shared", "sync", "idx", "ca", "cg", "cv", "add"}
    mods = [m for m in ins.mods if m in keep or m in ("f32", "f64", "s32", "u32", "b32", "u64", "s64", "b64")]
    if ins.base in ("add", "sub", "mul") and "rn" in mods and ins.type and ins.type[0] == "f":
        mods.remove("rn")
    return ".".join([ins.base] + mods)


def latency_table(arch: str, profile: Any | None, clock_hz: float | None) -> tuple[LatencyTable, list[str]]:
    """Class latencies for ``arch``, replaced by the profile's per-opcode measurements where it has them."""
    defaults = DEFAULT_LATENCY[arch]
    by_class = {c: float(defaults.get(c, defaults["misc"])) for c in UNIT_CLASSES}
    by_class.update(ldg=float(defaults["dram"]), stg=float(defaults["dram"]), atomg=float(defaults["l2"]))
    src = {c: f"default {arch} ({c})" for c in UNIT_CLASSES}
    src.update(ldg=f"default {arch} (DRAM load)", stg=f"default {arch} (DRAM store)",
               atomg=f"default {arch} (L2 atomic)")
    table = LatencyTable(arch, by_class, src)
    notes: list[str] = []
    if profile is None:
        return table, notes
    hw = view(profile)
    instr = hw.instructions
    if hw.kind != "gpu":
        notes.append(f"the profile's device ({hw.name}, {hw.kind}) is not a GPU: "
                     f"its instruction latencies do not describe an SM, so the {arch} defaults are used")
        return table, notes
    if not instr:
        notes.append(f"the profile has no instruction latencies: {arch} defaults used")
        return table, notes

    def cycles(name: str) -> float | None:
        fig = hw.instruction(name, "latency_cycles")
        return fig.value if fig.ok and fig.value > 0 else None

    used = 0
    if hw.backend == "cuda":
        for name in instr:
            v = cycles(name)
            if v is None:
                continue
            used += 1
            key = f"profile instructions.{name}.latency_cycles"
            table.by_opcode[name] = (v, key)
            if name.startswith("ld.shared"):
                table.by_base[("lds", "ld")] = (v, key)
            elif name == "bar.sync":
                table.by_base[("barrier", "bar")] = (v, key)
                table.by_base[("barrier", "barrier")] = (v, key)
            elif name.startswith("shfl"):
                table.by_base[("shfl", "shfl")] = (v, key)
            elif name.startswith("atom.global"):
                table.by_base[("atomg", "atom")] = (v, key)
        for name, cls in (("add.f32", "fp32"), ("add.f64", "fp64"), ("add.s32", "int"), ("rcp.approx.ftz.f32", "sfu"),
                          ("div.rn.f32", "fdiv"), ("div.rn.f64", "ddiv"), ("div.s32", "idiv"), ("ld.shared.u32", "lds"),
                          ("bar.sync", "barrier"), ("shfl.sync.idx.b32", "shfl")):
            v = cycles(name)
            if v is not None:
                table.by_class[cls] = v
                table.class_source[cls] = f"profile instructions.{name}.latency_cycles"
    else:  # OpenCL on a GPU: chains of OpenCL ops
        for name, (cls, bases) in _OPENCL_OPS.items():
            v = cycles(name)
            if v is None:
                continue
            used += 1
            for b in bases:
                table.by_base[(cls, b)] = (v, f"profile instructions.{name}.latency_cycles")
            if name in ("float_add", "double_add", "int_add", "local_load", "barrier", "float_div", "double_div"):
                table.by_class[cls] = v
                table.class_source[cls] = f"profile instructions.{name}.latency_cycles"
    if not used:
        notes.append(f"the profile's instruction latencies all failed: {arch} defaults used")
    return table, notes


# sectors the L1 data path moves per cycle per SM (128 bytes/cycle on Volta and later: NVIDIA's tuning guides);
# it also looks up one 128-byte line per cycle, so a warp request takes as many cycles as lines it touches
L1_SECTORS_PER_CYCLE = {"sm_70": 4.0, "sm_75": 2.0, "sm_80": 4.0, "sm_86": 4.0, "sm_89": 4.0, "sm_90": 4.0}


@dataclass
class MemoryCosts:
    """Global-memory figures the task list needs: each load's expected latency (cycles, from where its sectors
    are served), the store latency, and the L1 data path's sectors per cycle."""

    latency: dict[int, float]
    default_latency: float
    store_latency: float
    sectors_per_cycle: float
    source: dict[str, str]


class Task(NamedTuple):
    id: int
    list_id: int
    unit: str
    latency: int
    writes: tuple[str, ...]
    reads: tuple[str, ...]
    block: int


@dataclass
class TaskList:
    """Static instruction table plus the per-warp order (``trace``: static ids along the path)."""

    entry: Entry
    unit: list[str]
    latency: list[int]
    latency_raw: list[float]
    latency_source: list[str]
    ii: list[float]
    pipe: list[str]
    issue: list[int]
    reads: list[tuple[int, ...]]
    writes: list[tuple[int, ...]]
    barrier: list[bool]
    block_of: list[int]
    registers: list[str]
    trace: np.ndarray | None

    def tasks(self, list_id: int = 0, limit: int | None = None) -> Iterator[Task]:
        """The task list of one warp (all warps run the same path); empty if it was too long to build."""
        code = self.entry.instructions
        if self.trace is None:
            return
        for k, s in enumerate(self.trace[:limit] if limit else self.trace):
            s = int(s)
            yield Task(k, list_id, self.unit[s], self.latency[s], code[s].dsts, code[s].srcs, self.block_of[s])

    def unit_counts(self, counts: Any) -> dict[str, int]:
        """Tasks per unit class, from the executions of each static instruction."""
        out: dict[str, int] = {}
        for s, c in enumerate(counts):
            if c:
                out[self.unit[s]] = out.get(self.unit[s], 0) + int(c)
        return out


def build_tasks(entry: Entry, block_of: list[int], trace: np.ndarray, latencies: LatencyTable, lanes: dict[str, float],
                accesses: dict[int, Access], mem: MemoryCosts) -> TaskList:
    """The task table for ``entry``: unit, latency, pipe occupancy and registers of every instruction."""
    code = entry.instructions
    regs: dict[str, int] = {}

    def rid(name: str) -> int:
        if name not in regs:
            regs[name] = len(regs)
        return regs[name]

    units, lat, raw, srcs, ii, pipe, issue, reads, writes, bar = [], [], [], [], [], [], [], [], [], []
    for ins in code:
        cls = unit_class(ins)
        value, source = latencies.lookup(ins, cls)
        occ = 1.0
        acc = accesses.get(ins.index)
        if cls in ("ldg", "stg", "atomg", "local"):
            if cls == "ldg":
                value, source = mem.latency.get(ins.index, mem.default_latency), mem.source["load_latency"]
            elif cls == "stg":
                value, source = mem.store_latency, mem.source["store_latency"]
            if acc is not None and acc.lines:
                occ = max(1.0, acc.lines, acc.transactions / mem.sectors_per_cycle)
            else:
                occ = 1.0
        elif cls in ("lds", "sts", "shfl"):
            size = acc.bytes if acc is not None else 4
            wavefronts = max(1.0, 32 * size / 128.0)
            occ = max(wavefronts, acc.conflict if acc is not None else 1.0)
        elif cls in SEQUENCE_CYCLES:
            occ = float(SEQUENCE_CYCLES[cls])
        elif cls in lanes:
            occ = 32.0 / lanes[cls]
        units.append(cls)
        raw.append(float(value))
        lat.append(max(1, int(round(value))))
        srcs.append(source)
        ii.append(occ)
        pipe.append(PIPE_OF[cls])
        issue.append(max(1, int(round(latencies.by_class["branch"]))) if cls == "branch" else 1)
        reads.append(tuple(rid(r) for r in ins.srcs))
        writes.append(tuple(rid(r) for r in ins.dsts))
        bar.append(cls == "barrier")
    return TaskList(entry, units, lat, raw, srcs, ii, pipe, issue, reads, writes, bar, list(block_of),
                    list(regs), None if trace is None else np.asarray(trace, dtype=np.int64))


def trace_of(blocks_seq: list[int], starts: list[int], ends: list[int]) -> np.ndarray:
    """Static instruction ids along a block sequence."""
    if not blocks_seq:
        return np.zeros(0, dtype=np.int64)
    ranges = {}
    parts = []
    for b in blocks_seq:
        r = ranges.get(b)
        if r is None:
            r = ranges[b] = np.arange(starts[b], ends[b], dtype=np.int64)
        parts.append(r)
    return np.concatenate(parts)
