"""Per-instruction latency and throughput of NVIDIA GPUs, measured with inline PTX and ``%clock64``.

Each opcode (``add.f32``, ``fma.rn.f32``, ``ld.global.cg.u64``, ...) is written as a chain of
inline-PTX instances in which every instance reads the previous one's result, so the chain runs
at the instruction's latency. Two kernels per opcode, with chains of k and 2k instances per loop
iteration, are timed in SM cycles with ``%clock64``; the difference cancels the loop overhead and
the cost of reading the clock:

    latency_cycles = (cycles(2k) - cycles(k)) / (ITERS * k)

and the ratio cycles(2k) / cycles(k) must be near 2, or the chain was folded away or is hidden by
loop overhead. Throughput runs the same opcode as several independent chains per thread over a
full grid, timed with CUDA events. Cycles become seconds with the SM clock measured at run time
(``%clock64`` cycles over CUDA event seconds of one long kernel).

Why the chains look the way they do (checked against ``nvdisasm`` output for sm_90):

* ptxas (the PTX -> SASS assembler) optimises the inline PTX: it folds ``x+b+b`` into one IADD3,
  fuses two logic ops into one LOP3, hoists ``b*b`` out of the loop and folds ``rcp(rcp(x))``.
  Integer, logic and rcp chains are therefore *guarded* by two runtime predicates that alternate
  (``@gp0``, ``@gp1``; both true at run time): ptxas cannot combine two instructions under
  different unknown guards, and a guard costs nothing in SASS. Other floating-point chains need no
  guard (IEEE arithmetic is not reassociated). Repeated shuffles from one uniform lane are folded
  too, so the shuffle chain rotates the warp (lane i reads lane i+1).
* The chain value starts from ``init + threadIdx.x * zero`` (``zero`` = 0 at run time) so that
  ptxas cannot move the chain onto the uniform datapath (UIADD3, USHF), which has other latencies.
* Integer add and subtract chains are ``x = b - x``: ptxas (CUDA 13.0, sm_90) compiles ``x = x + b`` links
  to IADD3 (ALU pipe) and VIADD (FMA pipe) in turn, whatever the guards, and a chain that alternates pipes
  is slower per link than either (5.0 cycles on an H100, method version 1). A negated chain input is
  encodable only by IADD3, so each link is exactly one IADD3 -- the instruction that adds.
* Global-load chains walk the ring once before the clock starts: a cold L1 costs one L2 trip per 32-byte
  sector (256 for the 8 KiB ring, ~66k cycles on an H100), as much as the whole k chain of L1 hits, and
  broke the k / 2k ratio check of ``ld.global.ca`` (method version 1).
* ptxas ``-O0`` is no way out: it emits a 15-cycle stall after every instruction.
* The ``.approx`` opcodes without ``.ftz`` include the denormal fix-ups ptxas emits around the MUFU
  instruction (a compare and predicated multiplies); the ``.ftz`` forms are the MUFU alone.

Sizes: k = UNROLL = 16 links per iteration (8 for ops that expand to long SASS sequences or go to
memory) keeps the loop body small for the instruction cache while the loop's own 3-4 instructions
overlap the chain; ITERS = 256 (quick: 64) makes each run at least ~16k cycles, so the few cycles
of clock-read jitter are below 0.01 cycle per instruction. The fastest of several runs is used.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import fixed
from gpuprofiler.profile.file import entry, failed, method_version_of

Progress = Callable[[str], None] | None

UNROLL = 16            # k: dependent instances per loop iteration (2k = 32 in the second kernel)
ITERS = 256            # loop iterations of a latency kernel (quick: QUICK_ITERS)
QUICK_ITERS = 64
CHAINS = 8             # independent chains per thread in the throughput kernel
TP_BLOCK = 256         # threads per block of the throughput kernel
RATIO_RANGE = (1.6, 2.4)
SHARED_WORDS = 1024    # pointer-chase ring in shared memory (4 KiB)
GLOBAL_WORDS = 1024    # pointer-chase ring in global memory (8 KiB of 64-bit pointers)
SENTINEL = {"float": -12345.6789, "double": -12345.6789, "int": 0x5EADBEE5,
            "unsigned": 0x5EADBEE5, "u64": 0}
CTYPE = {"float": ("float", "f", np.float32), "double": ("double", "d", np.float64),
         "int": ("int", "r", np.int32), "unsigned": ("unsigned", "r", np.uint32),
         "u64": ("unsigned long long", "l", np.uint64)}


@dataclass(frozen=True)
class OpSpec:
    """How to build a dependent chain of one opcode.

    ``body`` is one instance of the chain in PTX: ``{x}`` is the chain value (read and written),
    ``{b}`` and ``{c}`` are runtime operands, ``{a}`` a per-chain 64-bit address, ``{t}`` a per-chain
    scratch predicate, ``{g}`` a guard predicate that alternates between two always-true predicates.
    ``guard`` prefixes every instance with ``@{g}`` (see the module docstring).
    """

    name: str
    ctype: str                      # key of CTYPE: the chain value's type
    body: str
    init: float = 1.0               # chain start value
    b: float = 0.0
    c: float = 0.0
    kind: str = "alu"               # alu | shfl | shared | global | atom | bar
    guard: bool = False
    unroll: int = UNROLL
    chains: int = CHAINS
    lat_threads: int = 1            # threads of the latency kernel (a full warp for shfl)
    note: str = ""                  # what the chain measures beyond the bare opcode
    sass: str = ""                  # regex of the SASS instruction each instance must leave (checked in tests)
    ptx: str = ""                   # the PTX opcode of the chain where it is not ``name`` itself (see note)
    single_sass: bool = False       # every link must be the one SASS instruction ``sass`` (checked in tests)

    @property
    def opcode(self) -> str:
        """The PTX opcode the chain is written with (``name`` unless ``ptx`` says otherwise)."""
        return self.ptx or self.name

    @property
    def ident(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", self.name)


SPLIT_ADD_NOTE = ("x = b - x: every link is one IADD3 (a negated chain input, which only IADD3 encodes); ptxas "
                  "compiles x = x + b links to IADD3 on the ALU pipe and VIADD on the FMA pipe in turn, a mixed chain "
                  "slower per link than either instruction")


def _ops() -> dict[str, OpSpec]:
    ops: list[OpSpec] = []
    add = ops.append
    # floating point: no guard needed (ptxas does not reassociate IEEE arithmetic); values stay at 1.0
    for t, ct, unit in (("f32", "float", "F"), ("f64", "double", "D")):
        add(OpSpec(f"add.{t}", ct, f"add.{t} {{x}}, {{x}}, {{b}};", 1.0, 0.0, sass=rf"\b{unit}ADD\b"))
        add(OpSpec(f"sub.{t}", ct, f"sub.{t} {{x}}, {{x}}, {{b}};", 1.0, 0.0, sass=rf"\b{unit}ADD\b"))
        add(OpSpec(f"mul.{t}", ct, f"mul.{t} {{x}}, {{x}}, {{b}};", 1.0, 1.0, sass=rf"\b{unit}MUL\b"))
        add(OpSpec(f"fma.rn.{t}", ct, f"fma.rn.{t} {{x}}, {{x}}, {{b}}, {{c}};", 1.0, 1.0, 0.0,
                   sass=rf"\b{unit}FMA\b"))
        add(OpSpec(f"mad.rn.{t}", ct, f"mad.rn.{t} {{x}}, {{x}}, {{b}}, {{c}};", 1.0, 1.0, 0.0,
                   sass=rf"\b{unit}FMA\b", note="mad.rn is fma.rn on sm_20 and later"))
        add(OpSpec(f"div.rn.{t}", ct, f"div.rn.{t} {{x}}, {{b}}, {{x}};", 1.0, 1.0, unroll=8, chains=4,
                   sass=r"MUFU\.RCP64H" if t == "f64" else r"MUFU\.RCP\b",
                   note="x = b / x: the divisor is the chain value, so the whole reciprocal + Newton "
                        "sequence ptxas emits is in the chain (fast path; b = x = 1)"))
    # integers: guarded so that ptxas cannot fold (x+b+b -> IADD3) or reassociate the chain. Add and subtract
    # chains are x = b - x: ptxas splits x = x + b (or x - b) links between IADD3 on the ALU pipe and VIADD on
    # the FMA pipe, and the mixed chain is slower per link than either (5.0 cycles on an H100); a negated chain
    # input only IADD3 can encode, so every link is the one IADD3 that also adds (see SPLIT_ADD_NOTE)
    for t, ct in (("s32", "int"), ("u32", "unsigned")):
        add(OpSpec(f"add.{t}", ct, f"sub.{t} {{x}}, {{b}}, {{x}};", 1, 0, guard=True, sass=r"\bIADD3\b",
                   ptx=f"sub.{t}", single_sass=True, note=SPLIT_ADD_NOTE))
        add(OpSpec(f"sub.{t}", ct, f"sub.{t} {{x}}, {{b}}, {{x}};", 1, 0, guard=True, sass=r"\bIADD3\b",
                   single_sass=True, note=SPLIT_ADD_NOTE))
        add(OpSpec(f"mul.lo.{t}", ct, f"mul.lo.{t} {{x}}, {{x}}, {{b}};", 1, 1, guard=True, sass=r"\bIMAD\s"))
        add(OpSpec(f"mad.lo.{t}", ct, f"mad.lo.{t} {{x}}, {{x}}, {{b}}, {{c}};", 1, 1, 0, guard=True,
                   sass=r"\bIMAD\s"))
        add(OpSpec(f"div.{t}", ct, f"div.{t} {{x}}, {{b}}, {{x}};", 1, 1, guard=True, unroll=8, chains=4,
                   sass=r"MUFU\.RCP\b",
                   note="x = b / x: the divisor is the chain value; a ~20-instruction sequence in SASS"))
    # special-function unit (MUFU)
    for fn in ("rcp", "sqrt", "sin", "ex2", "lg2"):
        for ftz in ("", ".ftz"):
            notes = [] if ftz else ["includes the denormal fix-ups ptxas adds around MUFU without .ftz"]
            if fn == "sin":
                notes.append("includes the FMUL.RZ by 1/(2 pi) ptxas puts before MUFU.SIN")
            if fn == "rcp":
                notes.append("guarded: ptxas folds rcp(rcp(x)) into x")
            add(OpSpec(f"{fn}.approx{ftz}.f32", "float", f"{fn}.approx{ftz}.f32 {{x}}, {{x}};", 1.0,
                       guard=fn == "rcp", sass=rf"MUFU\.{fn.upper()}\b", note="; ".join(notes)))
    # compare and select
    add(OpSpec("setp.lt.f32", "float", "setp.lt.f32 {t}, {x}, {b};\n\tselp.f32 {x}, {c}, {b}, {t};",
               1.0, 2.0, 1.0, sass=r"\bFSETP\b",
               note="each link is setp.lt.f32 + selp.f32 (x -> predicate -> x); subtract selp.b32 for setp alone"))
    add(OpSpec("selp.b32", "unsigned", "selp.b32 {x}, {x}, {b}, {g};", 1, 2, sass=r"\bSEL\b",
               note="x = g ? x : b with alternating always-true runtime predicates"))
    # shifts and logic (b leaves x unchanged: shift by 0, and with ~0, or/xor with 0)
    for name, b, sass in (("shl.b32", 0, r"\bSHF\.L"), ("shr.b32", 0, r"\bSHF\.R"), ("shr.u32", 0, r"\bSHF\.R"),
                          ("and.b32", 0xFFFFFFFF, r"\bLOP3\.LUT\b"), ("or.b32", 0, r"\bLOP3\.LUT\b"),
                          ("xor.b32", 0, r"\bLOP3\.LUT\b")):
        add(OpSpec(name, "unsigned", f"{name} {{x}}, {{x}}, {{b}};", 1, b, guard=True, sass=sass))
    # warp shuffle: the value moved is the chain value
    add(OpSpec("shfl.sync.idx.b32", "unsigned", "shfl.sync.idx.b32 {x}, {x}, {c}, 0x1f, 0xffffffff;",
               1, 0, 1, kind="shfl", lat_threads=32, sass=r"SHFL\.IDX",
               note="one full warp (mask 0xffffffff); x = shfl(x, (lane + 1) % 32), a rotation (ptxas folds "
                    "repeated shuffles from one uniform lane)"))
    # memory: pointer chases, each load's address is the previous load's value
    add(OpSpec("ld.shared.u32", "unsigned", "ld.shared.u32 {x}, [{x}];", kind="shared", sass=r"\bLDS\b",
               note=f"pointer chase through a ring of {SHARED_WORDS} shared-memory words (x = s[x])"))
    for cop in ("ca", "cg", "cv"):
        add(OpSpec(f"ld.global.{cop}.u64", "u64", f"ld.global.{cop}.u64 {{x}}, [{{x}}];", kind="global",
                   unroll=8, sass=r"\bLDG\b",
                   note=f"pointer chase through a ring of {GLOBAL_WORDS} 64-bit pointers (8 KiB, cache-resident) "
                        "in global memory (x = *x), walked once with the same load before the clock starts (a "
                        "cold L1 costs one L2 trip per 32-byte sector: constant, and as large as the k chain)"))
    add(OpSpec("atom.global.add.u32", "unsigned", "atom.global.add.u32 {x}, [{a}], {x};", 0, kind="atom",
               unroll=8, chains=4, sass=r"\bATOMG\b",
               note="x = atomicAdd(a, x): the returned old value is the next operand; one address per chain"))
    add(OpSpec("bar.sync", "unsigned", "bar.sync 0;", kind="bar", lat_threads=256, chains=1, sass=r"BAR\.SYNC",
               note="time per barrier of one 256-thread block; throughput counts block-wide barriers"))
    return {op.name: op for op in ops}


OPS: dict[str, OpSpec] = _ops()

_PRELUDE = """\
#ifndef GPUPROF_PTX_PRELUDE
#define GPUPROF_PTX_PRELUDE
typedef unsigned long long u64;
#endif
"""

_CLOCK_SOURCE = """\
extern "C" __global__ void clock_probe(long long *out, float init, float b, int zero, int iters, float sentinel)
{
  float x = init + (float)(threadIdx.x * zero);
  long long t0 = clock64();
#pragma unroll 1
  for (int i = 0; i < iters; ++i) {
    asm volatile("fma.rn.f32 %0, %0, %1, %1;\\n\\tfma.rn.f32 %0, %0, %1, %1;\\n\\t"
                 "fma.rn.f32 %0, %0, %1, %1;\\n\\tfma.rn.f32 %0, %0, %1, %1;" : "+f"(x) : "f"(b));
  }
  long long t1 = clock64();
  out[0] = t1 - t0;
  if (x == sentinel) out[1] = 1;
}
"""


def _asm(spec: OpSpec, unroll: int, chains: int) -> str:
    """One ``asm volatile`` statement: ``unroll`` instances of each of ``chains`` independent chains."""
    _, con, _ = CTYPE[spec.ctype]
    has_x = "{x}" in spec.body
    n_out = chains if has_x else 0
    base = n_out
    ops_b, ops_c, ops_one = f"%{base}", f"%{base + 1}", f"%{base + 2}"
    lines = []
    uses_g = spec.guard or "{g}" in spec.body
    if uses_g:
        lines += [".reg .pred gp0, gp1;", f"setp.ne.s32 gp0, {ops_one}, 0;", f"setp.gt.s32 gp1, {ops_one}, 0;"]
    if "{t}" in spec.body:
        lines.append(".reg .pred " + ", ".join(f"sp{j}" for j in range(chains)) + ";")
    for i in range(unroll):
        g = f"gp{i % 2}"
        for j in range(chains):
            text = spec.body.format(x=f"%{j}", b=ops_b, c=ops_c, a=f"%{base + 3 + j}", t=f"sp{j}", g=g)
            lines.append((f"@{g} " if spec.guard else "") + text)
    asm = "\\n\\t".join(line.replace("\n\t", "\\n\\t") for line in ["{"] + lines + ["}"])
    outs = ", ".join(f'"+{con}"(x{j})' for j in range(n_out))
    ins = [f'"{con}"(b)', f'"{con}"(c)', '"r"(one)'] + [f'"l"(a{j})' for j in range(chains) if spec.kind == "atom"]
    return f'asm volatile("{asm}"\n                 : {outs} : {", ".join(ins)} : "memory");'


def _prologue(spec: OpSpec, chains: int) -> str:
    """Set up the chain values (and the pointer-chase rings) before the clock starts."""
    ctype, _, _ = CTYPE[spec.ctype]
    lines = []
    if spec.kind == "shared":
        lines += [f"__shared__ unsigned ring[{SHARED_WORDS}];",
                  "unsigned base = (unsigned)__cvta_generic_to_shared(ring);",
                  f"for (int i = threadIdx.x; i < {SHARED_WORDS}; i += blockDim.x)",
                  f"  ring[i] = base + 4u * (unsigned)((i + 1) % {SHARED_WORDS});",
                  "__syncthreads();"]
        for j in range(chains):
            lines.append(f"unsigned x{j} = base + 4u * (unsigned)(((threadIdx.x & 31) + 32 * {j} + zero) "
                         f"% {SHARED_WORDS});")
    elif spec.kind == "global":
        for j in range(chains):
            lines.append(f"u64 x{j} = (u64)(mem + ((threadIdx.x & 31) + 32 * {j} + zero) % {GLOBAL_WORDS});")
    else:
        for j in range(chains):
            lines.append(f"{ctype} x{j} = init + ({ctype})((threadIdx.x + {j}) * zero);")
        if spec.kind == "shfl":
            lines.append("c = (threadIdx.x + c) & 31u;  // source lane: a rotation, not foldable")
        if spec.kind == "atom":
            lines.append("unsigned *words = (unsigned *)mem;")
            lines.append("u64 gid = (u64)blockIdx.x * blockDim.x + threadIdx.x, nt = (u64)gridDim.x * blockDim.x;")
            for j in range(chains):
                lines.append(f"u64 a{j} = (u64)(words + {j} * nt + gid);")
    return "\n  ".join(lines)


def _warm(spec: OpSpec, unroll: int, chains: int) -> str:
    """Global loads: one lap of the ring with the chain's own loads before the clock starts, so that the
    timed chains find it in cache (each chain ends where it began: the lap is GLOBAL_WORDS links)."""
    if spec.kind != "global":
        return ""
    return f"""
  // warm-up: one lap of the ring ({GLOBAL_WORDS} links), untimed
#pragma unroll 1
  for (int w = 0; w < {GLOBAL_WORDS // unroll}; ++w) {{
    {_asm(spec, unroll, chains)}
  }}"""


def _kernel(spec: OpSpec, prefix: str, unroll: int, chains: int) -> str:
    ctype, _, _ = CTYPE[spec.ctype]
    name = f"{prefix}_{spec.ident}_u{unroll}"
    live = " || ".join(f"x{j} == sentinel" for j in range(chains))
    return f"""\
extern "C" __global__ void {name}(long long *out, u64 *mem, {ctype} init, {ctype} b, {ctype} c,
    int one, int zero, int iters, {ctype} sentinel)
{{
  {_prologue(spec, chains)}{_warm(spec, unroll, chains)}
  long long t0 = clock64();
#pragma unroll 1
  for (int i = 0; i < iters; ++i) {{
    {_asm(spec, unroll, chains)}
  }}
  long long t1 = clock64();
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = t1 - t0;
  if ({live}) out[1] = 1;
}}
"""


def kernel_names(op: str, unroll: int) -> dict[str, str]:
    """Names of the kernels in :func:`kernel_source` (``lat``, ``tp`` and, for global loads, ``init``)."""
    ident = OPS[op].ident
    names = {"lat": f"lat_{ident}_u{unroll}", "tp": f"tp_{ident}_u{unroll}"}
    if OPS[op].kind == "global":
        names["init"] = f"init_{ident}_u{unroll}"
    return names


def kernel_source(op: str, unroll: int) -> str:
    """Complete CUDA C++ source for ``op`` with ``unroll`` instances per loop iteration.

    It holds the latency kernel (one chain, run by ``lat_threads`` threads), the throughput kernel
    (``chains`` independent chains per thread) and, for global loads, the kernel that builds the ring.
    Sources of different ops and unrolls can be concatenated into one translation unit.
    """
    spec = OPS[op]
    parts = [_PRELUDE, _kernel(spec, "lat", unroll, 1), _kernel(spec, "tp", unroll, spec.chains)]
    if spec.kind == "global":
        parts.append(f"""\
extern "C" __global__ void init_{spec.ident}_u{unroll}(u64 *mem, int n)
{{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) mem[i] = (u64)(mem + (i + 1) % n);
}}
""")
    return "\n".join(parts)


def clock_source() -> str:
    """Source of ``clock_probe``: one thread's long FMA chain, timed by %clock64 and by CUDA events."""
    return _PRELUDE + _CLOCK_SOURCE


def all_sources() -> dict[str, str]:
    """Every source this module compiles: ``"<op>@<unroll>"`` for k and 2k, and ``"clock"``."""
    out = {"clock": clock_source()}
    for op, spec in OPS.items():
        for u in (spec.unroll, 2 * spec.unroll):
            out[f"{op}@{u}"] = kernel_source(op, u)
    return out


def combined_source() -> str:
    """All sources in one translation unit (one compile on the device; kernel names are distinct)."""
    return "\n".join(all_sources().values())


# ---------------------------------------------------------------------------------------------
# Pure arithmetic and pass/fail rules (unit-tested without a GPU)
# ---------------------------------------------------------------------------------------------

def _as_list(v: float | Sequence[float]) -> list[float]:
    return [float(x) for x in v] if isinstance(v, (list, tuple, np.ndarray)) else [float(v)]


def chain_ratio(c_k: float | Sequence[float], c_2k: float | Sequence[float]) -> float | None:
    """cycles(2k) / cycles(k) of the fastest runs (about 2 for a real dependent chain); None if undefined."""
    lo_k, lo_2k = min(_as_list(c_k)), min(_as_list(c_2k))
    ratio = lo_2k / lo_k if lo_k > 0 else math.nan
    return ratio if math.isfinite(ratio) else None


def latency_from_cycles(c_k: float | Sequence[float], c_2k: float | Sequence[float], iters: int, k: int,
                        method: str = "(c(2k) - c(k)) / (iters * k) of %clock64 cycles") -> dict[str, Any]:
    """Latency in cycles of one instance from chains of k and 2k instances per iteration.

    ``c_k`` / ``c_2k`` are the clock64 cycles of the whole loop (one value or repeated runs; the
    fastest run is used, the spread over runs paired in order gives the interval). Fails when the
    chain does not scale (ratio outside [1.6, 2.4]) or the latency is below one cycle.
    """
    ks, k2s = _as_list(c_k), _as_list(c_2k)
    ratio = chain_ratio(ks, k2s)
    if ratio is None or not RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]:
        shown = "undefined" if ratio is None else f"{ratio:.3g}"
        return failed("cycles", method, f"chain does not scale (ratio {shown}): dead code or loop overhead",
                      chain_ratio=ratio)
    ops = float(iters) * float(k)
    value = (min(k2s) - min(ks)) / ops
    if not value >= 1.0:
        return failed("cycles", method, f"latency below one cycle is impossible ({value:.3g} cycles)",
                      chain_ratio=ratio)
    per_run = [(b - a) / ops for a, b in zip(ks, k2s)]
    interval = (min(per_run + [value]), max(per_run + [value]))
    return entry(value, "cycles", method, interval, n=len(per_run), chain_ratio=ratio)


def latency_seconds(latency_cycles: dict[str, Any], clock_hz: float | None) -> dict[str, Any]:
    """The latency entry in seconds with the measured SM clock (failed if either is missing)."""
    method = latency_cycles["method"] + "; / SM clock (clock64 cycles / CUDA event seconds)"
    if latency_cycles["status"] != "ok":
        return failed("s", method, latency_cycles.get("reason", "no latency"))
    if not clock_hz or not clock_hz > 0:
        return failed("s", method, "no measured SM clock")
    lo, hi = latency_cycles["interval"] or (latency_cycles["value"],) * 2
    return entry(latency_cycles["value"] / clock_hz, "s", method, (lo / clock_hz, hi / clock_hz),
                 n=latency_cycles.get("n"))


def throughput_from_times(t_k: float | Sequence[float], t_2k: float | Sequence[float], ops_k: float,
                          ops_2k: float, clock_hz: float | None = None, sms: int | None = None,
                          method: str = "(ops(2k) - ops(k)) / (t(2k) - t(k)) of CUDA event times",
                          max_per_cycle_per_sm: float = 256.0) -> dict[str, Any]:
    """Operations per second from two kernel lengths (the difference cancels launch overhead).

    Fails when the time does not scale with the work (ratio outside [1.6, 2.4] x the op ratio / 2),
    when the time difference is not positive, or when it implies more than
    ``max_per_cycle_per_sm`` thread-operations per SM cycle (above any NVIDIA SM's issue rate).
    """
    ts, t2s = _as_list(t_k), _as_list(t_2k)
    lo_k, lo_2k = min(ts), min(t2s)
    scale = ops_2k / ops_k
    ratio = (lo_2k / lo_k) * (2.0 / scale) if lo_k > 0 else math.nan
    if not math.isfinite(ratio):
        return failed("ops/s", method, "time does not scale with the work (ratio undefined)", time_ratio=None)
    if not RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]:
        return failed("ops/s", method, f"time does not scale with the work (ratio {ratio:.3g})", time_ratio=ratio)
    dt = lo_2k - lo_k
    if not dt > 0:
        return failed("ops/s", method, f"time difference {dt:.3g} s is not positive", time_ratio=ratio)
    value = (ops_2k - ops_k) / dt
    extra: dict[str, Any] = {"time_ratio": ratio}
    if clock_hz and sms:
        per = value / (clock_hz * sms)
        extra["ops_per_cycle_per_sm"] = per
        if per > max_per_cycle_per_sm:
            return failed("ops/s", method, f"{per:.3g} ops per cycle per SM is above any SM's issue rate", **extra)
    rates = [(ops_2k - ops_k) / (b - a) for a, b in zip(ts, t2s) if b > a]
    interval = (min(rates + [value]), max(rates + [value]))
    return entry(value, "ops/s", method, interval, n=len(rates), **extra)


def clock_hz_from(c1: float, s1: float, c2: float, s2: float) -> float | None:
    """SM clock from two runs of different length: (cycles2 - cycles1) / (seconds2 - seconds1).

    None when the difference is not positive or the clock is outside 100 MHz .. 10 GHz.
    """
    dc, ds = c2 - c1, s2 - s1
    if not (dc > 0 and ds > 0):
        return None
    hz = dc / ds
    return hz if 1e8 <= hz <= 1e10 else None


# ---------------------------------------------------------------------------------------------
# Running on the device
# ---------------------------------------------------------------------------------------------

class _Runner:
    """Compiled kernels and buffers of one measurement session."""

    def __init__(self, backend: Any, quick: bool, progress: Progress):
        self.backend, self.quick, self.progress = backend, quick, progress
        self.out = backend.alloc(16)
        self.host = np.zeros(2, np.int64)
        info = backend.info
        self.sms = int(info.compute_units)
        per_sm = int((info.extra or {}).get("max_threads_per_sm", 2048) or 2048)
        self.tp_blocks = self.sms * max(1, per_sm // TP_BLOCK)
        self.tp_threads = self.tp_blocks * TP_BLOCK
        mem_bytes = max(GLOBAL_WORDS * 8, self.tp_threads * CHAINS * 4) + 4096
        self.mem = backend.alloc(mem_bytes)
        self._combined: str | None = combined_source()
        self.engine = Engine()

    def say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    def kernel(self, op: str | None, name: str, unroll: int | None = None) -> Any:
        """A kernel from the one-module build of every source; per-op build if that one fails."""
        if self._combined is not None:
            try:
                return self.backend.compile(self._combined, name)
            except Exception as exc:  # noqa: BLE001 - one bad op must not stop the others
                self.say(f"ptx: the combined build failed, compiling per op ({str(exc).splitlines()[0]})")
                self._combined = None
        source = clock_source() if op is None else kernel_source(op, unroll)
        return self.backend.compile(source, name)

    def cycles(self, kernel: Any, threads: int, args: list) -> float:
        self.backend.launch(kernel, (threads,), (threads,), args)
        self.backend.finish()
        self.backend.from_device(self.out, self.host)
        return float(self.host[0])

    def seconds(self, kernel: Any, blocks: int, threads: int, args: list) -> float:
        """Event seconds of one timed launch (with the backend's launch hooks: the hold kernel)."""
        event = self.engine.launch_once(self.backend, kernel, (blocks * threads,), (threads,), args)
        self.backend.finish()
        return event.seconds()

    def alternate(self, runs: int, warmup: int, run: Callable[[int], float], lengths: Sequence[int]) -> dict[int, list]:
        """``runs`` rounds (after ``warmup``) of ``run(length)`` for each length in turn, through the engine:
        each length's values, paired with the other lengths' by position."""
        timings = Engine(fixed(runs, warmup)).interleave([lambda u=u: run(u) for u in lengths])
        return {u: list(t.device_s) for u, t in zip(lengths, timings)}


def _args(spec: OpSpec, runner: _Runner, iters: int) -> list:
    dtype = CTYPE[spec.ctype][2]
    sentinel = SENTINEL[spec.ctype]
    return [runner.out, runner.mem, dtype(spec.init), dtype(spec.b), dtype(spec.c),
            np.int32(1), np.int32(0), np.int32(iters), dtype(sentinel)]


def _measure_clock(runner: _Runner) -> dict[str, Any]:
    source = "clock64 cycles / CUDA event seconds"
    try:
        kernel = runner.kernel(None, "clock_probe")
        target = 0.002 if runner.quick else 0.01

        def run(iters: int) -> tuple[float, float]:
            args = [runner.out, np.float32(1.0), np.float32(1.0), np.int32(0), np.int32(iters), np.float32(-1.0)]
            event = runner.engine.launch_once(runner.backend, kernel, (1,), (1,), args)
            runner.backend.finish()
            runner.backend.from_device(runner.out, runner.host)
            return float(runner.host[0]), event.seconds()

        iters = 256
        run(iters)
        _, s = run(iters)
        while s < target / 8 and iters < 1 << 26:
            iters *= 4
            _, s = run(iters)
        iters = max(iters, int(iters * target / max(s, 1e-9)))
        def rate() -> float:
            hz = clock_hz_from(*run(iters), *run(2 * iters))
            return hz if hz else math.nan

        rates = [hz for hz in Engine(fixed(3)).sample(rate).device_s if math.isfinite(hz)]
        if not rates:
            return {"hz": None, "source": source, "reason": "clock64 / event time gave no plausible clock"}
        hz = float(np.median(rates))
        return {"hz": hz, "source": source, "interval": [min(rates), max(rates)], "n": len(rates),
                "reported_hz": (runner.backend.info.clock_mhz or 0) * 1e6 or None}
    except Exception as exc:  # noqa: BLE001
        return {"hz": None, "source": source, "reason": f"{type(exc).__name__}: {exc}"}


def _method(spec: OpSpec, iters: int, unroll: int, runner: _Runner) -> str:
    written = f"'{spec.opcode}'" + ("" if spec.opcode == spec.name else f" (for '{spec.name}')")
    text = (f"dependent chain of {unroll} and {2 * unroll} inline-PTX {written} per loop iteration x {iters} "
            f"iterations, {spec.lat_threads} thread(s), %clock64 around the loop; latency = (c(2k) - c(k)) / "
            f"(iters * k); throughput: {runner.tp_blocks} blocks x {TP_BLOCK} threads x {spec.chains} independent "
            "chains, (ops(2k) - ops(k)) / (t(2k) - t(k)) of CUDA event times")
    if spec.guard:
        text += "; each instance guarded by alternating always-true runtime predicates so ptxas cannot fold the chain"
    return text + (f"; {spec.note}" if spec.note else "")


def _measure_op(runner: _Runner, spec: OpSpec, clock_hz: float | None) -> dict[str, Any]:
    backend = runner.backend
    k = spec.unroll
    iters = QUICK_ITERS if runner.quick else ITERS
    reps = 3 if runner.quick else 5
    method = _method(spec, iters, k, runner)
    lat = {u: runner.kernel(spec.name, kernel_names(spec.name, u)["lat"], u) for u in (k, 2 * k)}
    tp = {u: runner.kernel(spec.name, kernel_names(spec.name, u)["tp"], u) for u in (k, 2 * k)}
    if spec.kind == "global":
        init = runner.kernel(spec.name, kernel_names(spec.name, k)["init"], k)
        backend.launch(init, (GLOBAL_WORDS,), (256,), [runner.mem, np.int32(GLOBAL_WORDS)])
        backend.finish()

    # latency: one chain, warm-up then the fastest of several runs
    args = _args(spec, runner, iters)
    cyc = runner.alternate(reps, 1, lambda u: runner.cycles(lat[u], spec.lat_threads, args), (k, 2 * k))
    lat_cycles = latency_from_cycles(cyc[k], cyc[2 * k], iters, k,
                                     method="(c(2k) - c(k)) / (iters * k) of %clock64 cycles, fastest of "
                                            f"{reps} runs; {method}")
    ratio = chain_ratio(cyc[k], cyc[2 * k])

    # throughput: the whole device, sized to run for about `target` seconds
    target = 0.001 if runner.quick else 0.004
    tp_iters = 2
    t = runner.seconds(tp[k], runner.tp_blocks, TP_BLOCK, _args(spec, runner, tp_iters))
    while t < target / 8 and tp_iters < 1 << 20:
        tp_iters *= 4
        t = runner.seconds(tp[k], runner.tp_blocks, TP_BLOCK, _args(spec, runner, tp_iters))
    tp_iters = max(tp_iters, min(1 << 22, int(tp_iters * target / max(t, 1e-9))))
    times = runner.alternate(2 if runner.quick else 3, 0,
                          lambda u: runner.seconds(tp[u], runner.tp_blocks, TP_BLOCK, _args(spec, runner, tp_iters)),
                          (k, 2 * k))
    # bar.sync counts block-wide barriers; every other op counts thread-level instructions
    units = runner.tp_blocks if spec.kind == "bar" else runner.tp_threads * spec.chains
    ops_k = float(units) * tp_iters * k
    tp_entry = throughput_from_times(times[k], times[2 * k], ops_k, 2 * ops_k, clock_hz, runner.sms,
                                     method=f"(ops(2k) - ops(k)) / (t(2k) - t(k)), {tp_iters} iterations; {method}")
    per = tp_entry.get("ops_per_cycle_per_sm")
    per_entry = (entry(per, "ops/cycle/SM", tp_entry["method"] + "; / (SM clock x SMs)")
                 if tp_entry["status"] == "ok" and per is not None
                 else failed("ops/cycle/SM", tp_entry["method"], tp_entry.get("reason") or "no measured SM clock"))
    result = {
        "latency_cycles": lat_cycles,
        "latency_s": latency_seconds(lat_cycles, clock_hz),
        "throughput_ops_per_s": tp_entry,
        "throughput_ops_per_cycle_per_sm": per_entry,
        "chain_ratio": ratio,
        "method": method,
        "raw": {"latency_cycles_k": cyc[k], "latency_cycles_2k": cyc[2 * k], "iters": iters, "k": k,
                "throughput_s_k": times[k], "throughput_s_2k": times[2 * k], "throughput_iters": tp_iters},
    }
    result["status"] = "ok" if lat_cycles["status"] == "ok" else "failed"
    result["method_version"] = method_version_of(f"instructions.{spec.name}")
    return result


def _failed_op(spec: OpSpec, reason: str) -> dict[str, Any]:
    method = f"dependent chain of inline-PTX '{spec.name}'"
    return {"latency_cycles": failed("cycles", method, reason), "latency_s": failed("s", method, reason),
            "throughput_ops_per_s": failed("ops/s", method, reason),
            "throughput_ops_per_cycle_per_sm": failed("ops/cycle/SM", method, reason),
            "chain_ratio": None, "method": method, "status": "failed"}


def measure(backend: Any, quick: bool = False, progress: Progress = None,
            ops: Sequence[str] | None = None) -> dict[str, Any]:
    """Latency and throughput of every opcode in :data:`OPS` (or ``ops``) on a CUDA device.

    Returns ``{"clock": {"hz", "source", ...}, "instructions": {op: {...}}}``; a measurement that
    fails (or a backend that is not CUDA) gives ``failed`` entries with a reason, never numbers.
    """
    names = list(ops) if ops is not None else list(OPS)
    unknown = [n for n in names if n not in OPS]
    if unknown:
        raise KeyError(f"unknown PTX ops: {unknown}")
    if getattr(backend, "kind", None) != "cuda":
        reason = "inline PTX needs the CUDA backend"
        return {"clock": {"hz": None, "source": "clock64 cycles / CUDA event seconds", "reason": reason},
                "instructions": {n: _failed_op(OPS[n], reason) for n in names}}
    runner = _Runner(backend, quick, progress)
    t0 = time.perf_counter()
    runner.say(f"ptx: compiling {len(all_sources())} sources and measuring the SM clock")
    clock = _measure_clock(runner)
    if clock["hz"]:
        runner.say(f"ptx: SM clock {clock['hz'] / 1e6:.0f} MHz (clock64 / CUDA events)")
    results: dict[str, Any] = {}
    for i, name in enumerate(names):
        spec = OPS[name]
        try:
            results[name] = _measure_op(runner, spec, clock["hz"])
        except Exception as exc:  # noqa: BLE001 - record the failure, go on with the next op
            results[name] = _failed_op(spec, f"{type(exc).__name__}: {exc}")
        lc = results[name]["latency_cycles"]
        shown = f"{lc['value']:.2f} cycles" if lc["status"] == "ok" else f"failed: {lc['reason']}"
        runner.say(f"ptx {i + 1}/{len(names)} {name}: {shown}")
    runner.say(f"ptx: {len(names)} ops in {time.perf_counter() - t0:.0f} s")
    return {"clock": clock, "instructions": results}
