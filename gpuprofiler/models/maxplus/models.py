"""The max-plus kernel models as functions of (kernel graph, profile, N, n): naive, ops, serial, cache.

* naive (sections 6-7): arcs carry the read time t and the write time T; ceil(N/n) batches.
* ops (section 8): plus each operation's latency tau as a self-loop on its node.
* serial (section 9): of n work-items running at once the slowest gets its j-th read at
  t + ((n-1)*r + j-1)*dt (r reads per work-item; the paper's Z3 row t + (2n-2)dt, t + (2n-1)dt) and
  its write at T + (n-1)*dT.
* cache (section 9, caching): the first read of an address is serialized as above; a repeated read
  (the same address, or one a neighbouring work-item reads: same array, index differing by a constant)
  costs the cached-read time t_c and does not occupy the memory.

Batches of n work-items run one after another in the paper ("sequential": ceil(N/n) times the batch).
Real devices overlap the batches: "pipelined" (the default for serial and cache) charges every
batch but the last only for the time it holds the serialized memory (or its operation chain, when
that is longer), and the last batch in full: (ceil(N/n) - 1) * max(bus, ops) + batch.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import Prediction
from gpuprofiler.models.maxplus.graph import (
    Arc,
    Kernel,
    KernelGraph,
    graph_time,
    height,
    levels,
)
from gpuprofiler.models.maxplus.symbolic import EPS, N, T, dT, dt, fmt, n, t
from gpuprofiler.profile.hardware import Figure, view

MODELS = ("naive", "ops", "serial", "cache")
SYMBOLIC_ARCS = 400  # larger graphs get numbers only: sympy's Max over thousands of paths is slow
BATCHES = ("sequential", "pipelined")

# operation -> profile instruction keys tried in turn (OpenCL microbenchmark names, then PTX opcodes)
OP_KEYS = {
    ("add", "float"): ("float_add", "add.f32"), ("mul", "float"): ("float_mul", "mul.f32"),
    ("fma", "float"): ("float_fma", "fma.rn.f32"), ("div", "float"): ("float_div", "div.rn.f32"),
    ("sqrt", "float"): ("float_sqrt", "sqrt.approx.f32"), ("exp", "float"): ("native_exp", "ex2.approx.f32"),
    ("sin", "float"): ("native_sin", "sin.approx.f32"), ("recip", "float"): ("native_recip", "rcp.approx.f32"),
    ("add", "double"): ("double_add", "add.f64"), ("mul", "double"): ("double_mul", "mul.f64"),
    ("fma", "double"): ("double_fma", "fma.rn.f64"), ("div", "double"): ("double_div", "div.rn.f64"),
    ("add", "int"): ("int_add", "add.s32"), ("mul", "int"): ("int_mul", "mul.lo.s32"),
    ("fma", "int"): ("int_mad24", "mad.lo.s32"), ("div", "int"): ("int_mul", "div.s32"),
}
OP_ALIASES = {"sub": "add", "min": "add", "max": "add", "fabs": "add", "neg": "add", "cmp": "add",
              "mad": "fma", "rsqrt": "sqrt", "log": "exp", "cos": "sin", "shift": "add", "and": "add",
              "or": "add", "xor": "add", "rem": "div", "select": "add"}


def op_class(op: str) -> str:
    return OP_ALIASES.get(op, op)


@dataclass
class Parameters:
    """Numeric values of the model's symbols, each with where it came from, and the 95% interval of those the
    profile measured with one (in the symbol's own unit: a bandwidth's interval is inverted for ``dt``)."""

    values: dict[str, float]
    n: int
    sources: dict[str, str] = field(default_factory=dict)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    def value(self, name: str) -> float:
        if name not in self.values:
            raise UserError(f"the profile gives no value for {name}: {self.sources.get(name, 'not measured')}")
        return self.values[name]

    def at(self, end: str) -> "Parameters":
        """The same parameters with every measured value at the ``low`` or ``high`` end of its interval."""
        k = {"low": 0, "high": 1}[end]
        values = {name: self.bounds[name][k] if name in self.bounds else v for name, v in self.values.items()}
        return Parameters(values, self.n, self.sources, self.bounds)


def concurrency(profile) -> tuple[int, str]:
    """n, the work-items running at once: the profile's Little's-law figure, rounded, at least 1."""
    v = view(profile).figure("concurrency.work_items").value
    if v is None:
        raise UserError("the profile has no concurrency.work_items (run `gpuprofiler calibrate`) and no --n was given")
    return max(1, round(v)), (f"concurrency.work_items = {v:.3g} (Little's law: max over n of n*T(1)/T(n) for "
                              "a fixed dependent FMA chain per work-item), rounded")


def parameters(profile, kernel: Kernel | None = None, n_override: int | None = None,
               line_bytes: int | None = None) -> Parameters:
    """The symbols' values from a hardware profile (memory times, bandwidths, latencies, n)."""
    hw = view(profile)
    vals: dict[str, float] = {}
    src: dict[str, str] = {}
    bounds: dict[str, tuple[float, float]] = {}

    def keep(name: str, fig: Figure, why: str = "", invert: bool = False) -> bool:
        if not fig.ok or (invert and not fig.value > 0):
            src[name] = fig.source
            return False
        lo, hi = fig.bounds()
        vals[name] = 1.0 / fig.value if invert else fig.value
        if fig.interval is not None and lo > 0:
            bounds[name] = (1.0 / hi, 1.0 / lo) if invert else (lo, hi)
        src[name] = fig.source.removeprefix("profile ") + (f" ({why})" if why else "")
        return True

    keep("t", hw.figure("memory.read_s"), "cold read of a new line, one work-item")
    keep("T", hw.figure("memory.write_s"), "write to a cold line, one work-item")
    keep("t_c", hw.figure("memory.cached_read_s"), "repeated read of a cached address")
    keep("t_l", hw.figure("local_memory.latency_s"))
    keep("dt_gather", hw.figure("memory.read_step_s"),
         "slope of the read time over concurrent work-items, scattered lines")
    keep("dT_gather", hw.figure("memory.write_step_s"),
         "slope of the write time over concurrent work-items, scattered lines")
    gpu = hw.kind == "gpu"
    line = line_bytes or (32 if gpu else 64)
    why = "--line-bytes" if line_bytes else ("32-byte sectors on a GPU" if gpu else "64-byte cache lines on a CPU")
    src["line_bytes"] = f"{line} B ({why})"
    vals["line_bytes"] = float(line)
    for kind, key in (("dt", "bandwidth.read_Bps"), ("dT", "bandwidth.write_Bps")):
        fig = hw.figure(key)
        if keep(f"{kind}_per_byte", fig, invert=True):
            del src[f"{kind}_per_byte"]  # named by the steps it makes
            src[kind] = f"element bytes / {key} ({fig.value / 1e9:.3g} GB/s) for unit-stride accesses"
            src[f"{kind}_line"] = f"{line} B / {key}: each access fetches its own line"
    if n_override is not None:
        if n_override < 1:
            raise UserError("--n must be at least 1")
        n_val, how = n_override, "--n"
    else:
        n_val, how = concurrency(profile)
    src["n"] = how
    if kernel is not None:
        op_name = op_names(kernel)
        for g in kernel.fragments:
            for info in g.loops.values():
                name = op_name(info)
                if name in vals:
                    continue
                keys = OP_KEYS.get((op_class(info["op"]), info.get("dtype", "float")), ())
                theta = "theta" + name[3:]
                for key in keys:
                    if not hw.instruction(key, "latency_s").ok:
                        continue
                    keep(name, hw.instruction(key, "latency_s"))
                    if keep(theta, hw.instruction(key, "throughput_ops_per_s"), invert=True):
                        src[theta] = f"1 / instructions.{key}.throughput_ops_per_s (device-wide)"
                    else:
                        vals[theta] = vals[name]
                        if name in bounds:
                            bounds[theta] = bounds[name]
                        src[theta] = f"no throughput for {key}: its latency, as if operations did not overlap"
                    break
                else:
                    src[name] = f"no measured latency for {info['op']} ({', '.join(keys) or 'unknown operation'})"
    return Parameters(vals, n_val, src, bounds)


def op_names(kernel: Kernel) -> Callable[[dict], str]:
    """Names of the operations' latency symbols: ``tau`` when the kernel has one kind of operation, else
    ``tau_<op>`` (``tau_mul``, ``tau_dadd``). The kinds are collected once per kernel."""
    kinds = {(op_class(i["op"]), i.get("dtype", "float")) for g in kernel.fragments for i in g.loops.values()}

    def name(info: dict) -> str:
        if len(kinds) <= 1:
            return "tau"
        prefix = {"float": "", "double": "d", "int": "i"}[info.get("dtype", "float")]
        return f"tau_{prefix}{op_class(info['op'])}"

    return name


# ---- symbolic arc times -------------------------------------------------------------------------

def _step_symbol(kind: str, info: dict) -> sympy.Symbol:
    """The serialization step of one access: dt (unit stride), dt_line (strided) or dt_gather."""
    base = "dt" if kind == "read" else "dT"
    pattern = info.get("pattern", "unit")
    if pattern in ("unit", "uniform"):
        return dt if base == "dt" else dT
    if pattern == "strided":
        return sympy.Symbol(f"{base}_line", positive=True)
    return sympy.Symbol(f"{base}_gather", positive=True)


def _counted(counts: Counter):
    """sum(count * symbol) as one sympy expression."""
    return sympy.Add(*[c * sym for sym, c in counts.items() if c])


def _is_bus_read(arc: Arc, model: str) -> bool:
    return arc.kind == "read" and not (model == "cache" and not arc.info.get("first", True))


def _on_bus(arc: Arc, model: str) -> bool:
    """Whether the access occupies the serialized global memory under ``model``."""
    return _is_bus_read(arc, model) or arc.kind == "write"


def _bus_ids(g: KernelGraph, model: str) -> tuple[list[int], list[int]]:
    """The arcs that queue on the serialized memory, reads and writes, each in access order."""
    reads = sorted((i for i, a in enumerate(g.arcs) if _is_bus_read(a, model)),
                   key=lambda i: g.arcs[i].info.get("order", i))
    writes = sorted((i for i, a in enumerate(g.arcs) if a.kind == "write"),
                    key=lambda i: g.arcs[i].info.get("order", i))
    return reads, writes


def arc_symbols(g: KernelGraph, model: str) -> dict[int, Any]:
    """Each arc's symbolic time under ``model``, by index in ``g.arcs``."""
    sym: dict[int, Any] = {}
    if model in ("serial", "cache"):
        for ids, base in zip(_bus_ids(g, model), (t, T)):
            steps = [_step_symbol(g.arcs[i].kind, g.arcs[i].info) for i in ids]
            total = _counted(Counter(steps))
            before: Counter = Counter()
            for j, i in enumerate(ids):  # prefix sums kept as counts per step symbol: O(arcs), not O(arcs^2)
                sym[i] = base + (n - 1) * total + _counted(before)
                before[steps[j]] += 1
    tc, tl = sympy.Symbol("t_c", positive=True), sympy.Symbol("t_l", positive=True)
    for i, a in enumerate(g.arcs):
        if i in sym:
            continue
        if a.kind == "read":
            sym[i] = tc if (model == "cache" and not a.info.get("first", True)) else t
        elif a.kind == "write":
            sym[i] = T
        elif a.kind in ("local_read", "local_write"):
            sym[i] = tl
        elif a.kind == "time":
            sym[i] = sympy.Symbol(a.info["symbol"], positive=True)
        else:
            sym[i] = sympy.S.Zero
    return sym


def arc_values(g: KernelGraph, model: str, sym: dict[int, Any], ev: Evaluator) -> list[float]:
    """Each arc's time in seconds (each access's step from its own element size and stride)."""
    val: dict[int, float] = {}
    if model in ("serial", "cache"):
        for ids, base in zip(_bus_ids(g, model), ("t", "T")):
            secs = np.array([ev.step(g.arcs[i]) for i in ids])
            prefix = np.concatenate([[0.0], np.cumsum(secs)[:-1]]) if len(ids) else secs
            base_s = ev.params.value(base)
            for j, i in enumerate(ids):
                val[i] = base_s + (ev.params.n - 1) * float(secs.sum()) + float(prefix[j])
    return [val[i] if i in val else ev.value(sym[i]) for i in range(len(g.arcs))]


def arc_times(g: KernelGraph, model: str, ev: Evaluator | None = None) -> tuple[dict[int, Any], list[float]]:
    """Each arc's symbolic time under ``model`` (by index in ``g.arcs``) and, given an evaluator, its value
    in seconds."""
    sym = arc_symbols(g, model)
    return sym, arc_values(g, model, sym, ev) if ev is not None else []


def loop_symbols(g: KernelGraph, model: str, kernel: Kernel) -> dict[int, Any]:
    """Each operation node's latency symbol (none in the naive model, which counts data moves only)."""
    if model == "naive":
        return {}
    op_name = op_names(kernel)
    return {node: sympy.Symbol(op_name(info), positive=True) for node, info in g.loops.items()}


def bus_symbol(g: KernelGraph, model: str) -> Any:
    """Time one batch of n work-items holds the serialized memory: n * (sum of its steps)."""
    return n * sum((_step_symbol(a.kind, a.info) for a in g.arcs if _on_bus(a, model)), sympy.S.Zero)


# ---- numbers -----------------------------------------------------------------------------------

class Evaluator:
    """Numeric values of symbolic times with the profile's parameters, cached per expression."""

    def __init__(self, params: Parameters):
        self.params = params
        self.cache: dict[Any, float] = {}

    def step(self, arc: Arc) -> float:
        """The serialization step of one access, in seconds."""
        return self._step(_step_symbol(arc.kind, arc.info), arc.info.get("elem_bytes", 4), arc.info.get("stride", 1))

    def _step(self, sym: sympy.Symbol, elem_bytes: float, stride: float) -> float:
        name = str(sym)
        per_byte = self.params.value(name[:2] + "_per_byte")
        if name in ("dt", "dT"):
            return elem_bytes * per_byte
        if name.endswith("_line"):
            return min(max(stride, 1) * elem_bytes, self.params.value("line_bytes")) * per_byte
        return self.params.value(name)

    def value(self, expr) -> float:
        """The value of an expression without serialization steps (t, T, t_c, t_l, tau...)."""
        if expr not in self.cache:
            subs = {}
            for sym in expr.free_symbols:
                subs[sym] = self.params.n if sym == n else self.params.value(str(sym))
            self.cache[expr] = float(expr.subs(subs)) if subs else float(expr)
        return self.cache[expr]


def _times(kernel: Kernel, model: str, params: Parameters, parts: list) -> tuple[float, float, float]:
    """One batch's time, the time it holds the serialized memory and its operations' issue time, in seconds."""
    ev = Evaluator(params)
    batch_s = bus_s = ops_s = 0.0
    for g, syms, loops in parts:
        loop_vals = {node: ev.value(sym) for node, sym in loops.items()}
        batch_s += max(graph_time(g, arc_values(g, model, syms, ev), loop_vals), 0.0)
        if model in ("serial", "cache"):
            bus_s += params.n * sum(ev.step(a) for a in g.arcs if _on_bus(a, model))
        if loops:
            ops_s += params.n * sum(ev.value(sympy.Symbol("theta" + str(s)[3:], positive=True)) for s in loops.values())
    return batch_s, bus_s, ops_s


def _total(batches: str, nb: int, batch_s: float, bus_s: float, ops_s: float) -> float:
    return nb * batch_s if batches == "sequential" else (nb - 1) * max(bus_s, ops_s) + batch_s


def predict(kernel: Kernel, params: Parameters, work_items: int, size: int, model: str = "serial",
            batches: str | None = None) -> Prediction:
    """The kernel's time for ``work_items`` work-items (N) under ``model``, n from ``params``.

    The interval is the range the profile's measurement intervals leave open: the same model evaluated
    with every measured parameter at the low and at the high end of its interval (the time is monotone in
    each); it says nothing of the model's own error. The details are the ``maxplus --json`` fields.
    """
    if model not in MODELS:
        raise UserError(f"unknown model {model!r}: choose from {', '.join(MODELS)}")
    batches = batches or ("pipelined" if model in ("serial", "cache") else "sequential")
    if batches not in BATCHES:
        raise UserError(f"unknown batches {batches!r}: choose from {', '.join(BATCHES)}")
    if batches == "pipelined" and model not in ("serial", "cache"):
        raise UserError("pipelined batches need a serialized memory (models serial and cache)")
    batch_sym, bus_sym, ops_sym = sympy.S.Zero, sympy.S.Zero, sympy.S.Zero
    heights = []
    symbolic = sum(len(g.arcs) for g in kernel.fragments) <= SYMBOLIC_ARCS
    parts = []
    for g in kernel.fragments:
        syms = arc_symbols(g, model)
        loops = loop_symbols(g, model, kernel)
        heights.append(height(g, with_loops=bool(loops)))
        if not g.outputs:
            continue
        parts.append((g, syms, loops))
        if model in ("serial", "cache"):
            bus_sym += bus_symbol(g, model)
        if loops:
            ops_sym += n * sympy.Add(*[sympy.Symbol("theta" + str(s)[3:], positive=True) for s in loops.values()])
        if symbolic:
            batch_sym += fragment_symbol(g, syms, loops)
    nb = math.ceil(work_items / params.n)
    batch_s, bus_s, ops_s = _times(kernel, model, params, parts)
    total = _total(batches, nb, batch_s, bus_s, ops_s)
    ends = [_total(batches, nb, *_times(kernel, model, params.at(end), parts)) for end in ("low", "high")
            ] if params.bounds else []
    if batches == "sequential":
        sym = sympy.ceiling(N / n) * batch_sym
    else:
        per_sym = sympy.Max(bus_sym, ops_sym) if ops_sym != 0 else bus_sym
        sym = (sympy.ceiling(N / n) - 1) * per_sym + batch_sym
    text = symbolic_text(sym, batches) if symbolic else f"(no symbolic form: more than {SYMBOLIC_ARCS} arcs)"
    details = {"model": model, "size": int(size), "work_items": int(work_items), "n": params.n, "batches": batches,
               "predicted_s": total, "interval_s": [min(ends + [total]), max(ends + [total])], "batch_s": batch_s,
               "bus_s": bus_s, "height": max(heights) if heights else 0, "fragment_heights": heights,
               "symbolic": text, "parameters": dict(params.values), "sources": dict(params.sources)}
    return Prediction(int(size), total, details["interval_s"][0], details["interval_s"][1], "maxplus",
                      f"{model}, {batches}, n={params.n}", details)


def symbolic_text(sym, batches: str) -> str:
    """The total as text: ``ceil(N/n)*(batch)`` or ``(ceil(N/n) - 1)*max{bus, ops} + batch``."""
    if batches == "sequential":
        return fmt(sym)
    parts = sympy.Add.make_args(sym)
    piped = [p for p in parts if p.has(sympy.ceiling)]
    rest = sympy.Add(*[p for p in parts if not p.has(sympy.ceiling)])
    if len(piped) == 1 and piped[0].is_Mul:
        per = sympy.Mul(*[f for f in piped[0].args if not f.has(sympy.ceiling)])
        body = fmt(per)
        body = f"({body})" if " + " in body and not isinstance(per, sympy.Max) else body
        return f"(ceil(N/n) - 1)*{body} + {fmt(rest)}"
    return fmt(sym)


def fragment_symbol(g: KernelGraph, arcs: dict[int, Any], loops: dict[int, Any]):
    """The fragment's symbolic time: <1_o, (I (+) Z)^k (.) 1_i> propagated along the levels."""
    if not g.outputs:
        return sympy.S.Zero
    has_loop = np.zeros(g.size, dtype=bool)
    has_loop[list(g.loops)] = True
    level, _ = levels(g.size, [a.dst for a in g.arcs], [a.src for a in g.arcs], has_loop)
    x: list[Any] = [EPS] * g.size
    for i in g.inputs:
        x[i] = sympy.S.Zero
    incoming: dict[int, list[int]] = {}
    for i, a in enumerate(g.arcs):
        incoming.setdefault(a.dst, []).append(i)
    for node in sorted(range(g.size), key=lambda v: level[v]):
        terms = [x[g.arcs[i].src] + arcs[i] for i in incoming.get(node, []) if x[g.arcs[i].src] != EPS]
        if terms:
            x[node] = sympy.Max(x[node], *terms) if x[node] != EPS else sympy.Max(*terms)
        if node in loops and x[node] != EPS:
            x[node] = x[node] + loops[node]
    outs = [x[o] for o in g.outputs if x[o] != EPS]
    return sympy.Max(*outs) if outs else sympy.S.Zero
