"""Launch-known register values: PTX evaluated with numpy over a sample of the launch's threads.

Static analysis needs the values that the launch fixes -- kernel arguments, block and grid sizes,
thread and block indices -- to find trip counts, the path most threads take and the addresses each
lane of a warp touches. Each register holds a numpy array over the sampled threads (whole blocks,
spread evenly over the grid, so warps are complete), or ``None`` when the value is not known
statically (loaded from memory, a clock, an opcode not evaluated); ``why`` says which line made it so.
Pointer parameters get distinct 256-byte-aligned fake base addresses; shared variables get offsets
in declaration order, as ptxas lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.ptx_parser import TYPE_BYTES, Entry, Instruction, Operand

POINTER_STRIDE = 1 << 36      # distance between the fake base addresses of two pointer parameters
MAX_SAMPLE_BLOCKS = 32


MAX_LAUNCH_THREADS = 1 << 48


@dataclass
class Launch:
    """Grid and block sizes (x, y, z) and the kernel's argument values by parameter index."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: dict[int, float | int] = field(default_factory=dict)
    dynamic_smem: int = 0
    buffers: dict[int, int] = field(default_factory=dict)  # pointer parameter -> bytes of its buffer, where known
    # pointer parameter -> its contents: a function of element indices (the buffer's dtype, below), where known
    contents: dict[int, tuple[Any, np.dtype]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.grid = tuple(int(v) for v in (list(self.grid) + [1, 1])[:3])
        self.block = tuple(int(v) for v in (list(self.block) + [1, 1])[:3])
        if any(v <= 0 for v in self.grid + self.block):
            raise UserError(f"grid {self.grid} and block {self.block} must be positive")
        if self.threads_per_block > 1024:
            raise UserError(f"block {self.block} has {self.threads_per_block} threads; CUDA allows at most 1024")
        if self.threads > MAX_LAUNCH_THREADS:  # past it, counts leave int64 and float64's exact integers
            raise UserError(f"grid {self.grid} x block {self.block} is {self.threads:.3g} threads: more than the "
                            f"2^48 the model follows")

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads(self) -> int:
        return self.blocks * self.threads_per_block

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // 32)


class ThreadSample:
    """Whole blocks spread evenly over the grid (first and last included); arrays over their threads."""

    def __init__(self, launch: Launch, max_blocks: int = MAX_SAMPLE_BLOCKS):
        gx, gy, _ = launch.grid
        bx, by, _ = launch.block
        nb = launch.blocks
        picks = np.unique(np.round(np.linspace(0, nb - 1, min(nb, max_blocks))).astype(np.int64))
        tpb = launch.threads_per_block
        lin = np.arange(tpb, dtype=np.int64)
        self.launch = launch
        self.blocks = picks
        self.size = len(picks) * tpb
        self.lin = np.tile(lin, len(picks))
        self.tid = (self.lin % bx, (self.lin // bx) % by, self.lin // (bx * by))
        blk = np.repeat(picks, tpb)
        self.ctaid = (blk % gx, (blk // gx) % gy, blk // (gx * gy))
        wpb = launch.warps_per_block
        self.warp = np.repeat(np.arange(len(picks), dtype=np.int64) * wpb, tpb) + self.lin // 32
        self.n_warps = len(picks) * wpb

    def special(self, name: str) -> Any:
        """Value of a special register, or None if not known statically."""
        base, _, comp = name.partition(".")
        axis = {"x": 0, "y": 1, "z": 2}.get(comp)
        launch = self.launch
        if base == "%tid" and axis is not None:
            return self.tid[axis]
        if base == "%ntid" and axis is not None:
            return np.int64(launch.block[axis])
        if base == "%ctaid" and axis is not None:
            return self.ctaid[axis]
        if base == "%nctaid" and axis is not None:
            return np.int64(launch.grid[axis])
        if base == "%laneid":
            return self.lin % 32
        if base == "%warpid":
            return self.lin // 32
        if base == "%dynamic_smem_size":
            return np.int64(launch.dynamic_smem)
        return None


def _width(t: str | None) -> int:
    return 8 * TYPE_BYTES.get(t or "b64", 8)


def numeric(v: Any) -> Any:
    """A Python number as the numpy scalar the evaluator computes with: an integer as its 64-bit pattern (PTX's
    u64 immediates reach 2^64 - 1, past int64), a float as float64; numpy values pass unchanged."""
    if isinstance(v, bool):
        return np.int64(v)
    if isinstance(v, int):
        v &= (1 << 64) - 1
        return np.int64(v - (1 << 64) if v >= 1 << 63 else v)
    if isinstance(v, float):
        return np.float64(v)
    return v


def as_type(x: Any, t: str | None) -> Any:
    """Integer ``x`` reinterpreted as type ``t`` (wrapped to its width; signed for .sN, unsigned otherwise)."""
    if t is None or t[0] == "f" or t == "pred":
        return x
    w = _width(t)
    with np.errstate(invalid="ignore"):  # a float out of the integer range casts to a garbage value, as on a GPU
        x = np.asarray(numeric(x), dtype=np.int64)
    if w >= 64:
        return x
    x = x & ((1 << w) - 1)
    if t[0] == "s":
        x = np.where(x >= (1 << (w - 1)), x - (1 << w), x)
    return x


def _cmp(op: str, a: Any, b: Any) -> Any:
    base = op.rstrip("u") if op not in ("num", "nan") else op
    with np.errstate(invalid="ignore"):
        r = {"eq": lambda: a == b, "ne": lambda: a != b, "lt": lambda: a < b, "le": lambda: a <= b,
             "gt": lambda: a > b, "ge": lambda: a >= b, "lo": lambda: a < b, "ls": lambda: a <= b,
             "hi": lambda: a > b, "hs": lambda: a >= b,
             "num": lambda: ~(np.isnan(a) | np.isnan(b)), "nan": lambda: np.isnan(a) | np.isnan(b)}[base]()
    if op.endswith("u") and op not in ("num", "nan") and op != "eq":
        r = r | np.isnan(np.asarray(a, float)) | np.isnan(np.asarray(b, float))
    return r


CMP_OPS = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu",
           "geu", "num", "nan")
_UNSIGNED_CMP = {"lo", "ls", "hi", "hs"}


class Evaluator:
    """Register values over a :class:`ThreadSample` for one entry and launch."""

    def __init__(self, entry: Entry, launch: Launch, sample: ThreadSample | None = None,
                 arg_names: dict[str, int] | None = None):
        self.entry = entry
        self.launch = launch
        self.sample = sample or ThreadSample(launch)
        self.env: dict[str, Any] = {}
        self.why: dict[str, str] = {}
        self.params: dict[str, Any] = {}
        self.param_why: dict[str, str] = {}
        for i, p in enumerate(entry.params):
            if i in launch.args:
                self.params[p.name] = numeric(launch.args[i])
            elif p.type in ("u64", "b64", "s64") or p.pointer:
                self.params[p.name] = np.int64((i + 1) * POINTER_STRIDE)   # a pointer: fake aligned base
            else:
                self.params[p.name] = None
                self.param_why[p.name] = f"parameter {i} ({p.name}) has no value: give it with --args"
        self.shared_offset: dict[str, int] = {}
        off = 0
        for name, size in entry.shared.items():
            off = -(-off // 16) * 16
            self.shared_offset[name] = off
            off += size
        for name in entry.shared_extern:
            off = -(-off // 16) * 16
            self.shared_offset[name] = off
        self.arg_names = arg_names or {}

    # -- operand values ------------------------------------------------------------------------
    def symbol(self, name: str) -> Any:
        if name in self.shared_offset:
            return np.int64(self.shared_offset[name])
        if name in self.params:
            return self.params[name]
        return None

    def value(self, op: Operand, ins: Instruction) -> Any:
        if op.kind == "reg":
            v = self.env.get(op.name)
            if v is not None and op.neg:
                v = ~v
            return v
        if op.kind in ("imm", "fimm"):
            return numeric(int(op.value)) if op.kind == "imm" else np.float64(op.value)
        if op.kind == "special":
            return self.sample.special(op.name)
        if op.kind == "symbol":
            v = self.symbol(op.name)
            if v is not None and op.value:
                v = v + op.value
            return v
        return None

    def reason(self, op: Operand, ins: Instruction) -> str:
        if op.kind == "reg":
            return self.why.get(op.name, f"{op.name} is not set before line {ins.line}")
        if op.kind == "special":
            return f"{op.name} is not known statically (line {ins.line})"
        if op.kind == "symbol" and op.name in self.param_why:
            return self.param_why[op.name]
        return f"operand {op.text} of line {ins.line} is not known statically"

    def address(self, ins: Instruction) -> tuple[Any, str | None]:
        """Byte address of the memory operand of ``ins`` per sampled thread, or (None, why)."""
        for op in ins.operands:
            if op.kind == "mem":
                if not op.items:
                    return np.int64(op.value or 0), None
                base = op.items[0]
                v = self.value(base, ins)
                if v is None:
                    return None, self.reason(base, ins)
                return v + (op.value or 0), None
        return None, f"no address operand at line {ins.line}"

    # -- execution -----------------------------------------------------------------------------
    def unknown(self, ins: Instruction, why: str) -> None:
        for d in ins.dsts:
            self.env[d] = None
            self.why[d] = why

    def execute(self, ins: Instruction) -> None:
        """Update the destination registers of ``ins``."""
        if not ins.dsts:
            return
        try:
            results = self._compute(ins)
        except _Unknown as exc:
            self.unknown(ins, str(exc))
            return
        if ins.guard is not None:
            g = self.env.get(ins.guard)
            if g is None:
                self.unknown(ins, self.why.get(ins.guard, f"guard {ins.guard} unknown") + f" (guards line {ins.line})")
                return
            mask = ~g if ins.guard_neg else g
            if not np.all(mask):
                for d, new in list(results.items()):
                    old = self.env.get(d)
                    if not np.any(mask):
                        results[d] = old
                        if old is None:
                            self.why[d] = self.why.get(d, "unset")
                    elif old is None:
                        results[d] = None
                        self.why[d] = (f"{d} set only where the guard of line {ins.line} holds, "
                                       "unknown elsewhere")
                    else:
                        results[d] = np.where(mask, new, old)
        for d, v in results.items():
            self.env[d] = v
            if v is not None:
                self.why.pop(d, None)

    def _src(self, ins: Instruction, k: int, t: str | None = None) -> Any:
        op = ins.operands[k]
        v = self.value(op, ins)
        if v is None:
            raise _Unknown(self.reason(op, ins))
        if t is not None and op.kind != "special" and t[0] in "sub" and t != "pred":
            v = as_type(v, t)
        return v

    def _compute(self, ins: Instruction) -> dict[str, Any]:
        b, mods, t = ins.base, ins.mods, ins.type
        dst = ins.dsts[0]
        if b == "ld":
            if ins.space == "param":
                op = next(o for o in ins.operands if o.kind == "mem")
                name = op.items[0].name if op.items else None
                if name in self.params and not op.value:
                    v = self.params[name]
                    if v is None:
                        raise _Unknown(self.param_why[name])
                    return {dst: as_type(v, t) if t and t[0] in "sub" and not isinstance(v, float) else v}
                raise _Unknown(f"parameter load at line {ins.line} not understood")
            if ins.space in ("global", None, "") and len(ins.dsts) == 1:
                return {dst: self._load(ins, t)}
            raise _Unknown(f"loaded from {ins.space or 'generic'} memory at line {ins.line}")
        if b in ("ldu", "atom", "shfl", "vote", "match", "redux", "activemask", "elect", "isspacep", "testp",
                 "createpolicy", "alloca"):
            raise _Unknown(f"result of {ins.opcode} at line {ins.line} depends on run-time data")
        if b == "mov":
            op = ins.operands[1]
            if op.kind == "special":
                v = self.sample.special(op.name)
                if v is None:
                    raise _Unknown(f"{op.name} is not known statically (line {ins.line})")
                return {dst: v}
            v = self._src(ins, 1)
            if len(ins.dsts) > 1 or ins.operands[0].kind == "vec":
                raise _Unknown(f"vector mov at line {ins.line} not evaluated")
            return {dst: v}
        if b == "cvta":
            return {dst: self._src(ins, 1)}
        if b == "cvt":
            types = ins.types
            if len(types) < 2:
                raise _Unknown(f"cvt without two types at line {ins.line}")
            dt, st = types[-2], types[-1]
            v = self._src(ins, 1)
            if st[0] != "f" and dt[0] != "f":
                return {dst: as_type(as_type(v, st), dt)}
            if st[0] != "f" and dt[0] == "f":
                return {dst: np.asarray(as_type(v, st), dtype=np.float64)}
            if st[0] == "f" and dt[0] != "f":
                rnd = next((m for m in mods if m in ("rzi", "rni", "rmi", "rpi")), "rzi")
                f = {"rzi": np.trunc, "rni": np.rint, "rmi": np.floor, "rpi": np.ceil}[rnd]
                with np.errstate(invalid="ignore"):
                    return {dst: as_type(f(np.asarray(v, float)).astype(np.int64), dt)}
            return {dst: np.asarray(v, dtype=np.float32 if dt == "f32" else np.float64).astype(np.float64)}
        if b == "setp":
            cmp = next((m for m in mods if m in CMP_OPS), None)
            if cmp is None:
                raise _Unknown(f"setp without comparison at line {ins.line}")
            ct = t
            if cmp in _UNSIGNED_CMP and ct and ct[0] == "s":
                ct = "u" + ct[1:]
            a, c = self._src(ins, 1, ct), self._src(ins, 2, ct)
            r = _cmp(cmp, a, c)
            bop = next((m for m in mods if m in ("and", "or", "xor")), None)
            if bop is not None:
                p = self._src(ins, 3)
                r = {"and": lambda: r & p, "or": lambda: r | p, "xor": lambda: r ^ p}[bop]()
            out = {dst: r}
            if len(ins.dsts) > 1:
                out[ins.dsts[1]] = ~r
            return out
        if t == "pred":
            if b in ("and", "or", "xor"):
                a, c = self._src(ins, 1), self._src(ins, 2)
                return {dst: {"and": a & c, "or": a | c, "xor": a ^ c}[b]}
            if b == "not":
                return {dst: ~self._src(ins, 1)}
            if b == "mov":
                return {dst: self._src(ins, 1)}
            raise _Unknown(f"{ins.opcode} at line {ins.line} not evaluated")
        if b == "selp":
            a, c, p = self._src(ins, 1, t), self._src(ins, 2, t), self._src(ins, 3)
            return {dst: np.where(p, a, c)}
        if b == "slct":
            a, c, p = self._src(ins, 1, t), self._src(ins, 2, t), self._src(ins, 3)
            return {dst: np.where(p >= 0, a, c)}
        if t is not None and t[0] == "f":
            return {dst: self._float(ins, b, t)}
        return {dst: self._int(ins, b, mods, t)}

    def _load(self, ins: Instruction, t: str | None) -> Any:
        """A global load from a buffer whose contents the launch knows (a kernel spec's inputs): the values at
        every sampled lane's address, read as the load's type from the buffer's elements."""
        addr, why = self.address(ins)
        if addr is None:
            raise _Unknown(why)
        addr = np.broadcast_to(np.asarray(addr, dtype=np.int64), (self.sample.size,))
        slots = np.unique(addr // POINTER_STRIDE)
        if len(slots) != 1 or int(slots[0]) - 1 not in self.launch.contents:
            raise _Unknown(f"loaded from global memory at line {ins.line}")
        values, dtype = self.launch.contents[int(slots[0]) - 1]
        offset = addr % POINTER_STRIDE
        size = TYPE_BYTES.get(t or "b32", 4)
        if size != dtype.itemsize or np.any(offset % size):
            raise _Unknown(f"load at line {ins.line} reads its buffer at another width than its elements")
        v = np.asarray(values(offset // size))
        if t and t[0] == "f":
            return v.astype(np.float32 if t == "f32" else np.float64).astype(np.float64)
        return as_type(v.astype(np.int64), t)

    def _float(self, ins: Instruction, b: str, t: str) -> Any:
        n = len(ins.operands)
        s = [self._src(ins, k) for k in range(1, n)]
        with np.errstate(all="ignore"):
            if b == "add":
                r = s[0] + s[1]
            elif b == "sub":
                r = s[0] - s[1]
            elif b == "mul":
                r = s[0] * s[1]
            elif b in ("fma", "mad"):
                r = s[0] * s[1] + s[2]
            elif b == "div":
                r = s[0] / s[1]
            elif b == "neg":
                r = -s[0]
            elif b == "abs":
                r = np.abs(s[0])
            elif b == "min":
                r = np.minimum(s[0], s[1])
            elif b == "max":
                r = np.maximum(s[0], s[1])
            elif b == "sqrt":
                r = np.sqrt(s[0])
            elif b == "rcp":
                r = 1.0 / s[0]
            else:
                raise _Unknown(f"{ins.opcode} at line {ins.line} not evaluated")
        r = np.asarray(r, dtype=np.float64)
        return r.astype(np.float32).astype(np.float64) if t == "f32" else r

    def _int(self, ins: Instruction, b: str, mods: tuple[str, ...], t: str | None) -> Any:
        wide = "wide" in mods
        hi = "hi" in mods
        out_t = t
        if wide and t:
            out_t = t[0] + str(2 * _width(t))
        src_t = t
        if b in ("shl", "shr"):
            a = self._src(ins, 1, t)
            sh = np.asarray(self._src(ins, 2, "u32"))
            w = _width(t)
            sh = np.minimum(sh, w)
            if b == "shl":
                r = np.where(sh >= w, 0, np.left_shift(np.asarray(a, np.int64), np.minimum(sh, 63)))
                return as_type(r, t)
            if t and t[0] == "s":
                return as_type(np.right_shift(np.asarray(a, np.int64), np.minimum(sh, w - 1)), t)
            ua = as_type(a, "u" + t[1:] if t else "u64")
            return as_type(np.where(sh >= w, 0, np.right_shift(np.asarray(ua, np.int64), np.minimum(sh, 63))), t)
        if b in ("not", "cnot", "neg", "abs", "popc", "clz", "brev", "bfind"):
            a = np.asarray(self._src(ins, 1, src_t), dtype=np.int64)
            if b == "not":
                return as_type(~a, t)
            if b == "cnot":
                return as_type((a == 0).astype(np.int64), t)
            if b == "neg":
                return as_type(-a, t)
            if b == "abs":
                return as_type(np.abs(a), t)
            if b == "popc":
                ua = as_type(a, "u" + t[1:] if t else "u64")
                return np.vectorize(lambda v: bin(int(v) & ((1 << 64) - 1)).count("1"), otypes=[np.int64])(ua)
            raise _Unknown(f"{ins.opcode} at line {ins.line} not evaluated")
        n = len(ins.operands)
        s = [np.asarray(self._src(ins, k, out_t if (wide and k == 3) else src_t), dtype=np.int64)
             for k in range(1, n)]
        with np.errstate(all="ignore"):
            if b == "add":
                r = s[0] + s[1]
            elif b == "sub":
                r = s[0] - s[1]
            elif b in ("mul", "mul24", "mad", "mad24"):
                r = s[0] * s[1]
                if hi:
                    if _width(t) > 32:
                        raise _Unknown(f"64-bit {b[:3]}.hi at line {ins.line} not evaluated")
                    r = r >> _width(t)
                if b.startswith("mad"):
                    r = r + s[2]
            elif b == "sad":
                r = np.abs(s[0] - s[1]) + s[2]
            elif b in ("div", "rem"):
                d = np.where(s[1] == 0, 1, s[1])
                q = (np.abs(s[0]) // np.abs(d)) * np.sign(s[0]) * np.sign(d)
                r = q if b == "div" else s[0] - d * q
                r = np.where(s[1] == 0, 0, r)
            elif b == "min":
                r = np.minimum(s[0], s[1])
            elif b == "max":
                r = np.maximum(s[0], s[1])
            elif b == "and":
                r = s[0] & s[1]
            elif b == "or":
                r = s[0] | s[1]
            elif b == "xor":
                r = s[0] ^ s[1]
            elif b == "bfe":
                pos, ln = np.clip(s[1], 0, 63), np.clip(s[2], 0, 63)
                ua = as_type(s[0], "u" + t[1:] if t else "u64")
                r = (np.right_shift(ua, pos)) & ((np.left_shift(np.int64(1), ln)) - 1)
                if t and t[0] == "s":
                    sign = np.right_shift(r, np.maximum(ln - 1, 0)) & 1
                    r = np.where((ln > 0) & (sign == 1), r - np.left_shift(np.int64(1), ln), r)
            else:
                raise _Unknown(f"{ins.opcode} at line {ins.line} not evaluated")
        return as_type(r, out_t)


class _Unknown(Exception):
    """A value that is not known statically; the message says why."""
