"""Per-instruction latency and throughput through OpenCL C (any OpenCL device, PoCL included).

Latency: one work-item runs ITERS iterations of a dependent chain of k operations
(unrolled in the source, each consuming the previous result, the result kept live
behind a never-true store). The chain is timed at k and 2k: latency =
(T(2k) - T(k)) / (ITERS * k), which cancels launch and loop overhead, and the ratio
T(2k) / T(k) must be near 2 or the measurement fails (folded or dead code). A latency
under one clock cycle fails. Throughput: many work-items, each with 8 independent chains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.measure.engine import time_launch
from gpuprofiler.measure.policy import TimingPolicy, bench
from gpuprofiler.microbench.common import Progress, alternating_times, say
from gpuprofiler.profile.file import entry, failed

RATIO_RANGE = (1.6, 2.4)


@dataclass(frozen=True)
class Op:
    """A chain step: ``step`` uses x (and y), a, b; ``ops`` operations per step."""

    ctype: str
    step: str
    init: tuple[str, str] = ("1.5f", "1.25f")
    a: float = 1.0
    b: float = 0.0
    ops: int = 1
    note: str = ""


OPS: dict[str, Op] = {
    "float_add": Op("float", "x = x + a;", a=1e-7),
    "float_mul": Op("float", "x = x * a;", a=1.0000001),
    "float_mad": Op("float", "x = mad(x, a, b);", a=0.999, b=0.001),
    "float_fma": Op("float", "x = fma(x, a, b);", a=0.999, b=0.001),
    "float_div": Op("float", "x = a / x;", a=1.0),
    "float_sqrt": Op("float", "x = sqrt(x);"),
    "native_sin": Op("float", "x = native_sin(x);"),
    "native_exp": Op("float", "x = native_exp(-x);", note="chain includes one negation per exp"),
    "native_recip": Op("float", "x = native_recip(x + b);", note="chain includes one add per recip "
                       "(recip(recip(x)) alone is folded away by the compiler)"),
    "double_add": Op("double", "x = x + a;", ("1.5", "1.25"), a=1e-9),
    "double_mul": Op("double", "x = x * a;", ("1.5", "1.25"), a=1.000000001),
    "double_fma": Op("double", "x = fma(x, a, b);", ("1.5", "1.25"), a=0.999, b=0.001),
    "double_div": Op("double", "x = a / x;", ("1.5", "1.25"), a=1.0),
    "int_add": Op("int", "x = x + y; y = y + x;", ("3", "5"), ops=2),
    "int_mul": Op("int", "x = x * y; y = y * x;", ("3", "5"), ops=2),
    "int_mad24": Op("int", "x = mad24(x, y, (int)a); y = mad24(y, x, (int)a);", ("3", "5"), a=7, ops=2),
    # an atomic read-modify-write of global memory: the chain's one work-item alone (its latency); the throughput
    # kernel's work-items all on the same two words (contended: the rate at which one cache line takes them)
    "atomic_add": Op("int", "x = atomic_add(out + (x & 1), 1) + x;", ("3", "5"),
                     note="chain includes one add per atomic (its address depends on the previous result)"),
}


def latency_source(name: str, op: Op, unroll: int, kernel: str = "lat") -> str:
    steps = "\n        ".join([op.step] * (unroll // op.ops))
    pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if op.ctype == "double" else ""
    t = op.ctype
    return f"""{pragma}
__kernel void {kernel}(__global {t} *out, int iters, {t} a, {t} b, {t} never) {{
    {t} x = {op.init[0]}, y = {op.init[1]};
    for (int i = 0; i < iters; ++i) {{
        {steps}
    }}
    if (x == never) out[0] = x + y;
}}
"""


def throughput_source(name: str, op: Op, unroll: int, streams: int = 8, kernel: str = "thr") -> str:
    pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if op.ctype == "double" else ""
    t = op.ctype
    decl = ", ".join(f"x{s} = {op.init[0]} + ({t})({s}), y{s} = {op.init[1]}" for s in range(streams))
    one = " ".join(re.sub(r"\b([xy])\b", rf"\g<1>{s}", op.step) for s in range(streams))
    body = "\n        ".join([one] * (unroll // op.ops))
    total = " + ".join(f"x{s} + y{s}" for s in range(streams))
    return f"""{pragma}
__kernel void {kernel}(__global {t} *out, int iters, {t} a, {t} b, {t} never) {{
    {t} {decl};
    for (int i = 0; i < iters; ++i) {{
        {body}
    }}
    {t} s = {total};
    if (s == never) out[get_global_id(0)] = s;
}}
"""


def latency_from_times(t_k: float, t_2k: float, iters: int, k: int, clock_hz: float | None,
                       method: str, interval_k=None, interval_2k=None) -> dict[str, Any]:
    """Entries for one op from the chain times at k and 2k; fails on a bad ratio or a sub-cycle value."""
    ratio = t_2k / t_k if t_k > 0 else float("inf")
    out: dict[str, Any] = {"chain_ratio": ratio, "method": method}
    lat = (t_2k - t_k) / (iters * k)
    if not RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]:
        reason = f"chain does not scale (T(2k)/T(k) = {ratio:.2f}): dead code or loop overhead"
        out["latency_s"] = failed("s", method, reason, measured_s=lat)
        out["status"] = "failed"
        return out
    floor = 1.0 / clock_hz if clock_hz else 0.0
    if lat <= floor:
        reason = f"latency {lat:.3g} s is below one clock cycle ({floor:.3g} s): a measurement artefact"
        out["latency_s"] = failed("s", method, reason, measured_s=lat)
        out["status"] = "failed"
        return out
    interval = None
    if interval_k and interval_2k:
        interval = ((interval_2k[0] - interval_k[1]) / (iters * k), (interval_2k[1] - interval_k[0]) / (iters * k))
    out["latency_s"] = entry(lat, "s", method, interval)
    if clock_hz:
        out["latency_cycles"] = entry(lat * clock_hz, "cycles", method + "; cycles = seconds x clock",
                                      tuple(v * clock_hz for v in interval) if interval else None)
    out["status"] = "ok"
    return out


LATENCY_UNROLL = 16  # ops of a dependent chain per loop iteration at k (2k: twice as many). The program of every
# op's chains built in 1.18 s at 32 and 0.28 s at 16 on a Zen 4 VM's Debian PoCL 3.1, and every op's latency came
# out the same at both (within 1-5%, two rounds): the loop's own instructions overlap the dependent chain
THROUGHPUT_UNROLL = 8  # ops of each of the 8 independent chains per loop iteration of a throughput kernel
# (64 per iteration: a core overlaps the loop's own two instructions with them). PoCL compiles a work-group
# function of every kernel at its first launch, and at 32 the 16 throughput kernels took 4.0 s of a cold
# calibration on a Zen 4 VM's Debian PoCL 3.1, at 8 1.3 s; the ops per second were alike at 8, 16 and 32 (within
# the runs' spread), except native_exp, whose 256 inlined calls per iteration ran at 0.47 Gop/s against 0.75-0.80.


def program_source(unroll: int, double: bool) -> str:
    """Every op's chain kernels (``lat_<op>_<k>`` at k and 2k) and throughput kernel (``thr_<op>``, unrolled
    :data:`THROUGHPUT_UNROLL`) in one program: one compile instead of three per op (on PoCL each compile costs
    ~0.1 s on a fresh machine)."""
    parts = ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable" if double else ""]
    for name, op in OPS.items():
        if op.ctype == "double" and not double:
            continue
        for k in (unroll, 2 * unroll):
            parts.append(latency_source(name, op, k, f"lat_{name}_{k}").split("\n", 1)[1])
        parts.append(throughput_source(name, op, THROUGHPUT_UNROLL, kernel=f"thr_{name}").split("\n", 1)[1])
    return "\n".join(parts)


def compile_op(backend: Any, name: str, kind: str, unroll: int, k: int | None = None) -> Any:
    """The ``lat`` (at chain length ``k``) or ``thr`` kernel of op ``name``, from the one program of every op;
    alone where that program does not build (an op the device's compiler refuses fails only itself)."""
    has_double = bool(backend.info.extra.get("double", False))
    op = OPS[name]
    try:
        return backend.compile(program_source(unroll, has_double), f"lat_{name}_{k}" if kind == "lat" else f"thr_{name}")
    except UserError:
        source = latency_source(name, op, k) if kind == "lat" else throughput_source(name, op, THROUGHPUT_UNROLL)
        return backend.compile(source, kind)


def chain_times(backend: Any, name: str, iters: int, unroll: int, policy: TimingPolicy, out_buf: Any):
    """Event timings of op ``name``'s dependent chain at k = unroll and 2k, launched in alternation."""
    op = OPS[name]
    np_t = {"float": np.float32, "double": np.float64, "int": np.int32}[op.ctype]
    args = [out_buf, np.int32(iters), np_t(op.a), np_t(op.b), np_t(-12345)]
    kernels = [compile_op(backend, name, "lat", unroll, k) for k in (unroll, 2 * unroll)]
    return alternating_times(backend, kernels, (1,), (1,), args, policy), args


def cpu_clock(backend: Any, quick: bool = False) -> dict[str, Any]:
    """The core clock measured on the device: a dependent 32-bit integer add chain runs at 1 add per cycle on
    x86 and ARM cores, so clock = adds / second. Virtual machines often report only the nominal clock."""
    out_buf = backend.alloc(64)
    iters, unroll = (16384 if quick else 65536), LATENCY_UNROLL
    times, _ = chain_times(backend, "int_add", iters, unroll, bench(False, 0.2),
                           out_buf)
    per_add = (times[1].median - times[0].median) / (iters * unroll)
    return {"hz": 1.0 / per_add, "source": "dependent int add chain on the device at 1 add/cycle "
            f"({iters} x {unroll} and {2 * unroll} adds)", "chain_ratio": times[1].median / times[0].median}


def measure(backend: Any, quick: bool = False, progress: Progress = None,
            clock_hz: float | None = None, clock_reference: str | None = None) -> dict[str, Any]:
    """Every op's latency and throughput. ``clock_reference`` names the op that defined the clock
    (``int_add`` on CPUs): its cycles are 1 by definition and it is not checked against itself."""
    info = backend.info
    unroll = LATENCY_UNROLL
    iters = 4096 if quick else 32768
    policy = bench(quick, 0.3, 0.03)
    out_buf = backend.alloc(1 << 20)
    has_double = bool(info.extra.get("double", False))
    result: dict[str, Any] = {}
    say(progress, f"instructions: {len(OPS)} dependent chains at k={unroll} and {2 * unroll}, then throughput")
    threads = max(info.compute_units, 1) * (256 if info.type == "cpu" else 2048)
    blocks: dict[str, list[dict[str, Any]]] = {"barrier": []}
    if info.type == "cpu":
        blocks["barrier_scalar"] = []

    def barrier_block() -> None:
        for key in blocks:
            blocks[key].append(_barrier(backend, policy, clock_hz, out_buf, quick,
                                        SCALAR_STEP if key == "barrier_scalar" else VECTOR_STEP))

    spread = {0, len(OPS) // 2}
    for i, (name, op) in enumerate(OPS.items()):
        if i in spread:
            barrier_block()
        if op.ctype == "double" and not has_double:
            result[name] = {"status": "skipped", "reason": "device has no double precision"}
            continue
        times, args = chain_times(backend, name, iters, unroll, policy, out_buf)
        method = (f"one work-item, {iters} iterations of a dependent chain `{op.step}` unrolled {unroll} and "
                  f"{2 * unroll} ops; (T(2k) - T(k)) / (iters * k){'; ' + op.note if op.note else ''}")
        reference = name == clock_reference
        res = latency_from_times(times[0].median, times[1].median, iters, unroll, None if reference else clock_hz,
                                 method, (times[0].ci_low, times[0].ci_high), (times[1].ci_low, times[1].ci_high))
        if reference and res["status"] == "ok":
            res["latency_cycles"] = entry(1.0, "cycles", "the clock reference: 1 cycle by definition")
        kernel = compile_op(backend, name, "thr", unroll)
        t_iters = max(8, iters // 128) * (unroll // THROUGHPUT_UNROLL)
        local = (min(256, info.max_work_group_size),)
        t = time_launch(backend, kernel, (threads,), local, [out_buf, np.int32(t_iters), *args[2:]], policy).device
        ops = threads * t_iters * THROUGHPUT_UNROLL * 8
        res["throughput_ops_per_s"] = entry(ops / t.median, "op/s", f"{threads} work-items x 8 independent chains "
                                            f"unrolled {THROUGHPUT_UNROLL}; ops / median event time",
                                            (ops / t.ci_high, ops / t.ci_low))
        result[name] = res
        cyc = res.get("latency_cycles", {}).get("value") if res["status"] == "ok" else None
        say(progress, f"instructions: {name}: " + (f"{cyc:.2f} cycles" if cyc else res["latency_s"].get("reason", "")))
    result["local_load"] = _local_load(backend, policy, clock_hz, out_buf)
    while len(blocks["barrier"]) < BARRIER_BLOCKS:
        barrier_block()
    for key, found in blocks.items():
        result[key] = fastest_block(found)
    return result


LOCAL_LOAD = """
__kernel void lat(__global const uint *next, int iters, __global uint *out, uint never) {
    __local uint buf[1024];
    for (int i = get_local_id(0); i < 1024; i += get_local_size(0)) buf[i] = next[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    uint x = 0;
    for (int i = 0; i < iters; ++i) {
        CHAIN
    }
    if (x == never) out[0] = x;
}
"""


def _local_load(backend, policy, clock_hz, out_buf) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    order = rng.permutation(1024).astype(np.uint32)
    nxt = np.zeros(1024, np.uint32)
    nxt[order] = np.roll(order, -1)
    buf, _ = backend.to_device(nxt)
    iters, k = 2048, 32
    source = "\n".join(LOCAL_LOAD.replace("void lat(", f"void lat_{kk}(").replace("CHAIN", " ".join(["x = buf[x];"] * kk))
                       for kk in (k, 2 * k))
    kernels = [backend.compile(source, f"lat_{kk}") for kk in (k, 2 * k)]
    times = alternating_times(backend, kernels, (1,), (1,), [buf, np.int32(iters), out_buf, np.uint32(2**32 - 1)],
                              policy)
    return latency_from_times(times[0].median, times[1].median, iters, k, clock_hz,
                              "one work-item chases a random cycle of 1024 words in local memory, unrolled k and 2k")


BARRIER = """
__kernel void bar(__global float *out, int iters, float never) {
    __local float buf[LSIZE];
    int l = get_local_id(0);
    float x = (float)l;
    buf[l] = x;
    for (int i = 0; i < iters; ++i) {
        CHAIN
    }
    if (x + buf[l] == never) out[l] = x;
}
"""


VECTOR_STEP = "barrier(CLK_LOCAL_MEM_FENCE); x += buf[(l + 1) % LSIZE]; barrier(CLK_LOCAL_MEM_FENCE); buf[l] = x;"
# each region updates the local array in place at another work-item's element: a CPU's compiler cannot prove the
# work-items independent and runs the region one work-item at a time (a tree reduction's step; 1.1 ns per
# work-item on a Zen 4 VM's PoCL, against 0.3-0.4 ns for the regions above, which it runs in vector lanes)
SCALAR_STEP = ("barrier(CLK_LOCAL_MEM_FENCE); buf[l] += buf[(l + LSIZE / 2) % LSIZE]; barrier(CLK_LOCAL_MEM_FENCE); "
               "buf[l] += buf[(l + 1) % LSIZE];")


def barrier_source() -> str:
    """The barrier chains, ``bar_<vector|scalar>_<steps>`` at k and 2k steps, in one program (one build)."""
    return "\n".join(BARRIER.replace("void bar(", f"void bar_{kind}_{kk}(").replace("CHAIN", " ".join([step] * kk))
                     for kind, step in (("vector", VECTOR_STEP), ("scalar", SCALAR_STEP))
                     for kk in (BARRIER_STEPS[kind], 2 * BARRIER_STEPS[kind]))


BARRIER_BLOCKS = 3  # the barriers are timed in this many blocks spread over the instructions section
# k of each step's chains of k and 2k steps. PoCL compiles a work-group function at a kernel's first launch, in a
# time that grows faster than its barriers: on a Zen 4 VM's pip PoCL 3.0 a loop of 2k steps of two barriers took
# 5.4 s (vector step) and 8.8 s (scalar) at k = 4; the kernels of k = 1, 2 and 4 steps 0.25, 0.59 and 1.39 s
# (vector) and 0.38, 1.06 and 2.07 s (scalar). Per barrier, k = 1 read the scalar step as k = 2 did (32.1-32.2 ns,
# six blocks each in alternation) and the vector step 8% slower (18.4 ns against 17.0-17.1), so the scalar chains
# are timed at k = 1
BARRIER_STEPS = {"vector": 2, "scalar": 1}


def _barrier(backend, policy, clock_hz, out_buf, quick, step: str = VECTOR_STEP) -> dict[str, Any]:
    """One block's time per barrier of one work-group, from chains of k and 2k steps of two barriers each, timed
    in alternation, each length's figure its fastest runs (the 10th percentile, a kernel's modelling figure)."""
    lsize = min(64, backend.info.max_work_group_size)
    kind = "scalar" if step == SCALAR_STEP else "vector"
    k = BARRIER_STEPS[kind]
    iters = (1024 if quick else 4096) // k  # the same barriers per launch at any k
    kernels = [backend.compile(barrier_source(), f"bar_{kind}_{kk}", {"LSIZE": lsize}) for kk in (k, 2 * k)]
    t_k, t_2k = alternating_times(backend, kernels, (lsize,), (lsize,), [out_buf, np.int32(iters), np.float32(-1)],
                                  policy)
    # each step holds two barriers
    res = latency_from_times(t_k.model, t_2k.model, iters, 2 * k, clock_hz,
                             f"one work-group of {lsize}; steps of " + (
                                 "barrier, local read, barrier, local write" if step == VECTOR_STEP else
                                 "barrier, a local element updated in place from another's (each region one "
                                 "work-item at a time on a CPU)") + f"; time per barrier from k = {k} and 2k steps, each "
                             f"its fastest runs (the 10th percentile); the fastest of {BARRIER_BLOCKS} blocks spread "
                             "over the instructions section",
                             (t_k.model_ci_low, t_k.model_ci_high), (t_2k.model_ci_low, t_2k.model_ci_high))
    res["work_group"] = lsize
    return res


def fastest_block(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The block with the least time per barrier among those that measured one (else the first), with every
    block's figure as ``blocks_s``. A shared machine's slow spells last a fraction of a second to seconds and
    slow a whole block: on a Zen 4 VM's PoCL one block in nine read 108 ns per scalar barrier (its runs' fastest
    tenth too) where the others read 69-70."""
    good = [b for b in blocks if b["status"] == "ok"]
    res = dict(min(good, key=lambda b: b["latency_s"]["value"]) if good else blocks[0])
    res["blocks_s"] = [b["latency_s"]["value"] if b["status"] == "ok" else None for b in blocks]
    return res
