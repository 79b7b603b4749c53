"""The max-plus kernel models as functions of (kernel graph, profile, N, n): naive, ops, serial, cache, overlap.

* naive (sections 6-7): arcs carry the read time t and the write time T; ceil(N/n) batches.
* ops (section 8): plus each operation's latency tau as a self-loop on its node.
* serial (section 9): of n work-items running at once the slowest gets its j-th read at
  t + ((n-1)*r + j-1)*dt (r reads per work-item; the paper's Z3 row t + (2n-2)dt, t + (2n-1)dt) and
  its write at T + (n-1)*dT.
* cache (section 9, caching): the first read of an address is serialized as above; a repeated read
  (the same address, or one a neighbouring work-item reads: same array, index differing by a constant)
  costs the cached-read time t_c and does not occupy the memory.
* overlap (the default): the cache model's arc times without the serialization, one batch being the n
  work-items the device holds at once (its occupancy), and the batches bounded by what the whole launch asks
  of DRAM, the last-level cache, the L1 data path and the issue of its operations
  (:mod:`~gpuprofiler.models.maxplus.throughput`): ``max(ceil(N/n) * batch, DRAM, cache, L1, issue)``.
  Latency-bound or bandwidth-bound is decided by which term is larger (Little's law with the profile's
  latencies against its throughputs). On a CPU whose profile has ``concurrency.overlap_curve`` the latency term
  is a core's work-groups, their work-items one after another, each work-item's critical path divided by the
  work-items the core's window overlaps (:func:`_cpu_chains`), plus its stores' stalls on re-missed lines and its
  page walks; with predicted misses, the time a later cache level needs to serve the loads that miss a private
  level is one more bound.

Batches of n work-items run one after another in the paper ("sequential": ceil(N/n) times the batch).
Real devices overlap the batches: "pipelined" (the default for serial and cache) charges every
batch but the last only for the time it holds the serialized memory (or its operation chain, when
that is longer), and the last batch in full: (ceil(N/n) - 1) * max(bus, ops) + batch.

Every model adds what the launch costs beyond its work (:func:`gpuprofiler.models.costs.launch_costs`):
``fixed + max(dispatch, work)``. The numbers need no sympy; the symbolic form of a prediction is
:mod:`~gpuprofiler.models.maxplus.formula`'s, for ``--explain``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import Prediction, positive_time
from gpuprofiler.models.costs import (
    cache_capacity,
    cache_served,
    launch_costs,
    scattered_served,
    store_stalls,
    tlb_walks,
)
from gpuprofiler.models.maxplus.graph import Arc, Kernel, KernelGraph, graph_times, height, inorder_times
from gpuprofiler.models.maxplus.requests import WARP
from gpuprofiler.models.maxplus.throughput import (
    L1_SECTORS_PER_CYCLE,
    cpu_overlap,
    launch_shape,
    resident_work_items,
    resources,
)
from gpuprofiler.profile.hardware import Figure, HardwareView, view

MODELS = ("naive", "ops", "serial", "cache", "overlap")
DEFAULT_MODEL = "overlap"   # the fullest physics; chosen before any comparison with measurements
BATCHES = ("sequential", "pipelined", "overlapped")

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
    # an atomic read-modify-write: measured where the profile has it (a profile from before: an integer add, as the
    # atomic's own add was priced)
    ("atomic", "int"): ("atomic_add", "atom.global.add.u32", "int_add", "add.s32"),
    ("atomic", "float"): ("atomic_add", "atom.global.add.f32", "int_add", "add.s32"),
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
    hw: HardwareView = field(default_factory=HardwareView)
    n_given: bool = False

    def value(self, name: str) -> float:
        if name not in self.values:
            raise UserError(f"the profile gives no value for {name}: {self.sources.get(name, 'not measured')}")
        return self.values[name]

    def at(self, end: str) -> "Parameters":
        """The same parameters with every measured value at the ``low`` or ``high`` end of its interval."""
        k = {"low": 0, "high": 1}[end]
        values = {name: self.bounds[name][k] if name in self.bounds else v for name, v in self.values.items()}
        return Parameters(values, self.n, self.sources, self.bounds, self.hw, self.n_given)


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
    for key in ("barrier", "bar.sync"):
        if keep("t_bar", hw.instruction(key, "latency_s"), "a barrier between fragments"):
            break
    keep("t_bar_scalar", hw.instruction("barrier_scalar", "latency_s"),
         "a barrier before a fragment a CPU runs one work-item at a time")
    if not keep("dt_gather", hw.figure("bandwidth.gather_s"),
                "a read at a random index far beyond the caches, over the same read near, the device full of them"):
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
        try:
            n_val, how = concurrency(profile)
        except UserError as exc:  # only the paper's models need it; the overlap model uses the occupancy
            n_val, how = 0, str(exc)
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
                        _contracted_throughput(kernel, hw, op_name, name, theta, vals, src, bounds)
                        if op_class(info["op"]) == "atomic" and key == "atomic_add":
                            _atomic_throughput(kernel, hw, op_name, name, theta, vals, src, bounds)
                    else:
                        vals[theta] = vals[name]
                        if name in bounds:
                            bounds[theta] = bounds[name]
                        src[theta] = f"no throughput for {key}: its latency, as if operations did not overlap"
                    break
                else:
                    src[name] = f"no measured latency for {info['op']} ({', '.join(keys) or 'unknown operation'})"
    return Parameters(vals, n_val, src, bounds, hw, n_override is not None)


# a multiply and an add of the same type, by the kind of the instruction profile (OpenCL's names, then PTX's)
_MUL_ADD = {"float": (("float_mul", "mul.f32"), ("float_add", "add.f32")),
            "double": (("double_mul", "mul.f64"), ("double_add", "add.f64"))}


def _contracted_throughput(kernel: Kernel, hw: HardwareView, op_name: Callable[[dict], str], name: str, theta: str,
                           vals: dict, src: dict, bounds: dict) -> None:
    """A multiply-add the compiler contracted from ``a * b + c`` issues as the hardware's FMA or as a multiply and an
    add, never as the library routine an explicit ``fma()`` may call (PoCL 3.0 on a Zen 3 VM: fma() at 0.88 Gop/s
    against 9.1 for adds and multiplies): where every operation of the symbol is such a contraction, its throughput
    is at least the multiply's and the add's together."""
    infos = [i for g in kernel.fragments for i in g.loops.values() if op_name(i) == name]
    if not infos or not all(i.get("op") == "fma" and i.get("contracted") for i in infos):
        return
    pair = _MUL_ADD.get(infos[0].get("dtype", "float"))
    if pair is None:
        return
    figs = []
    for keys in pair:
        fig = next((f for f in (hw.instruction(k, "throughput_ops_per_s") for k in keys) if f.ok and f.value > 0),
                   None)
        if fig is None:
            return
        figs.append(fig)
    both = sum(1.0 / f.value for f in figs)
    if both < vals[theta]:
        vals[theta] = both
        bounds.pop(theta, None)
        src[theta] = (f"a contracted a * b + c: its multiply's and add's 1 / throughput_ops_per_s together "
                      f"({both * 1e12:.3g} ps), below the fma() builtin's")


def _atomic_throughput(kernel: Kernel, hw: HardwareView, op_name: Callable[[dict], str], name: str, theta: str,
                       vals: dict, src: dict, bounds: dict) -> None:
    """An atomic's device-wide time: the profile's contended rate (every work-item on one line) for the share of its
    lines other work-groups hit too (``shared``, the most of any of the kernel's atomics), its latency spread over
    the compute units for the rest (atomics on lines no other core touches do not wait for each other)."""
    infos = [i for g in kernel.fragments for i in g.loops.values() if op_name(i) == name]
    shared = max((float(i.get("shared", 1.0)) for i in infos), default=1.0)
    units = hw.compute_units.value if hw.compute_units.ok and hw.compute_units.value else 1.0
    alone = vals[name] / units
    vals[theta] = shared * vals[theta] + (1.0 - shared) * min(alone, vals[theta])
    bounds.pop(theta, None)
    src[theta] += f"; {shared:.0%} of its lines shared between work-groups, the rest at its latency over {units:g} units"


def op_names(kernel: Kernel) -> Callable[[dict], str]:
    """Names of the operations' latency symbols: ``tau`` when the kernel has one kind of operation, else
    ``tau_<op>`` (``tau_mul``, ``tau_dadd``). The kinds are collected once per kernel."""
    cached = kernel.__dict__.get("_op_names")
    if cached is not None:
        return cached
    kinds = {(op_class(i["op"]), i.get("dtype", "float")) for g in kernel.fragments for i in g.loops.values()}

    def name(info: dict) -> str:
        if len(kinds) <= 1:
            return "tau"
        prefix = {"float": "", "double": "d", "int": "i"}[info.get("dtype", "float")]
        return f"tau_{prefix}{op_class(info['op'])}"

    kernel.__dict__["_op_names"] = name
    return name


# ---- numbers -----------------------------------------------------------------------------------

def _is_bus_read(arc: Arc, model: str) -> bool:
    return arc.kind == "read" and not (model == "cache" and not arc.info.get("first", True))


def _on_bus(arc: Arc, model: str) -> bool:
    """Whether the access occupies the serialized global memory under ``model``."""
    return _is_bus_read(arc, model) or arc.kind == "write"


def bus_ids(g: KernelGraph, model: str) -> tuple[list[int], list[int]]:
    """The arcs that queue on the serialized memory, reads and writes, each in access order."""
    reads = sorted((i for i, a in enumerate(g.arcs) if _is_bus_read(a, model)),
                   key=lambda i: g.arcs[i].info.get("order", i))
    writes = sorted((i for i, a in enumerate(g.arcs) if a.kind == "write"),
                    key=lambda i: g.arcs[i].info.get("order", i))
    return reads, writes


def step_name(kind: str, info: dict) -> str:
    """The serialization step of one access: dt (unit stride), dt_line (strided) or dt_gather (dT for writes)."""
    base = "dt" if kind == "read" else "dT"
    pattern = info.get("pattern", "unit")
    if pattern in ("unit", "uniform"):
        return base
    return f"{base}_line" if pattern == "strided" else f"{base}_gather"


def step_seconds(arc: Arc, params: Parameters) -> float:
    """One access's serialization step in seconds, from its own element size and stride."""
    name = step_name(arc.kind, arc.info)
    per_byte = params.value(name[:2] + "_per_byte")
    elem = arc.info.get("elem_bytes", 4)
    if name in ("dt", "dT"):
        return elem * per_byte
    if name.endswith("_line"):
        return min(max(arc.info.get("stride", 1) or 1, 1) * elem, params.value("line_bytes")) * per_byte
    return params.value(name)


@dataclass(frozen=True)
class Pipes:
    """What the work-items of one batch share on each SM (overlap model): ``warps`` per SM and its clock; their
    requests queue on the SM's L1 / shared-memory pipe one per cycle, their operations on the device-wide
    throughput (``items`` x theta), as the paper's serial model queues them on the memory."""

    items: int
    warps: float = 0.0
    clock_hz: float = 0.0

    def request(self, info: dict, latency: float, cycles: float) -> float:
        """An access's time: its latency, or the time its pipe takes for the batch's requests, if longer."""
        if not self.clock_hz:
            return latency
        return max(latency, self.warps * info.get("warps", 1.0) * cycles / self.clock_hz)


def l1_cycles(info: dict) -> float:
    """Cycles of the L1 data path for one warp request: its lines (at least its sectors over 4)."""
    return max(1.0, info.get("lines", 32.0), info.get("sectors", 32.0) / L1_SECTORS_PER_CYCLE)


def arc_numbers(g: KernelGraph, model: str, params: Parameters, pipes: Pipes | None = None) -> list[float]:
    """Each arc's time in seconds under ``model`` (by index in ``g.arcs``); ``pipes`` queue the overlap model's
    requests on the SM."""
    val: dict[int, float] = {}
    if model in ("serial", "cache"):
        for ids, base in zip(bus_ids(g, model), ("t", "T")):
            secs = np.array([step_seconds(g.arcs[i], params) for i in ids])
            prefix = np.concatenate([[0.0], np.cumsum(secs)[:-1]]) if len(ids) else secs
            base_s, total = params.value(base), float(secs.sum())
            for j, i in enumerate(ids):
                val[i] = base_s + (params.n - 1) * total + float(prefix[j])
    cached = model in ("cache", "overlap")
    queue = pipes if model == "overlap" and pipes is not None else Pipes(0)
    out = []
    for i, a in enumerate(g.arcs):
        if i in val:
            out.append(val[i])
        elif a.kind == "read":
            lat = params.value("t_c" if cached and not a.info.get("first", True) else "t")
            out.append(queue.request(a.info, lat, l1_cycles(a.info)))
        elif a.kind == "write":
            out.append(queue.request(a.info, params.value("T"), l1_cycles(a.info)))
        elif a.kind in ("local_read", "local_write"):
            out.append(queue.request(a.info, params.value("t_l"), a.info.get("wavefronts", 1.0)))
        elif a.kind == "time":
            out.append(params.value(a.info["symbol"]))
        else:
            out.append(0.0)
    return out


def loop_numbers(g: KernelGraph, model: str, kernel: Kernel, params: Parameters,
                 pipes: Pipes | None = None) -> dict[int, float]:
    """Each operation node's time in seconds: its latency (none in the naive model, which counts data moves
    only); in the overlap model at least the batch's issue of it at the device-wide throughput."""
    if model == "naive":
        return {}
    name = op_names(kernel)
    if model == "overlap" and pipes is not None:
        return {node: max(params.value(name(info)), pipes.items * params.value("theta" + name(info)[3:]))
                for node, info in g.loops.items()}
    return {node: params.value(name(info)) for node, info in g.loops.items()}


def _fragment_times(g: KernelGraph, kernel: Kernel, model: str, plist: list[Parameters],
                    pipes: Pipes | None = None, inorder: bool = False) -> np.ndarray:
    """One fragment's critical path under ``model`` for each parameter set, evaluated together; ``inorder``: its
    instructions issued in program order (:func:`~gpuprofiler.models.maxplus.graph.inorder_times`)."""
    weights = np.array([arc_numbers(g, model, p, pipes) for p in plist]).reshape(len(plist), len(g.arcs))
    loops = None
    if model != "naive" and g.loops:
        loops = np.zeros((len(plist), g.size))
        for j, p in enumerate(plist):
            for node, v in loop_numbers(g, model, kernel, p, pipes).items():
                loops[j, node] = v
    return np.maximum((inorder_times if inorder else graph_times)(g, weights, loops), 0.0)


def _batch_times(kernel: Kernel, model: str, plist: list[Parameters], pipes: Pipes | None = None,
                 inorder: bool = False) -> np.ndarray:
    """One batch's time (its fragments one after another) for each parameter set, evaluated together."""
    total = np.zeros(len(plist))
    for g in kernel.fragments:
        if g.outputs:
            total += _fragment_times(g, kernel, model, plist, pipes, inorder)
    return total


def issue_seconds(kernel: Kernel, params: Parameters) -> float:
    """One work-item's operations at the device-wide throughputs: sum of 1 / throughput (the theta symbols). On a
    CPU whose profile has the loop-free curve, the fragments it runs in vector lanes are left out: the throughputs
    were measured one work-item at a time, and the lanes' own limit is in that curve (it falls from its peak as the
    chains lengthen), which their latency term reads."""
    name = op_names(kernel)
    lanes = params.hw.kind == "cpu" and len(params.hw.loopfree_curve) >= 2
    return sum(params.value("theta" + name(info)[3:]) for g in kernel.fragments if g.outputs
               and not (lanes and vector_lanes(g, params.hw)) for info in g.loops.values())


def _paper_totals(kernel: Kernel, model: str, batches: str, plist: list[Parameters], work_items: int) -> tuple:
    """The paper's total, one batch's time and the time it holds the serialized memory, per parameter set."""
    batch = _batch_times(kernel, model, plist)
    timed = [g for g in kernel.fragments if g.outputs]
    bus = np.array([p.n * sum(step_seconds(a, p) for g in timed for a in g.arcs if _on_bus(a, model))
                    if model in ("serial", "cache") else 0.0 for p in plist])
    ops = np.array([p.n * issue_seconds(kernel, p) if model != "naive" else 0.0 for p in plist])
    nb = math.ceil(work_items / plist[0].n)
    total = nb * batch if batches == "sequential" else (nb - 1) * np.maximum(bus, ops) + batch
    return total, batch, bus


def _overlap_totals(kernel: Kernel, plist: list[Parameters], work_items: int, resident: int,
                    misses: Any = None) -> tuple:
    """The overlap model's work time per parameter set: max(ceil(N/n) * batch, DRAM, cache, L1, issue; on a CPU
    with predicted misses also the lines a later cache level serves); and the details of the first set."""
    hw = plist[0].hw
    timed = [g for g in kernel.fragments if g.outputs]
    barrier = np.array([p.values.get("t_bar", 0.0) for p in plist])
    scalar = np.array([p.values.get("t_bar_scalar", p.values.get("t_bar", 0.0)) for p in plist])
    measured_group = hw.instructions.get("barrier", {}).get("work_group") if hw.kind == "cpu" else None
    group = int(np.prod(kernel.local_size))
    if isinstance(measured_group, (int, float)) and measured_group > 0 and group > 0:
        # a CPU runs each region between barriers as a loop over the group's work-items: a barrier costs per
        # work-item, and the profile timed it for a group of ``work_group``
        barrier = barrier * group / measured_group
        scalar = scalar * group / measured_group
    chains = None if any(p.n_given for p in plist) else _cpu_chains(kernel, plist, work_items, (barrier, scalar),
                                                                    misses)
    if chains is not None:
        batch, nb = chains[0], chains[1]
    else:
        items = min(work_items, resident)
        sms, clock = hw.compute_units, hw.clock_hz
        gpu = hw.kind == "gpu" and sms.ok and clock.ok
        pipes = Pipes(items, items / WARP / sms.value if gpu else 0.0, clock.value if gpu else 0.0)
        # a GPU's warp issues in program order: a load's latency holds it from its first use on, whatever comes
        # after that is independent, and only other warps fill the wait (the throughput bounds)
        batch = _batch_times(kernel, "overlap", plist, pipes, inorder=gpu) + max(len(timed) - 1, 0) * barrier
        nb = math.ceil(work_items / resident)
    totals, details = [], {}
    for j, p in enumerate(plist):
        res = resources(kernel, p.hw, work_items, issue_seconds(kernel, p), (None, "low", "high")[j], misses)
        bounds = {"latency": nb * float(batch[j]), **res.bounds()}
        if chains is not None and "cache_served_s" in chains[2]:
            bounds["served"] = chains[2]["cache_served_s"]
        limit = max(bounds, key=bounds.get)
        totals.append(bounds[limit])
        if j == 0:
            details = {"batch_s": float(batch[0]), "batches_count": nb, "bounds_s": bounds, "limited_by": limit,
                       "traffic": res.traffic, "resource_sources": res.sources}
            if chains is not None:
                details["cpu_chains"] = chains[2]
    return np.array(totals), details


ACCESSES = ("read", "write", "local_read", "local_write")


def vector_lanes(g: KernelGraph, hw: HardwareView | None = None) -> bool:
    """Whether a CPU's OpenCL compiler runs the fragment's work-items in vector lanes: no loop of its own
    (:attr:`KernelGraph.looped`), every access the same address or the next one for the next work-item (no
    gather, no stride), and no array written at one address and read at another in it (the compiler cannot tell
    whether the next work-item's store reaches this one's load: a tree reduction's ``s[l] += s[l + k]`` step ran
    1.35 ns per work-item, scalar, on a Zen 4 VM's PoCL); nor, on a device whose compiler ran a guarded stream a
    work-item at a time (``hw``'s :attr:`~gpuprofiler.profile.hardware.HardwareView.guarded_item_s`), accesses
    under a condition on the work-item (:attr:`KernelGraph.guarded`); nor with an atomic in it."""
    if g.looped or (g.guarded and hw is not None and hw.guarded_item_s is not None):
        return False
    if any(info.get("op") == "atomic" for info in g.loops.values()):
        return False  # atomics of neighbouring work-items may meet at one address: no compiler puts them in lanes
    written: dict[str, set] = {}
    read: dict[str, set] = {}
    for a in g.arcs:
        if a.kind not in ACCESSES:
            continue
        if a.info.get("pattern") not in ("unit", "uniform"):
            return False
        where = a.info.get("key", a.info.get("index"))
        (written if a.kind.endswith("write") else read).setdefault(a.info.get("array"), set()).add(where)
    return all(read.get(name, set()) <= places for name, places in written.items())


def _cpu_chains(kernel: Kernel, plist: list[Parameters], work_items: int, barriers: tuple[np.ndarray, np.ndarray],
                misses: Any = None) -> tuple | None:
    """A CPU's latency bound as (one core's time per work-group, work-groups per core, details), or None off a CPU
    or without the profile's ``concurrency.overlap_curve``.

    A CPU core runs a work-group's work-items one after another, each region between barriers as a loop over
    them (a fragment the compiler runs in vector lanes, :func:`vector_lanes`: by the profile's loop-free curve; each
    barrier by the profile's barrier of that kind of region; a fragment only its guard keeps out of the lanes at
    least the profile's guarded stream per work-item). A work-item's critical path takes its operations'
    latencies, its loads and stores the cached-read latency (a core issues a load once its address is known, and
    prefetch brings streams ahead; a store retires into the store buffer; what memory delivers and takes is the
    DRAM and cache bounds'). The core's out-of-order window overlaps the chains of as many consecutive work-items as
    the profile measured for chains of that many operations, so a region takes group x path / overlap. With the
    launch's predicted misses, the cores also wait on its stores that re-miss a private level
    (:func:`~gpuprofiler.models.costs.store_stalls`) and on its page walks (:func:`~gpuprofiler.models.costs.tlb_walks`:
    a load waits for its translation on the core's own time; gesummv at 3000 on a Zen 4 VM: 5 ms of chains, 23 ms
    of walks, 39 ms measured, where the larger of the two predicted -42%) and on the loads at scattered lines that
    the shared cache serves (:func:`~gpuprofiler.models.costs.scattered_served`); the time a later cache level needs to
    serve the loads that miss a private level (:func:`~gpuprofiler.models.costs.cache_served`) is in the details,
    a bound of its own beside the chains (the overlap model's ``served``).
    """
    hw = plist[0].hw
    units = hw.compute_units
    timed = [g for g in kernel.fragments if g.outputs]
    if hw.kind != "cpu" or not units.ok or not timed or cpu_overlap(hw, 1.0) is None:
        return None
    group = max(1, math.prod(kernel.local_size))
    groups, _ = launch_shape(kernel, work_items)
    per_core = math.ceil(groups / max(1, int(units.value)))
    # every load at the cached-read latency, every store only until it reaches the first level (the store buffer
    # drains to memory behind the core: what DRAM takes is the bounds'); operations at their latencies (no pipes:
    # one work-item's path)
    cached = []
    for p in plist:
        t_c = p.values.get("t_c", p.values.get("t", 0.0))
        cached.append(replace(p, values={**p.values, "t": t_c, "T": min(t_c, p.values.get("T", t_c))}))
    per_group = np.zeros(len(plist))
    parts = []
    lanes = [vector_lanes(g, hw) for g in timed]
    lane_floor, guard_floor, skip = hw.loopfree_floor_s, hw.guarded_item_s, hw.guard_skip_item_s or 0.0
    # a launch whose buffers together pass the last-level cache streams them from DRAM: the guarded stream measured so
    footprint = sum(v for v in kernel.buffers.values() if v) if kernel.buffers else 0.0
    llc = cache_capacity(hw.profile)
    if hw.guarded_far_item_s is not None and llc.ok and footprint > llc.value:
        guard_floor = hw.guarded_far_item_s
    for k, g in enumerate(timed):
        ops = len(g.loops) + sum(a.kind in ACCESSES for a in g.arcs)
        overlap, source = cpu_overlap(hw, float(ops), lanes=lanes[k])
        path = _fragment_times(g, kernel, "overlap", cached)
        # out of the lanes, a work-item its guard turns away from every access runs none of the region's operations
        # (its turn of the region's loop is in the barrier's figure): a tree reduction's steps take half the group,
        # then a quarter; a region with an unguarded access runs for every work-item
        share = (g.access_share or 1.0) if g.guarded and not lanes[k] else 1.0
        per_item = share * path / overlap
        # a region in vector lanes costs at least the loop-free curve's least per work-item; one that only its
        # guard keeps out of them, the guarded stream's per work-item that takes it and the skipped stream's per
        # work-item that does not
        floor = lane_floor if lanes[k] else None
        if not lanes[k] and guard_floor and g.guarded and vector_lanes(g):
            floor = g.guard_share * guard_floor + (1.0 - g.guard_share) * skip
        if floor:
            per_item = np.maximum(per_item, floor)
        per_group += group * per_item
        parts.append({"fragment": k, "path_s": float(path[0]), "operations": int(ops), "overlap": overlap,
                      "lanes": lanes[k], "source": source, "item_s": float(per_item[0]),
                      "floor_s": floor if floor and per_item[0] <= floor else None})
    # each barrier costs what the region after it does per work-item beyond its path: the profile's barrier whose
    # regions run in vector lanes, or the one whose regions run a work-item at a time
    for in_lanes in lanes[1:]:
        per_group = per_group + (barriers[0] if in_lanes else barriers[1])
    details = {"work_groups_per_core": per_core, "group": group, "fragments": parts}
    if misses is not None and getattr(misses, "levels", None):
        stall, source = store_stalls(hw.profile, misses.levels)
        served, served_source = cache_served(hw.profile, misses)
        walks, walk_source = tlb_walks(hw.profile, misses)
        scattered, scattered_source = scattered_served(hw.profile, misses)
        per_group = per_group + (stall + walks + scattered) / per_core
        details.update(store_stall_s=stall, store_stall_source=source, cache_served_s=served,
                       cache_served_source=served_source, tlb_walk_s=walks, tlb_walk_source=walk_source,
                       scattered_served_s=scattered, scattered_served_source=scattered_source)
    return per_group, per_core, details


def correction_features(kernel: Kernel, bounds: dict[str, float], work_items: int, resident: int,
                        capacity: float | None, fixed_s: float, total: float) -> dict[str, float]:
    """The learned correction's features (:data:`gpuprofiler.models.correction.FEATURES`) of an overlap
    prediction: the share of the time each bound holds, the launch's size, coalescing, occupancy, integer work."""
    reqs = [(a.info.get("warps", 1.0), a.info.get("sectors", 32.0)) for g in kernel.fragments for a in g.arcs
            if a.kind in ("read", "write")]
    weight = sum(w for w, _ in reqs)
    ops = [i.get("dtype", "float") for g in kernel.fragments for i in g.loops.values()]
    return {"launch_share": fixed_s / total, "dram_share": bounds["dram"] / total,
            "cache_share": bounds["cache"] / total,
            "compute_share": max(bounds["latency"], bounds["issue"], bounds["lsu"]) / total,
            "log_work_items": math.log10(max(work_items, 1)),
            "sectors_per_request": sum(w * sc for w, sc in reqs) / weight if weight else 0.0,
            "occupancy": min(1.0, resident / capacity) if capacity else 1.0,
            "int_share": ops.count("int") / len(ops) if ops else 0.0}


def predict(kernel: Kernel, params: Parameters, work_items: int, size: int, model: str = DEFAULT_MODEL,
            batches: str | None = None, misses: Any = None) -> Prediction:
    """The kernel's time for ``work_items`` work-items (N) under ``model``, launch costs included.

    The interval is the range the profile's measurement intervals leave open: the same model evaluated
    with every measured parameter at the low and at the high end of its interval (the time is monotone in
    each); it says nothing of the model's own error. The details are the ``maxplus --json`` fields. With
    ``misses`` (a :class:`~gpuprofiler.models.cache.analysis.CacheAnalysis` of the launch) the overlap model's
    DRAM and cache traffic are its predicted misses instead of the footprint and reuse rules.
    """
    if model not in MODELS:
        raise UserError(f"unknown model {model!r}: choose from {', '.join(MODELS)}")
    default = "overlapped" if model == "overlap" else "pipelined" if model in ("serial", "cache") else "sequential"
    batches = batches or default
    if batches not in BATCHES:
        raise UserError(f"unknown batches {batches!r}: choose from {', '.join(BATCHES)}")
    if batches == "pipelined" and model not in ("serial", "cache"):
        raise UserError("pipelined batches need a serialized memory (models serial and cache)")
    if (batches == "overlapped") != (model == "overlap"):
        raise UserError("the overlap model's batches are overlapped, and only its")
    groups = None
    if kernel.global_size:
        groups = math.prod(-(-g // lsz) for g, lsz in zip(kernel.global_size, kernel.local_size))
    launch, (launch_lo, launch_hi) = launch_costs(params.hw.profile, work_items, groups)
    heights = [height(g, with_loops=model != "naive") for g in kernel.fragments]
    details: dict = {"model": model, "size": int(size), "work_items": int(work_items), "batches": batches}
    if model == "overlap":
        if params.n_given:
            n_val, how = params.n, "--n"
        else:
            n_val, how = resident_work_items(kernel, params.hw)
        plist = [params] + ([params.at("low"), params.at("high")] if params.bounds else [])
        works, extra = _overlap_totals(kernel, plist, work_items, n_val, misses)
        work, ends = float(works[0]), [float(w) for w in works[1:]]
        details.update(extra)
        details["sources"] = {**params.sources, "n": how}
    else:
        if params.n < 1:
            raise UserError(f"the {model} model needs n, the work-items running at once: {params.sources['n']}")
        n_val = params.n
        plist = [params] + ([params.at("low"), params.at("high")] if params.bounds else [])
        works, batch, bus = _paper_totals(kernel, model, batches, plist, work_items)
        work, ends = float(works[0]), [float(w) for w in works[1:]]
        details.update(batch_s=float(batch[0]), bus_s=float(bus[0]))
        details["sources"] = dict(params.sources)
    total = launch.total(work)
    if model == "overlap":
        capacity = params.hw.figure("concurrency.resident_capacity")
        details["features"] = correction_features(kernel, details["bounds_s"], work_items, n_val,
                                                  capacity.value if capacity.ok else None, launch.fixed_s, total)
    lows = [launch_lo.total(min(ends + [work])), total]
    highs = [launch_hi.total(max(ends + [work])), total]
    details.update(n=int(n_val), predicted_s=total, interval_s=[min(lows), max(highs)], work_s=work,
                   work_interval_s=[min(ends + [work]), max(ends + [work])],
                   launch_fixed_s=launch.fixed_s, dispatch_s=launch.dispatch_s, launch_source=launch.source,
                   height=max(heights) if heights else 0, fragment_heights=heights, parameters=dict(params.values))
    positive_time(total, f"maxplus {model} model of {kernel.name} at N = {size}")
    return Prediction(int(size), total, details["interval_s"][0], details["interval_s"][1], "maxplus",
                      f"{model}, {batches}, n={n_val}" if "cpu_chains" not in details else
                      f"{model}, a group's work-items one after another per core",
                      details)
