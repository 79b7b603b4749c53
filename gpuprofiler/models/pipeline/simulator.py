"""One-SM instruction-pipeline simulator: warp schedulers, sub-pipelines, a scoreboard, barriers, block waves.

Semantics (exact, so small cases can be computed by hand):

* Warps are spread over the ``W`` schedulers round-robin (warp slot k -> scheduler k mod W). Each
  scheduler issues at most one instruction per cycle: the next instruction of its warp that became
  ready first (ties: lowest warp slot).
* A warp issues in order. Its next instruction is *ready* when every register it reads or writes has
  been written back (the scoreboard: a register status table per warp) and its issue latency has passed
  since the warp's previous instruction started (1 cycle; a branch's latency after a branch).
* Four states: issue at cycle t, read operands at t, execute from s = max(t, the cycle its
  sub-pipeline frees) -- an instruction whose pipe is busy waits in that pipe's queue, and its warp
  issues nothing more until it starts --, write back at s + L (its latency). The instruction holds its
  pipe (the functional-unit table) for ``ii`` cycles: 32 / lanes for arithmetic, the bytes it moves over
  the SM's share of bandwidth for global memory, the bank-conflict degree for shared memory. Pipes
  are private to a scheduler except ``mem`` and ``smem``, shared by the SM.
* ``bar.sync`` releases the block's warps when the last one's barrier has executed (its latency).
* ``resident`` blocks run at once; when a block's last warp has written back, the next block starts
  in its place (waves). The run ends when every task list is empty and written back; that cycle is
  the result.
* The clock advances event by event, by the smallest remaining count: to the next cycle while a warp
  is ready but its scheduler was busy, else straight to the earliest cycle a warp becomes ready.

So one warp running a dependent chain of k instructions of latency L takes k*L cycles; n independent
instructions on each of W warps and W schedulers take n - 1 + L cycles (issue-bound); a load of
latency Ld then an add that reads it take Ld + La.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PIPE_NAMES = ("fma", "alu", "fp64", "sfu", "misc", "mem", "smem")
SM_WIDE = frozenset({"mem", "smem"})
FX = 8          # pipe occupancy is kept in 1/256 cycle (fractional initiation intervals of memory)


@dataclass
class Program:
    """What the simulator needs per static instruction, and the order every warp runs them in."""

    trace: Sequence[int]
    latency: Sequence[int]
    ii: Sequence[float]
    pipe: Sequence[str]
    reads: Sequence[tuple[int, ...]]
    writes: Sequence[tuple[int, ...]]
    issue: Sequence[int] | None = None
    barrier: Sequence[bool] | None = None
    unit: Sequence[str] | None = None

    @classmethod
    def from_tasks(cls, tasks: Any, trace: Sequence[int] | None = None) -> Program:
        return cls(list(map(int, tasks.trace if trace is None else trace)), tasks.latency, tasks.ii, tasks.pipe,
                   tasks.reads, tasks.writes, tasks.issue, tasks.barrier, tasks.unit)


@dataclass
class SimResult:
    cycles: int
    warp_instructions: int
    warps: int
    blocks: int
    units: dict[str, dict[str, float]]
    pipes: dict[str, dict[str, float]]
    trace: list[dict[str, Any]] = field(default_factory=list)


def simulate(program: Program, blocks: int = 1, warps_per_block: int = 1, resident: int | None = None,
             schedulers: int = 4, trace_warps: Sequence[int] = (), trace_limit: int = 2000,
             fast_forward: bool = True) -> SimResult:
    """Run ``blocks`` blocks of ``warps_per_block`` warps on one SM; ``resident`` blocks at a time.

    ``fast_forward`` issues a warp's run of private-pipe instructions in one go while no other warp of its
    scheduler is ready earlier: the same schedule with less work (off: the plain cycle loop, for tests).
    """
    if blocks <= 0 or warps_per_block <= 0:
        return SimResult(0, 0, 0, 0, {}, {})
    resident = max(1, min(resident or blocks, blocks))
    n_static = len(program.latency)
    trace = list(program.trace)
    n = len(trace)
    W = max(1, int(schedulers))
    # per static instruction, one tuple: (latency, ii, pipe index, issue delay, deps, writes, barrier)
    pipe_index = {p: k for k, p in enumerate(PIPE_NAMES)}
    for p in program.pipe:
        if p not in pipe_index:
            pipe_index[p] = len(pipe_index)
    n_pipes = len(pipe_index)
    issue = program.issue or [1] * n_static
    barrier = program.barrier or [False] * n_static
    static = []
    for s in range(n_static):
        deps = tuple(dict.fromkeys(tuple(program.reads[s]) + tuple(program.writes[s])))
        static.append((int(program.latency[s]), float(program.ii[s]), pipe_index[program.pipe[s]],
                       int(issue[s]), deps, tuple(program.writes[s]), bool(barrier[s])))
    info = [static[s] for s in trace]           # per trace position
    shared_pipe = [name in SM_WIDE for name in pipe_index]
    # pipe slots: per scheduler for private pipes, one for SM-wide pipes
    slot_of = [[(p if shared_pipe[p] else n_pipes + s * n_pipes + p) for p in range(n_pipes)] for s in range(W)]
    pipe_free = [0] * (n_pipes + W * n_pipes)   # in 1/2^FX cycles
    n_regs = 1 + max([max(t, default=-1) for t in list(program.reads) + list(program.writes)], default=0)

    n_slots = resident * warps_per_block
    if n_slots >= (1 << 20):
        raise ValueError("too many resident warps")
    SH = 20                                          # heap key: ready_time << SH | warp slot
    MASK = (1 << SH) - 1
    sched_of = [k % W for k in range(n_slots)]
    pc = [0] * n_slots
    done = [0] * n_slots
    regs = [[0] * n_regs for _ in range(n_slots)]
    block_of_slot = [k // warps_per_block for k in range(n_slots)]
    block_left = [warps_per_block] * resident      # warps of the block in that slot still running
    block_done = [0] * resident
    bar_wait: list[list[int]] = [[] for _ in range(resident)]
    bar_time = [0] * resident
    state = {"started": resident, "end": 0, "dirty": False}
    heaps: list[list[int]] = [[] for _ in range(W)]
    traced = set(trace_warps)
    events: list[dict[str, Any]] = []
    heappush, heappop = heapq.heappush, heapq.heappop

    if n == 0:
        return SimResult(0, 0, blocks * warps_per_block, blocks, {}, {})

    def ready_at(v: int, at: int) -> int:
        rv = regs[v]
        for x in info[pc[v]][4]:
            at = max(at, rv[x])
        return at

    def release(blk: int) -> None:
        at = bar_time[blk]
        for v in bar_wait[blk]:
            if pc[v] >= n:
                finish(v)
            else:
                heappush(heaps[sched_of[v]], (ready_at(v, at) << SH) | v)
        bar_wait[blk] = []
        bar_time[blk] = 0

    def finish(w: int) -> None:
        blk = block_of_slot[w]
        block_left[blk] -= 1
        last = max(regs[w]) if regs[w] else 0
        done[w] = max(done[w], last)
        block_done[blk] = max(block_done[blk], done[w])
        if block_left[blk] == 0:
            state["end"] = max(state["end"], block_done[blk])
            if state["started"] < blocks:
                state["started"] += 1
                at = block_done[blk]
                block_left[blk] = warps_per_block
                block_done[blk] = 0
                for v in range(blk * warps_per_block, (blk + 1) * warps_per_block):
                    pc[v] = 0
                    heappush(heaps[sched_of[v]], (at << SH) | v)
        elif bar_wait[blk] and len(bar_wait[blk]) == block_left[blk]:
            release(blk)

    for w in range(n_slots):
        heappush(heaps[sched_of[w]], w)
    t = 0
    INF = 1 << 62
    heapreplace = heapq.heapreplace
    t_lat = [x[0] for x in info]
    t_ii = [int(round(x[1] * (1 << FX))) for x in info]   # pipe occupancy in 1/2^FX cycles
    t_pipe = [x[2] for x in info]
    t_idl = [x[3] for x in info]
    t_deps = [x[4] for x in info]
    t_wr = [x[5] for x in info]

    t_kind = [1 if x[6] else 0 for x in info]     # 0 next instruction, 1 barrier, 2 last of the list
    if not t_kind[-1]:
        t_kind[-1] = 2
    # instructions that may be fast-forwarded: private pipe, writes registers, not a barrier or the last one
    t_ff = [1 if (fast_forward and t_kind[i] == 0 and not shared_pipe[info[i][2]] and info[i][5]) else 0
            for i in range(n)]
    sched_list = [(heaps[s], slot_of[s]) for s in range(W)]
    while True:
        nxt = INF
        state["dirty"] = False
        limit = (t + 1) << SH            # heap keys below this are warps ready at cycle t or earlier
        tf = t << FX                     # t in pipe time units
        for h, slots in sched_list:
            if h:
                key = h[0]
                if key < limit:
                    w = key & MASK
                    k = pc[w]
                    sl = slots[t_pipe[k]]
                    pf = pipe_free[sl]
                    if pf <= tf:
                        start = t
                        pipe_free[sl] = tf + t_ii[k]
                    else:       # the pipe is busy: the instruction waits in its queue until it frees
                        pipe_free[sl] = pf + t_ii[k]
                        start = -((-pf) >> FX)
                    wb = start + t_lat[k]
                    rw = regs[w]
                    wr = t_wr[k]
                    if wr:
                        for d in wr:
                            rw[d] = wb
                    elif wb > done[w]:
                        done[w] = wb
                    if traced and w in traced and len(events) < trace_limit:
                        events.append({"warp": w, "task": k, "static": trace[k], "issue": t, "execute": start,
                                       "write_back": wb, "scheduler": sched_of[w]})
                    kind = t_kind[k]
                    k += 1
                    pc[w] = k
                    if kind:
                        heappop(h)
                        done[w] = max(done[w], wb)
                        if kind == 1:
                            blk = block_of_slot[w]
                            bar_wait[blk].append(w)
                            bar_time[blk] = max(bar_time[blk], wb)
                            if len(bar_wait[blk]) == block_left[blk]:
                                release(blk)
                                state["dirty"] = True
                        else:
                            finish(w)
                            state["dirty"] = True
                    else:
                        r = start + t_idl[k - 1]
                        for x in t_deps[k]:  # (if, not max(): this loop is the simulator's hot spot)
                            if rw[x] > r:
                                r = rw[x]
                        if t_ff[k] and not traced:
                            # fast-forward: while no other warp of this scheduler is ready before this one
                            # and its instructions use only this scheduler's own pipes, issue them in a row
                            # (the schedule the cycle loop gives, with less work)
                            ln = len(h)
                            if ln > 1:
                                top = h[1]
                                if ln > 2 and h[2] < top:
                                    top = h[2]
                                top >>= SH
                            else:
                                top = INF
                            while r < top and t_ff[k]:
                                sl = slots[t_pipe[k]]
                                pf = pipe_free[sl]
                                rf = r << FX
                                if pf <= rf:
                                    start = r
                                    pipe_free[sl] = rf + t_ii[k]
                                else:
                                    pipe_free[sl] = pf + t_ii[k]
                                    start = -((-pf) >> FX)
                                wb = start + t_lat[k]
                                for d in t_wr[k]:
                                    rw[d] = wb
                                r = start + t_idl[k]
                                k += 1
                                for x in t_deps[k]:
                                    if rw[x] > r:
                                        r = rw[x]
                            pc[w] = k
                        heapreplace(h, (r << SH) | w)
                if h:
                    key = h[0]
                    if key < limit:
                        key = limit
                    if key < nxt:
                        nxt = key
        if state["dirty"]:
            for hh in heaps:
                if hh:
                    key = hh[0]
                    key = max(key, limit)
                    nxt = min(nxt, key)
        if nxt == INF:
            break
        t = nxt >> SH
    end = state["end"]
    total_warps = blocks * warps_per_block
    issued = n * total_warps
    per_static = [0] * n_static
    for s_ in trace:
        per_static[s_] += 1
    units: dict[str, dict[str, Any]] = {}
    unit_pipe: dict[str, str] = {}
    busy = [0.0] * n_pipes
    for s_, c in enumerate(per_static):
        if c:
            c *= total_warps
            name = program.unit[s_] if program.unit is not None else program.pipe[s_]
            u = units.setdefault(name, {"instructions": 0, "busy_cycles": 0.0})
            u["instructions"] += c
            u["busy_cycles"] += c * float(program.ii[s_])
            unit_pipe[name] = program.pipe[s_]
            busy[pipe_index[program.pipe[s_]]] += c * float(program.ii[s_])
    for name, u in units.items():
        instances = 1 if unit_pipe[name] in SM_WIDE else W
        u["pipe"] = unit_pipe[name]
        u["utilization"] = u["busy_cycles"] / (max(end, 1) * instances)
    pipes = {}
    for name, p in pipe_index.items():
        if busy[p]:
            instances = 1 if shared_pipe[p] else W
            pipes[name] = {"busy_cycles": busy[p], "utilization": busy[p] / (max(end, 1) * instances)}
    return SimResult(int(end), issued, total_warps, blocks, units, pipes, events)
