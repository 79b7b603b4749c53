"""The PTX pipeline model end to end: PTX + launch + hardware profile -> cycles, seconds and their parts.

predicted_s = simulated cycles of the busiest SM / SM clock + launch overhead (the profile's linear
fit a*threads + b) + memory penalty (the sectors that non-coalesced global requests move beyond the
coalesced minimum, at the profile's bandwidth). Every hardware figure carries its source: the
profile where it measured it, else a documented default for the compute capability.

An optional learned correction (:func:`fit_correction`) maps the model's features to measured times
by ridge regression on log time ratios, with the ridge strength chosen and the result judged by
leave-one-kernel-out error only (a kernel is never in the fold that predicts it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.pipeline import cfg as cfgmod
from gpuprofiler.pipeline import divergence
from gpuprofiler.pipeline.occupancy import (
    SM_RESOURCES,
    blocks_on_one_sm,
    normalise_arch,
    occupancy,
)
from gpuprofiler.pipeline.ptx_parser import Entry, Module
from gpuprofiler.pipeline.simulator import Program, simulate
from gpuprofiler.pipeline.tasks import (
    LANES,
    MemoryCosts,
    build_tasks,
    latency_table,
    trace_of,
)
from gpuprofiler.pipeline.values import Evaluator, Launch

# reference boards for the defaults (vendor data sheets): SMs, boost clock, memory bandwidth, L2
DEVICE_DEFAULTS: dict[str, dict[str, Any]] = {
    "sm_70": dict(board="Tesla V100 SXM2", sms=80, clock_hz=1.53e9, bandwidth_Bps=900e9, l2_bytes=6 << 20),
    "sm_75": dict(board="GeForce RTX 2080 Ti", sms=68, clock_hz=1.545e9, bandwidth_Bps=616e9, l2_bytes=5632 << 10),
    "sm_80": dict(board="A100 40GB", sms=108, clock_hz=1.41e9, bandwidth_Bps=1555e9, l2_bytes=40 << 20),
    "sm_86": dict(board="GeForce RTX 3090", sms=82, clock_hz=1.695e9, bandwidth_Bps=936e9, l2_bytes=6 << 20),
    "sm_89": dict(board="GeForce RTX 4090", sms=128, clock_hz=2.52e9, bandwidth_Bps=1008e9, l2_bytes=72 << 20),
    "sm_90": dict(board="H100 SXM5", sms=132, clock_hz=1.98e9, bandwidth_Bps=3.35e12, l2_bytes=50 << 20),
}
# seed 002's launch-overhead fit on Turing: l = 3.824e-6 us * threads + 2.882 us
PAPER_LAUNCH = (3.824e-12, 2.882e-6)
DEFAULT_BUDGET = 2_000_000


@dataclass
class Hardware:
    """The device the model predicts for, every figure with its source."""

    arch: str
    sms: int
    clock_hz: float
    schedulers: int
    read_Bps: float
    write_Bps: float
    load_latency: float
    store_latency: float
    launch_per_thread_s: float
    launch_fixed_s: float
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "sms": self.sms, "clock_hz": self.clock_hz, "schedulers": self.schedulers,
                "read_Bps": self.read_Bps, "write_Bps": self.write_Bps, "load_latency_cycles": self.load_latency,
                "store_latency_cycles": self.store_latency, "launch_per_thread_s": self.launch_per_thread_s,
                "launch_fixed_s": self.launch_fixed_s, "sources": self.sources}


def _interp_log(points: list[tuple[float, float]], x: float) -> float | None:
    pts = sorted((a, b) for a, b in points if a and a > 0 and b and b > 0)
    if not pts:
        return None
    xs = np.log([p[0] for p in pts])
    ys = np.array([p[1] for p in pts])
    return float(np.interp(math.log(max(x, 1.0)), xs, ys))


def hardware(profile: Any | None, arch: str | None, working_set: float | None = None) -> Hardware:
    """Hardware figures from the profile where measured, else the defaults of ``arch``."""
    data = profile.data if profile is not None else {}
    device = data.get("device", {}) or {}
    if arch is None and device.get("compute_capability"):
        arch = "sm_" + str(device["compute_capability"]).replace(".", "")
    arch = normalise_arch(arch)
    d = DEVICE_DEFAULTS[arch]
    src: dict[str, str] = {}
    notes: list[str] = []
    default = f"default {arch} ({d['board']})"

    def get(key: str) -> float | None:
        if profile is None:
            return None
        v = profile.get(key, None)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    sms = device.get("compute_units") if profile is not None else None
    if sms:
        src["sms"] = "profile device.compute_units"
    else:
        sms, src["sms"] = d["sms"], default
    hz = get("clock.hz")
    if hz:
        src["clock_hz"] = f"profile clock.hz ({data.get('clock', {}).get('source', '')})".strip()
    elif device.get("clock_mhz"):
        hz, src["clock_hz"] = float(device["clock_mhz"]) * 1e6, "profile device.clock_mhz (reported)"
    else:
        hz, src["clock_hz"] = d["clock_hz"], default
    rd, wr = get("bandwidth.read_Bps"), get("bandwidth.write_Bps")
    curve = (data.get("bandwidth") or {}).get("working_set_curve") or []
    if working_set and curve:
        at = _interp_log([(p.get("bytes"), p.get("Bps")) for p in curve], working_set)
        if at:
            rd = at
            src["read_Bps"] = f"profile bandwidth.working_set_curve at the working set ({working_set:.3g} B)"
    if rd and "read_Bps" not in src:
        src["read_Bps"] = "profile bandwidth.read_Bps"
    if not rd:
        rd, src["read_Bps"] = d["bandwidth_Bps"], default
    if wr:
        src["write_Bps"] = "profile bandwidth.write_Bps"
    else:
        wr, src["write_Bps"] = rd, src["read_Bps"]
    from gpuprofiler.pipeline.tasks import DEFAULT_LATENCY

    lat_default = DEFAULT_LATENCY[arch]
    load = None
    lcurve = data.get("latency_curve") or []
    if working_set and lcurve:
        s = _interp_log([(p.get("bytes"), p.get("latency_s")) for p in lcurve], working_set)
        if s:
            load = s * hz
            src["load_latency"] = f"profile latency_curve at the working set ({working_set:.3g} B) x clock"
    if load is None:
        for key in ("memory.dram_latency_s", "memory.read_s"):
            s = get(key)
            if s:
                load, src["load_latency"] = s * hz, f"profile {key} x clock"
                break
    if load is None:
        if working_set and working_set <= d["l2_bytes"]:
            load, src["load_latency"] = float(lat_default["l2"]), f"default {arch} (L2 hit: working set fits L2)"
        else:
            load, src["load_latency"] = float(lat_default["dram"]), f"default {arch} (DRAM)"
    s = get("memory.write_s")
    if s:
        store, src["store_latency"] = s * hz, "profile memory.write_s x clock"
    else:
        store, src["store_latency"] = float(lat_default["dram"]), f"default {arch} (DRAM)"
    a, b = get("launch.per_thread_s"), None
    if profile is not None:
        bv = profile.get("launch.fixed_s", None)
        b = float(bv) if isinstance(bv, (int, float)) else None
    if a is not None and b is not None:
        src["launch"] = "profile launch.per_thread_s, launch.fixed_s (linear fit)"
        b = max(b, 0.0)
    else:
        a, b = PAPER_LAUNCH
        src["launch"] = "default: seed 002's Turing fit l = 3.824e-6 us * threads + 2.882 us"
    if profile is not None and not (device.get("type") == "gpu" and device.get("vendor", "").upper().startswith("NVIDIA")):
        notes.append(f"the profile's device ({device.get('name', '?')}, {device.get('type', '?')}) is not an NVIDIA "
                     f"GPU: the {arch} SM model is fed with its clock, compute units, bandwidth, memory latency "
                     "and launch fit, so the prediction describes a hypothetical SM-based device, not this one")
    return Hardware(arch, int(sms), float(hz), SM_RESOURCES[arch]["schedulers"], float(rd), float(wr), float(load),
                    float(store), float(a), float(b), src, notes)


# ------------------------------------------------------------------------------------------------
# Registers per thread
# ------------------------------------------------------------------------------------------------

def live_registers(entry: Entry, cfg: cfgmod.CFG) -> int:
    """Most 32-bit register words live at once (64-bit count 2, predicates none), by liveness on the CFG."""
    code = entry.instructions

    def words(r: str) -> int:
        t = entry.reg_type(r)
        if t is None or t == "pred":
            return 0
        return 2 if t.endswith("64") else (4 if t.endswith("128") else 1)

    blocks = cfg.blocks
    live_in: list[set[str]] = [set() for _ in blocks]
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            live = set()
            for s in b.succs:
                live |= live_in[s]
            for i in range(b.end - 1, b.start - 1, -1):
                ins = code[i]
                live -= set(ins.dsts)
                live |= set(ins.srcs)
            if live != live_in[b.id]:
                live_in[b.id] = live
                changed = True
    most = 0
    for b in blocks:
        live = set()
        for s in b.succs:
            live |= live_in[s]
        most = max(most, sum(words(r) for r in live))
        for i in range(b.end - 1, b.start - 1, -1):
            ins = code[i]
            live -= set(ins.dsts)
            live |= set(ins.srcs)
            most = max(most, sum(words(r) for r in live))
    return most


# ------------------------------------------------------------------------------------------------
# Simulation with a budget
# ------------------------------------------------------------------------------------------------

def _run_length(items: list, n_instr: dict[int, int]) -> int:
    """Instructions of a path (loops unrolled), without building it."""
    counts = cfgmod.block_counts(items, len(n_instr))
    return int(sum(counts[b] * n for b, n in n_instr.items()))


def _dominant_loop(items: list, n_instr: dict[int, int]) -> cfgmod.LoopRun | None:
    best, best_len = None, 0
    for run in cfgmod.loop_runs(items):
        if run.trip < 4:
            continue
        length = _run_length([run], n_instr)
        if length > best_len:
            best, best_len = run, length
    return best


MAX_TRACE = 5_000_000   # longest task list built in memory; longer ones are simulated with shortened loops


def simulate_launch(tasks: Any, path_items: list, starts: list[int], ends: list[int], blocks: int, resident: int,
                    warps_per_block: int, schedulers: int, budget: int = DEFAULT_BUDGET,
                    trace_warps: Sequence[int] = ()) -> dict[str, Any]:
    """Cycles of ``blocks`` blocks on one SM, exact within ``budget`` warp-instructions, else extrapolated.

    Extrapolation is linear in waves (one and two waves of resident blocks simulated) and, if one
    task list alone is too long, linear in the trip count of the loop that dominates it (two shortened
    trip counts simulated): a bilinear fit through four simulations.
    """
    n_instr = {b: ends[b] - starts[b] for b in range(len(starts))}
    length = _run_length(path_items, n_instr)
    plan_blocks = [blocks]
    if blocks * warps_per_block * length > budget and blocks > 2 * resident:
        plan_blocks = [resident, 2 * resident]
    loop = None
    trips = [None]
    if max(plan_blocks) * warps_per_block * length * (len(plan_blocks)) > budget or tasks.trace is None:
        loop = _dominant_loop(path_items, n_instr)
        if loop is not None:
            body = sum(n_instr[b] for b in cfgmod.expand(loop.items))
            base = length - body * loop.trip
            per_block = max(1, sum(plan_blocks) * warps_per_block)
            t1 = int((budget / per_block - 2 * base) / (3 * max(body, 1)))
            t1 = max(1, min(t1, loop.trip // 2))
            trips = [t1, 2 * t1]
    runs = {}
    total_wi = 0
    t0 = time.perf_counter()
    first = None
    for tr in trips:
        if tr is None:
            if tasks.trace is None:
                raise UserError(f"the task list is {length} instructions long and has no loop to shorten; "
                                "the model cannot simulate it")
            trace = tasks.trace
        else:
            seq = cfgmod.expand(path_items, {loop.loop.id: tr})
            trace = trace_of(seq, starts, ends)
        prog = Program.from_tasks(tasks, trace)
        for nb in plan_blocks:
            res = simulate(prog, nb, warps_per_block, min(resident, nb), schedulers,
                           trace_warps=trace_warps if first is None else ())
            if first is None:
                first = res
            runs[(nb, tr)] = res
            total_wi += res.warp_instructions
    wall = time.perf_counter() - t0
    b1, b2 = plan_blocks[0], plan_blocks[-1]
    t1, t2 = trips[0], trips[-1]

    def c(nb, tr):
        return runs[(nb, tr)].cycles

    cycles = float(c(b1, t1))
    method = "exact"
    if len(plan_blocks) == 2:
        per_block = (c(b2, t1) - c(b1, t1)) / (b2 - b1)
        cycles += per_block * (blocks - b1)
        method = f"linear in blocks through {b1} and {b2} simulated blocks"
    if loop is not None:
        per_trip = (c(b1, t2) - c(b1, t1)) / (t2 - t1)
        extra = per_trip * (loop.trip - t1)
        if len(plan_blocks) == 2:
            cross = ((c(b2, t2) - c(b2, t1)) - (c(b1, t2) - c(b1, t1))) / ((t2 - t1) * (b2 - b1))
            extra += cross * (loop.trip - t1) * (blocks - b1)
        cycles += extra
        note = f"linear in the trip count of loop {loop.info.get('label')} (line {loop.info.get('line')}) through " \
               f"{t1} and {t2} simulated passes (real: {loop.trip})"
        method = note if method == "exact" else method + "; " + note
    biggest = runs[(b2, t2)]
    return {"cycles": cycles, "method": method, "warp_instructions_simulated": total_wi, "seconds": wall,
            "rate_warp_instructions_per_s": total_wi / wall if wall > 0 else None,
            "simulated_blocks": plan_blocks, "simulated_trips": trips if loop is not None else None,
            "units": biggest.units, "pipes": biggest.pipes, "trace": first.trace if first else []}


# ------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------

def predict(module: Module, kernel: str | None, launch: Launch, profile: Any | None = None, arch: str | None = None,
            trips: dict[str, int] | None = None, default_trip: int = 1, registers: int | None = None,
            working_set: float | None = None, budget: int = DEFAULT_BUDGET, trace: bool = False,
            correction: dict[str, Any] | None = None, ptx_text: str | None = None) -> dict[str, Any]:
    """Run the whole model for one kernel launch; the result is JSON-ready."""
    entry = module.entry(kernel)
    source = module.source
    if arch is None and module.arch and (profile is None or not (profile.data.get("device") or {}).get(
            "compute_capability")):
        arch = module.arch
    hw = hardware(profile, arch, working_set)
    arch = hw.arch
    graph = cfgmod.build_cfg(entry, source)
    ev = Evaluator(entry, launch)
    path = cfgmod.find_path(graph, ev, trips, default_trip, source)
    accesses = divergence.analyse(entry.instructions, path.accesses, ev.sample)
    lat, lat_notes = latency_table(arch, profile, hw.clock_hz)
    bpc_r = hw.read_Bps / (hw.sms * hw.clock_hz)
    bpc_w = hw.write_Bps / (hw.sms * hw.clock_hz)
    mem = MemoryCosts(hw.load_latency, hw.store_latency, bpc_r, bpc_w,
                      {"load_latency": hw.sources["load_latency"], "store_latency": hw.sources["store_latency"]})
    starts = [b.start for b in graph.blocks]
    ends = [b.end for b in graph.blocks]
    block_of = [0] * len(entry.instructions)
    for b in graph.blocks:
        for i in range(b.start, b.end):
            block_of[i] = b.id
    n_instr = {b.id: len(b) for b in graph.blocks}
    block_runs = cfgmod.block_counts(path.items, len(graph.blocks))
    counts = np.zeros(len(entry.instructions))
    for b in graph.blocks:
        counts[b.start:b.end] = block_runs[b.id]
    length = _run_length(path.items, n_instr)
    trace_ids = trace_of(cfgmod.expand(path.items), starts, ends) if length <= MAX_TRACE else None
    tasks = build_tasks(entry, block_of, trace_ids, lat, LANES[arch], accesses, mem)

    # occupancy
    reg_source = "--registers"
    if registers is None:
        info = None
        if ptx_text is not None:
            from gpuprofiler.pipeline.ptx_source import ptxas_info

            info = ptxas_info(ptx_text, entry.name, arch)
        if info is not None:
            registers, reg_source = info["registers"], f"ptxas -v -arch={arch}"
        else:
            registers = min(255, max(16, live_registers(entry, graph) + 6))
            reg_source = f"estimate: most live 32-bit PTX registers + 6 (no count from ptxas -arch={arch})"
    smem = entry.shared_bytes + launch.dynamic_smem
    occ = occupancy(arch, launch.threads_per_block, registers, smem)
    per_sm = blocks_on_one_sm(launch.blocks, hw.sms)
    resident = min(occ.blocks_per_sm, per_sm)
    wpb = launch.warps_per_block
    sim = simulate_launch(tasks, path.items, starts, ends, per_sm, resident, wpb, hw.schedulers, budget,
                          trace_warps=(0,) if trace else ())
    cycles = sim["cycles"]

    # memory penalty and the uncoalesced count
    warps_total = launch.blocks * wpb
    extra_read = extra_write = 0.0
    uncoalesced = 0.0
    acc_out = []
    for i, acc in accesses.items():
        n_exec = float(counts[i])
        d = acc.to_dict()
        d["executions_per_warp"] = n_exec
        acc_out.append(d)
        if acc.space != "global":
            continue
        if acc.uncoalesced:
            uncoalesced += n_exec
        extra = max(0.0, acc.transactions - acc.ideal) * 32.0 * n_exec * warps_total
        if acc.kind == "store":
            extra_write += extra
        else:
            extra_read += extra
    penalty_s = extra_read / hw.read_Bps + extra_write / hw.write_Bps
    launch_s = hw.launch_per_thread_s * launch.threads + hw.launch_fixed_s
    compute_s = cycles / hw.clock_hz
    predicted = compute_s + launch_s + penalty_s

    # latencies used, and where each came from
    used: dict[str, dict[str, Any]] = {}
    for s in np.nonzero(counts)[0].tolist():
        ins = entry.instructions[s]
        key = f"{tasks.unit[s]}:{ins.opcode}"
        used.setdefault(key, {"unit": tasks.unit[s], "opcode": ins.opcode, "cycles": round(tasks.latency_raw[s], 3),
                              "source": tasks.latency_source[s]})
    from_profile = sorted({v["opcode"] for v in used.values() if v["source"].startswith("profile")})
    defaulted = sorted({v["opcode"] for v in used.values() if not v["source"].startswith("profile")})
    features = {"sim_s": compute_s, "launch_s": launch_s, "penalty_s": penalty_s, "uncoalesced": uncoalesced,
                "threads": float(launch.threads), **cfgmod.cfg_features(graph, path)}
    result: dict[str, Any] = {
        "kernel": entry.name, "ptx": source, "arch": arch,
        "grid": list(launch.grid), "block": list(launch.block), "threads": launch.threads,
        "cycles": cycles, "clock_hz": hw.clock_hz, "compute_s": compute_s, "launch_s": launch_s,
        "penalty_s": penalty_s, "predicted_s": predicted,
        "uncoalesced": uncoalesced, "uncoalesced_requests_total": uncoalesced * warps_total,
        "units": sim["units"], "pipes": sim["pipes"],
        "occupancy": {**occ.to_dict(), "registers_source": reg_source, "blocks_on_busiest_sm": per_sm,
                      "resident_blocks": resident, "waves": per_sm / resident if resident else None},
        "simulation": {k: sim[k] for k in ("method", "warp_instructions_simulated", "seconds",
                                            "rate_warp_instructions_per_s", "simulated_blocks", "simulated_trips")},
        "task_list": {"length": length, "static_instructions": len(entry.instructions),
                      "unit_counts": tasks.unit_counts(counts)},
        "path": {"blocks": [graph.blocks[b].label or f"block{b}" for b in _compress(
            cfgmod.expand(path.items, {run.loop.id: 1 for run in cfgmod.loop_runs(path.items)}))],
                 "active_fraction": path.active_fraction, "branches": path.branches},
        "loops": path.loops, "accesses": acc_out,
        "hardware": hw.to_dict(),
        "latencies": {"from_profile": from_profile, "defaults": defaulted, "used": list(used.values())},
        "features": features,
        "warnings": path.warnings + hw.notes + lat_notes,
    }
    if trace:
        result["trace"] = [{**ev_, "opcode": entry.instructions[ev_["static"]].opcode,
                            "line": entry.instructions[ev_["static"]].line, "unit": tasks.unit[ev_["static"]]}
                           for ev_ in sim["trace"]]
        result["tasks"] = [t._asdict() for t in tasks.tasks(0, limit=2000)]
    if correction is not None:
        result["corrected_s"] = apply_correction(correction, features, predicted)
    return result


def _compress(seq: list[int]) -> list[int]:
    """The block sequence with repeats of a loop shown once (first pass), for display."""
    seen, out = set(), []
    for b in seq:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return out


# ------------------------------------------------------------------------------------------------
# Learned correction (ridge on log ratios, judged by leave-one-kernel-out error)
# ------------------------------------------------------------------------------------------------

FEATURES = ("log_sim_s", "log_launch_s", "penalty_share", "uncoalesced_log", "loops", "path_log_blocks",
            "divergent_branch_fraction")


def feature_vector(f: dict[str, float], predicted: float) -> np.ndarray:
    total = max(predicted, 1e-30)
    return np.array([math.log(max(f["sim_s"], 1e-12)), math.log(max(f["launch_s"], 1e-12)),
                     f["penalty_s"] / total, math.log1p(f["uncoalesced"]), f.get("loops", 0.0),
                     f.get("path_log_blocks", 0.0), f.get("divergent_branch_fraction", 0.0)])


def _ridge(X: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    Z = (X - mu) / sd
    y0 = y.mean()
    w = np.linalg.solve(Z.T @ Z + alpha * np.eye(Z.shape[1]), Z.T @ (y - y0))
    return w, mu, sd, float(y0)


def _apply(model: tuple, X: np.ndarray) -> np.ndarray:
    w, mu, sd, y0 = model
    return y0 + ((X - mu) / sd) @ w


def loko_mape(kernels: Sequence[str], X: np.ndarray, base: np.ndarray, measured: np.ndarray, alpha: float) -> float:
    """Mean absolute percentage error when every kernel is predicted by a fit on the other kernels only."""
    kernels = np.asarray(kernels)
    y = np.log(measured / base)
    errs = []
    for k in np.unique(kernels):
        test = kernels == k
        model = _ridge(X[~test], y[~test], alpha)
        pred = base[test] * np.exp(_apply(model, X[test]))
        errs.extend(np.abs(pred - measured[test]) / measured[test])
    return float(np.mean(errs))


ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)


def fit_correction(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Fit the correction on ``samples`` ({kernel, features, predicted_s, measured_s}).

    Candidates: ridge fits of several strengths, and no correction at all. The candidate is chosen by
    leave-one-kernel-out error inside the training kernels (nested), and the reported ``loko_mape`` is
    the outer leave-one-kernel-out error of that whole procedure; ``base_mape`` is the uncorrected
    model's error on the same samples. Where no ridge fit beats the uncorrected model on held-out
    kernels, the fitted model is the identity (``alpha`` None).
    """
    kernels = [s["kernel"] for s in samples]
    if len(set(kernels)) < 3:
        raise UserError("the correction needs measurements of at least 3 different kernels")
    X = np.array([feature_vector(s["features"], s["predicted_s"]) for s in samples])
    base = np.array([float(s["predicted_s"]) for s in samples])
    meas = np.array([float(s["measured_s"]) for s in samples])
    if np.any(base <= 0) or np.any(meas <= 0):
        raise UserError("predicted and measured times must be positive")
    karr = np.asarray(kernels)

    def choose(mask: np.ndarray) -> float | None:
        ks = karr[mask]
        if len(set(ks)) < 3:
            return None
        scores = {a: loko_mape(ks, X[mask], base[mask], meas[mask], a) for a in ALPHAS}
        none = float(np.mean(np.abs(base[mask] - meas[mask]) / meas[mask]))
        best = min(scores, key=scores.get)
        return best if scores[best] < none else None

    outer = []
    for k in np.unique(karr):
        test = karr == k
        alpha = choose(~test)
        if alpha is None:
            pred = base[test]
        else:
            model = _ridge(X[~test], np.log(meas[~test] / base[~test]), alpha)
            pred = base[test] * np.exp(_apply(model, X[test]))
        outer.extend(np.abs(pred - meas[test]) / meas[test])
    alpha = choose(np.ones(len(samples), dtype=bool))
    n = X.shape[1]
    if alpha is None:
        w, mu, sd, y0 = np.zeros(n), np.zeros(n), np.ones(n), 0.0
    else:
        w, mu, sd, y0 = _ridge(X, np.log(meas / base), alpha)
    return {"features": list(FEATURES), "alpha": alpha, "weights": w.tolist(), "mean": mu.tolist(),
            "scale": sd.tolist(), "intercept": y0, "loko_mape": float(np.mean(outer)),
            "base_mape": float(np.mean(np.abs(base - meas) / meas)), "kernels": sorted(set(kernels)),
            "samples": len(samples)}


def samples_from_measurements(records: Sequence[dict[str, Any]], profile: Any, arch: str | None = None,
                              budget: int = DEFAULT_BUDGET) -> list[dict[str, Any]]:
    """Training samples for :func:`fit_correction` from stored measurements of builtin kernel specs.

    Each (kernel, size) of the records (``measurements.jsonl`` lines; apps and phases other than the
    kernel are skipped) is predicted with the model; its measured time is the median of the records'
    medians. Meaningful only for records and a profile of the same NVIDIA GPU.
    """
    from gpuprofiler.builtin import builtin_specs
    from gpuprofiler.pipeline.specs import spec_launch

    specs = {p.stem: p for p in builtin_specs()}
    groups: dict[tuple[str, int], list[float]] = {}
    for r in records:
        if r.get("kernel") in specs and r.get("phase") == r.get("kernel") and r.get("median_s"):
            groups.setdefault((r["kernel"], int(r["size"])), []).append(float(r["median_s"]))
    arch = normalise_arch(arch or ("sm_" + str((profile.data.get("device") or {}).get("compute_capability") or "90")
                                   .replace(".", "")))
    out = []
    for (name, size), times in sorted(groups.items()):
        sl = spec_launch(specs[name], size, arch)
        r = predict(sl.module, sl.entry.name, sl.launch, profile, arch=arch, working_set=sl.working_set,
                    budget=budget, ptx_text=sl.source.text)
        out.append({"kernel": name, "size": size, "features": r["features"], "predicted_s": r["predicted_s"],
                    "measured_s": float(np.median(times))})
    return out


def apply_correction(model: dict[str, Any], features: dict[str, float], predicted: float) -> float:
    try:
        x = feature_vector(features, predicted)
        m = (np.asarray(model["weights"]), np.asarray(model["mean"]), np.asarray(model["scale"]),
             float(model["intercept"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"bad correction model: {exc}") from None
    if len(m[0]) != len(x):
        raise UserError(f"correction model has {len(m[0])} weights, the model gives {len(x)} features")
    return float(predicted * math.exp(float(_apply(m, x[None, :])[0])))
