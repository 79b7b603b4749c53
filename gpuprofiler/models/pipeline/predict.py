"""The PTX pipeline model end to end: PTX + launch + hardware profile -> cycles, seconds and their parts.

predicted_s = launch fixed time + max(dispatch, simulated cycles of the busiest SM / SM clock, DRAM time,
cache time) (``gpuprofiler/models/costs.py``, shared with the max-plus model: the profile's empty-kernel event
time, its time per work-group, and the bandwidths for the kernel's read/write mix and access width over the
traffic of ``traffic.py``). Every hardware figure carries its source: the profile where it measured it, else
a documented default for the compute capability.

The interval is what the profile's measured intervals of the clock, the launch figures and the bandwidth
leave open, the simulated cycles held fixed; ``features`` summarises the prediction's parts and the path.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import positive_time
from gpuprofiler.models.costs import (
    cache_bandwidth,
    cache_capacity,
    dram_bandwidth,
    launch_costs,
    scattered,
)
from gpuprofiler.models.pipeline import cfg as cfgmod
from gpuprofiler.models.pipeline import divergence, traffic
from gpuprofiler.models.pipeline.occupancy import (
    SM_RESOURCES,
    blocks_on_one_sm,
    normalise_arch,
    occupancy,
)
from gpuprofiler.models.pipeline.ptx_parser import Entry, Module
from gpuprofiler.models.pipeline.ptx_source import ptxas_info
from gpuprofiler.models.pipeline.simulator import Program, simulate
from gpuprofiler.models.pipeline.tasks import (
    DEFAULT_LATENCY,
    L1_SECTORS_PER_CYCLE,
    LANES,
    MemoryCosts,
    build_tasks,
    latency_table,
    trace_of,
)
from gpuprofiler.models.pipeline.values import Evaluator, Launch
from gpuprofiler.profile.hardware import REFERENCE_BOARDS, Figure, view

DEFAULT_BUDGET = 250_000


@dataclass
class Hardware:
    """The device the model predicts for, every figure with its source (and the interval of those measured
    with one, for the prediction's interval)."""

    arch: str
    sms: int
    clock_hz: float
    schedulers: int
    read_Bps: float
    write_Bps: float
    load_latency: float
    store_latency: float
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "sms": self.sms, "clock_hz": self.clock_hz, "schedulers": self.schedulers,
                "read_Bps": self.read_Bps, "write_Bps": self.write_Bps, "load_latency_cycles": self.load_latency,
                "store_latency_cycles": self.store_latency, "sources": self.sources}

    def bound(self, name: str) -> tuple[float, float]:
        return self.bounds.get(name, (getattr(self, name), getattr(self, name)))


def _interp_log(points: list[tuple[float, float]], x: float) -> float | None:
    pts = sorted((a, b) for a, b in points if a and a > 0 and b and b > 0)
    if not pts:
        return None
    xs = np.log([p[0] for p in pts])
    ys = np.array([p[1] for p in pts])
    return float(np.interp(math.log(max(x, 1.0)), xs, ys))


def hardware(profile: Any | None, arch: str | None, working_set: float | None = None) -> Hardware:
    """Hardware figures from the profile where measured, else the defaults of ``arch`` (the profile's own
    architecture when None)."""
    hw = view(profile)
    arch = normalise_arch(arch or hw.arch)
    d = REFERENCE_BOARDS[arch]
    src: dict[str, str] = {}
    bounds: dict[str, tuple[float, float]] = {}
    notes: list[str] = []
    default = f"default {arch} ({d['board']})"

    def positive(fig: Figure) -> float | None:
        return fig.value if fig.ok and fig.value > 0 else None

    sms_fig = hw.compute_units.or_default(d["sms"], default)
    sms, src["sms"] = sms_fig.value, sms_fig.source
    clock = hw.clock_hz.or_default(d["clock_hz"], default)
    hz, src["clock_hz"] = clock.value, clock.source
    if clock.interval:
        bounds["clock_hz"] = clock.interval
    read, write = hw.figure("bandwidth.read_Bps"), hw.figure("bandwidth.write_Bps")
    rd, wr = positive(read), positive(write)
    if working_set and hw.bandwidth_curve:
        at = _interp_log(hw.bandwidth_curve, working_set)
        if at:
            rd = at
            src["read_Bps"] = f"profile bandwidth.working_set_curve at the working set ({working_set:.3g} B)"
    if rd and "read_Bps" not in src:
        src["read_Bps"] = "profile bandwidth.read_Bps"
        if read.interval:
            bounds["read_Bps"] = read.interval
    if not rd:
        rd, src["read_Bps"] = d["bandwidth_Bps"], default
    if wr:
        src["write_Bps"] = "profile bandwidth.write_Bps"
        if write.interval:
            bounds["write_Bps"] = write.interval
    else:
        wr, src["write_Bps"] = rd, src["read_Bps"]
        if "read_Bps" in bounds:
            bounds["write_Bps"] = bounds["read_Bps"]

    lat_default = DEFAULT_LATENCY[arch]
    load = None
    if working_set and hw.latency_curve:
        s = _interp_log(hw.latency_curve, working_set)
        if s:
            load = s * hz
            src["load_latency"] = f"profile latency_curve at the working set ({working_set:.3g} B) x clock"
    if load is None:
        for key in ("memory.dram_latency_s", "memory.read_s"):
            s = positive(hw.figure(key))
            if s:
                load, src["load_latency"] = s * hz, f"profile {key} x clock"
                break
    if load is None:
        if working_set and working_set <= d["l2_bytes"]:
            load, src["load_latency"] = float(lat_default["l2"]), f"default {arch} (L2 hit: working set fits L2)"
        else:
            load, src["load_latency"] = float(lat_default["dram"]), f"default {arch} (DRAM)"
    s = positive(hw.figure("memory.write_s"))
    if s:
        store, src["store_latency"] = s * hz, "profile memory.write_s x clock"
    else:
        store, src["store_latency"] = float(lat_default["dram"]), f"default {arch} (DRAM)"
    if profile is not None and not hw.is_nvidia_gpu:
        notes.append(f"the profile's device ({hw.name}, {hw.kind}) is not an NVIDIA "
                     f"GPU: the {arch} SM model is fed with its clock, compute units, bandwidth, memory latency "
                     "and launch figures, so the prediction describes a hypothetical SM-based device, not this one")
    return Hardware(arch, int(sms), float(hz), SM_RESOURCES[arch]["schedulers"], float(rd), float(wr), float(load),
                    float(store), src, notes, bounds)


def memory_costs(hw: Hardware, profile: Any | None, flow: traffic.Traffic, launch: Launch,
                 capacity: float | None) -> MemoryCosts:
    """Each global load's expected latency: the L1 latency for its L1 hits, the cache's latency at its buffer's
    size for the sectors the cache serves, the DRAM latency for those from DRAM (profile figures, else the
    architecture's defaults)."""
    defaults = DEFAULT_LATENCY[hw.arch]
    curve = view(profile).latency_curve
    l1 = curve[0][1] * hw.clock_hz if curve else float(defaults["l1"])
    dram_fig = view(profile).figure("memory.dram_latency_s")
    dram = dram_fig.value * hw.clock_hz if dram_fig.ok else float(defaults["dram"])
    latency = {}
    for i, a in flow.accesses.items():
        if a.kind == "store":
            continue
        size = launch.buffers.get(a.param) if a.param is not None else None
        at = min(size, capacity) if size and capacity else capacity
        cache = (_interp_log(curve, at) * hw.clock_hz) if curve and at else float(defaults["l2"])
        served = (1 - a.dram_share) * cache + a.dram_share * dram
        latency[i] = (1 - a.l1_miss) * l1 + a.l1_miss * served
    how = ("profile latency curve (L1: its smallest working set; cache: at the buffer's size) and memory.dram_latency_s"
           if curve else f"default {hw.arch} L1, L2 and DRAM latencies")
    return MemoryCosts(latency, hw.load_latency, hw.store_latency, L1_SECTORS_PER_CYCLE[hw.arch],
                       {"load_latency": f"expected over L1 hits, cache and DRAM ({how})",
                        "store_latency": hw.sources["store_latency"]})


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


def _expanded_length(items: list, n_instr: dict[int, int], overrides: dict[int, int] | None = None) -> int:
    """Instructions of a path with its loops unrolled (``overrides``: trip counts by loop id), without building
    it (a trip count of 2^31 must not build a list of 2^31 passes to find that out)."""
    total = 0
    for it in items:
        if isinstance(it, cfgmod.LoopRun):
            trip = (overrides or {}).get(it.loop.id, it.trip)
            if trip > 0:
                total += (trip - 1) * _expanded_length(it.items, n_instr, overrides)
                total += _expanded_length(it.items[:it.prefix], n_instr, overrides)
        else:
            total += n_instr[it]
    return total


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
MAX_OVER_BUDGET = 100   # a simulation may run to this many times the budget (the shortened loops' own floor)


def simulate_launch(tasks: Any, path_items: list, starts: list[int], ends: list[int], blocks: int, resident: int,
                    warps_per_block: int, schedulers: int, budget: int = DEFAULT_BUDGET,
                    trace_warps: Sequence[int] = ()) -> dict[str, Any]:
    """Cycles of ``blocks`` blocks on one SM, exact within ``budget`` warp-instructions, else extrapolated.

    Extrapolation is linear in waves (as many waves as the budget allows, and half as many, simulated) and, if one
    task list alone is too long, linear in the trip count of the loop that dominates it (two shortened
    trip counts simulated): a bilinear fit through four simulations.
    """
    n_instr = {b: ends[b] - starts[b] for b in range(len(starts))}
    length = _run_length(path_items, n_instr)
    plan_blocks = [blocks]
    if blocks * warps_per_block * length > budget and blocks > 2 * resident:
        # as many waves as the budget allows (two runs): the first waves also fill the pipelines, and later
        # blocks start as single blocks finish, not in lockstep, so the slope settles only over several waves
        waves = max(2, int(budget // max(1.5 * resident * warps_per_block * length, 1)))
        waves = min(waves, blocks // resident)
        plan_blocks = [resident * max(1, waves // 2), resident * waves]
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
    # what the simulations will cost, before anything is built: a loop the budget cannot shorten (a second long
    # loop, an inner loop of the dominant one) is refused by name rather than built and run for hours
    for tr in trips:
        steps = _expanded_length(path_items, n_instr, None if tr is None else {loop.loop.id: tr})
        work = steps * warps_per_block * sum(plan_blocks)
        if steps > MAX_TRACE or work > MAX_OVER_BUDGET * budget:
            long_loops = [f"{r.info.get('label') or 'loop'} (line {r.info.get('line')}, {r.trip} passes)"
                          for r in cfgmod.loop_runs(path_items) if r.trip >= 4 and (loop is None or r is not loop)]
            raise UserError(f"simulating this launch would take {work:.3g} warp-instructions ({steps:.3g} per warp) "
                            f"against a budget of {budget}"
                            + (f"; too long to simulate: {', '.join(long_loops)}" if long_loops else "")
                            + "; give their trip counts with --trip LABEL=N, or a larger --budget")
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

@dataclass
class Options:
    """How to run the model on one launch: the architecture (default: the profile's, else the PTX target),
    trip counts of loops not known statically (by label or line; ``default_trip`` for the rest), registers
    per thread (default: ``ptxas -v`` on ``ptx_text``, else an estimate), the bytes the kernel touches (picks
    cache latency and bandwidth from the profile's curves), the simulation budget in warp-instructions, and
    whether to keep warp 0's trace."""

    arch: str | None = None
    trips: dict[str, int] = field(default_factory=dict)
    default_trip: int = 1
    registers: int | None = None
    working_set: float | None = None
    budget: int = DEFAULT_BUDGET
    trace: bool = False
    ptx_text: str | None = None


def predict(module: Module, kernel: str | None, launch: Launch, profile: Any | None = None,
            options: Options | None = None) -> dict[str, Any]:
    """Run the whole model for one kernel launch; the result is JSON-ready."""
    o = options or Options()
    arch, trips, default_trip, registers = o.arch, o.trips, o.default_trip, o.registers
    working_set, budget, trace, ptx_text = o.working_set, o.budget, o.trace, o.ptx_text
    entry = module.entry(kernel)
    source = module.source
    if arch is None and module.arch and view(profile).arch is None:
        arch = module.arch
    hw = hardware(profile, arch, working_set)
    arch = hw.arch
    graph = cfgmod.build_cfg(entry, source)
    ev = Evaluator(entry, launch)
    path = cfgmod.find_path(graph, ev, trips, default_trip, source)
    accesses = divergence.analyse(entry.instructions, path.accesses, ev.sample)
    lat, lat_notes = latency_table(arch, profile, hw.clock_hz)
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
    capacity = cache_capacity(profile, REFERENCE_BOARDS[arch]["l2_bytes"])
    flow = traffic.analyse(accesses, path.accesses, counts, launch, ev.sample, len(entry.params), capacity.value)
    mem = memory_costs(hw, profile, flow, launch, capacity.value)
    tasks = build_tasks(entry, block_of, trace_ids, lat, LANES[arch], accesses, mem)

    # occupancy
    reg_source = "--registers"
    if registers is None:
        info = None
        if ptx_text is not None:
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

    # the uncoalesced count, and the memory bounds
    warps_total = launch.blocks * wpb
    uncoalesced = 0.0
    acc_out = []
    for i, acc in accesses.items():
        n_exec = float(counts[i])
        d = acc.to_dict()
        d["executions_per_warp"] = n_exec
        if i in flow.accesses:
            f = flow.accesses[i]
            d.update(param=f.param, l1_miss=round(f.l1_miss, 4), dram_share=round(f.dram_share, 4),
                     latency_cycles=round(mem.latency.get(i, mem.default_latency), 2))
        acc_out.append(d)
        if acc.space == "global" and acc.uncoalesced:
            uncoalesced += n_exec
    dram = dram_bandwidth(profile, flow.dram_read, flow.dram_write, flow.width, REFERENCE_BOARDS[arch]["bandwidth_Bps"])
    cache = cache_bandwidth(profile)
    costs, (costs_lo, costs_hi) = launch_costs(profile, launch.threads, launch.blocks)
    dram_bytes = flow.dram_read + flow.dram_write
    scatter, scatter_w = scattered(profile, dram.value), scattered(profile, dram.value, write=True)
    compute_s = cycles / hw.clock_hz
    bounds = {"compute": compute_s, "dispatch": costs.dispatch_s,
              "dram": (dram_bytes / dram.value + flow.dram_scattered * scatter.value
                       + flow.dram_scattered_writes * scatter_w.value),
              "cache": flow.cache_bytes / cache.value if cache.ok else 0.0}
    limit = max(bounds, key=bounds.get)
    predicted = positive_time(costs.total(max(compute_s, bounds["dram"], bounds["cache"])),
                              f"{source}: the pipeline model of {entry.name}")
    launch_s = costs.fixed_s
    penalty_s = predicted - launch_s - compute_s   # what the memory or dispatch bound adds to the simulation
    # the range the profile's measured intervals leave open, the simulated cycles held fixed
    (clk_lo, clk_hi), (bw_lo, bw_hi) = hw.bound("clock_hz"), dram.bounds()
    (sc_lo, sc_hi), (sw_lo, sw_hi) = scatter.bounds(), scatter_w.bounds()
    low = costs_lo.total(max(cycles / clk_hi, dram_bytes / bw_hi + flow.dram_scattered * sc_lo
                             + flow.dram_scattered_writes * sw_lo, bounds["cache"]))
    high = costs_hi.total(max(cycles / clk_lo, dram_bytes / bw_lo + flow.dram_scattered * sc_hi
                              + flow.dram_scattered_writes * sw_hi, bounds["cache"]))

    glob = [(float(counts[i]), acc.transactions) for i, acc in accesses.items() if acc.space == "global"]
    weight = sum(c for c, _ in glob)
    features = {"sim_s": compute_s, "launch_s": launch_s, "penalty_s": penalty_s, "uncoalesced": uncoalesced,
                "threads": float(launch.threads), **cfgmod.cfg_features(graph, path),
                # the learned correction's features (gpuprofiler.models.correction.FEATURES)
                "launch_share": launch_s / predicted, "dram_share": bounds["dram"] / predicted,
                "cache_share": bounds["cache"] / predicted, "compute_share": compute_s / predicted,
                "log_work_items": math.log10(max(launch.threads, 1)),
                "sectors_per_request": sum(c * t for c, t in glob) / weight if weight else 0.0,
                "occupancy": occ.warps_per_sm / SM_RESOURCES[arch]["max_warps"],
                "int_share": _int_share(entry)}

    # latencies used, and where each came from
    used: dict[str, dict[str, Any]] = {}
    for s in np.nonzero(counts)[0].tolist():
        ins = entry.instructions[s]
        key = f"{tasks.unit[s]}:{ins.opcode}"
        used.setdefault(key, {"unit": tasks.unit[s], "opcode": ins.opcode, "cycles": round(tasks.latency_raw[s], 3),
                              "source": tasks.latency_source[s]})
    from_profile = sorted({v["opcode"] for v in used.values() if v["source"].startswith("profile")})
    defaulted = sorted({v["opcode"] for v in used.values() if not v["source"].startswith("profile")})
    result: dict[str, Any] = {
        "kernel": entry.name, "ptx": source, "arch": arch,
        "grid": list(launch.grid), "block": list(launch.block), "threads": launch.threads,
        "cycles": cycles, "clock_hz": hw.clock_hz, "compute_s": compute_s, "launch_s": launch_s,
        "penalty_s": penalty_s, "predicted_s": predicted, "interval_s": [min(low, predicted), max(high, predicted)],
        "interval_method": "the profile's intervals of the clock, launch figures and bandwidth, the simulated cycles "
                           "held fixed (the model's own error is not in it)",
        "dispatch_s": costs.dispatch_s, "dram_s": bounds["dram"], "cache_s": bounds["cache"], "limited_by": limit,
        "traffic": {**flow.to_dict(), "dram_bandwidth_Bps": dram.value, "dram_bandwidth_source": dram.source,
                    "cache_bandwidth_Bps": cache.value, "cache_bandwidth_source": cache.source,
                    "cache_capacity_bytes": capacity.value, "cache_capacity_source": capacity.source,
                    "scattered_read_s": scatter.value, "scattered_read_source": scatter.source,
                    "scattered_write_s": scatter_w.value, "scattered_write_source": scatter_w.source,
                    "launch_source": costs.source},
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
    return result


def _int_share(entry: Entry) -> float:
    """Share of the kernel's static instructions that are integer arithmetic (address and index work)."""
    ops = [i.opcode for i in entry.instructions]
    ints = [o for o in ops if any(t in o.split(".") for t in ("s32", "u32", "s64", "u64", "b32", "b64"))
            and not o.startswith(("ld", "st", "atom", "cvta", "mov"))]
    return len(ints) / len(ops) if ops else 0.0


def _compress(seq: list[int]) -> list[int]:
    """The block sequence with repeats of a loop shown once (first pass), for display."""
    seen, out = set(), []
    for b in seq:
        if b not in seen:
            seen.add(b)
            out.append(b)
    return out
