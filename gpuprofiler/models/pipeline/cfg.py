"""Basic blocks, control-flow graph, loops with static trip counts, and the path most threads take.

Blocks start at the entry, at labels and after branches; edges follow ``bra`` targets and fall-through.
Loops are natural loops of back edges (an edge to a block that dominates its source); retreating
edges that are not back edges (irreducible flow) are refused, naming the line.

The path is found by walking the CFG with the launch-known values (:mod:`values`): at a branch, the
side most of the still-active sampled threads take (a tie falls through); at a loop, its controlling
exit test is evaluated on two iterations: the difference of its two operands, x_k = a_k - b_k, must
change by a loop-invariant step d per iteration (an induction variable whose start, step and bound
come from constants, parameters and indices), and the number of passes is the first k at which the
test leaves, in closed form per thread; a warp runs as many passes as its slowest lane, and the loop
gets the median over the sampled warps. Tests that are not linear are iterated (up to
:data:`MAX_ITERATE` passes); tests on loaded data give an unknown trip count, replaced by the user's
``--trip`` or 1, with a warning naming the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.ptx_parser import Entry, Instruction
from gpuprofiler.models.pipeline.values import Evaluator, as_type

MAX_ITERATE = 1024
MAX_WALK_STEPS = 200_000


@dataclass
class Block:
    id: int
    label: str | None
    start: int
    end: int                      # instruction indices [start, end)
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)
    taken: int | None = None      # successor of a taken (conditional) branch
    fall: int | None = None       # fall-through successor

    def __len__(self) -> int:
        return self.end - self.start


@dataclass
class Loop:
    id: int
    header: int
    latches: list[int]
    body: set[int]
    line: int
    parent: int | None = None
    depth: int = 1


@dataclass
class CFG:
    entry: Entry
    blocks: list[Block]
    loops: list[Loop]
    idom: list[int | None]

    def loop_at(self, header: int) -> Loop | None:
        for lp in self.loops:
            if lp.header == header:
                return lp
        return None

    def dominates(self, a: int, b: int) -> bool:
        while b is not None:
            if a == b:
                return True
            b = self.idom[b]
        return False


def _ends_block(ins: Instruction) -> bool:
    return ins.base in ("bra", "ret", "exit", "trap")


def build_cfg(entry: Entry, source: str = "<ptx>") -> CFG:
    """Basic blocks, edges, dominators and natural loops of ``entry``."""
    code = entry.instructions
    n = len(code)
    if n == 0:
        raise UserError(f"{source}: kernel {entry.name} has no instructions")
    leaders = {0}
    for idx in entry.labels.values():
        if idx < n:
            leaders.add(idx)
    for i, ins in enumerate(code):
        if _ends_block(ins) and i + 1 < n:
            leaders.add(i + 1)
    starts = sorted(leaders)
    label_of = {}
    for lab, idx in entry.labels.items():
        label_of.setdefault(idx, lab)
    blocks = [Block(k, label_of.get(s), s, starts[k + 1] if k + 1 < len(starts) else n) for k, s in enumerate(starts)]
    block_at = {b.start: b.id for b in blocks}

    def block_of_label(lab: str, line: int) -> int:
        idx = entry.labels[lab]
        if idx >= n:
            raise UserError(f"{source}:{line}: branch to {lab}, which labels the end of {entry.name} "
                            "without an instruction")
        return block_at[idx]

    for b in blocks:
        last = code[b.end - 1]
        if last.base == "bra":
            b.taken = block_of_label(last.target, last.line)
            b.succs.append(b.taken)
            if last.guard is not None and b.end < n:
                b.fall = block_at[b.end]
                if b.fall != b.taken:
                    b.succs.append(b.fall)
        elif last.base in ("ret", "exit", "trap"):
            if last.guard is not None and b.end < n:
                b.fall = block_at[b.end]
                b.succs.append(b.fall)
        elif b.end < n:
            b.fall = block_at[b.end]
            b.succs.append(b.fall)
    for b in blocks:
        for s in b.succs:
            blocks[s].preds.append(b.id)
    idom = _dominators(blocks)
    loops = _loops(blocks, idom, code, source)
    return CFG(entry, blocks, loops, idom)


def _rpo(blocks: list[Block]) -> list[int]:
    seen, order = set(), []
    stack = [(0, iter(blocks[0].succs))]
    seen.add(0)
    while stack:
        node, it = stack[-1]
        for s in it:
            if s not in seen:
                seen.add(s)
                stack.append((s, iter(blocks[s].succs)))
                break
        else:
            order.append(node)
            stack.pop()
    return order[::-1]


def _dominators(blocks: list[Block]) -> list[int | None]:
    """Immediate dominators (Cooper, Harvey & Kennedy); unreachable blocks get None."""
    order = _rpo(blocks)
    pos = {b: i for i, b in enumerate(order)}
    idom: list[int | None] = [None] * len(blocks)
    idom[0] = 0
    changed = True
    while changed:
        changed = False
        for b in order[1:]:
            preds = [p for p in blocks[b].preds if idom[p] is not None and p in pos]
            if not preds:
                continue
            new = preds[0]
            for p in preds[1:]:
                a, c = p, new
                while a != c:
                    while pos[a] > pos[c]:
                        a = idom[a]
                    while pos[c] > pos[a]:
                        c = idom[c]
                new = a
            if idom[b] != new:
                idom[b] = new
                changed = True
    idom[0] = None
    return idom


def _loops(blocks: list[Block], idom: list[int | None], code: list[Instruction], source: str) -> list[Loop]:
    def dominates(a: int, b: int | None) -> bool:
        while b is not None:
            if a == b:
                return True
            b = idom[b]
        return False

    order = _rpo(blocks)
    pos = {b: i for i, b in enumerate(order)}
    headers: dict[int, list[int]] = {}
    for b in order:
        for s in blocks[b].succs:
            if pos.get(s, -1) <= pos[b]:            # a retreating edge
                if not dominates(s, b):
                    line = code[blocks[b].end - 1].line
                    raise UserError(f"{source}:{line}: irreducible control flow (a jump back into a loop "
                                    "that does not enter through its header) is not supported")
                headers.setdefault(s, []).append(b)
    loops = []
    for h, latches in sorted(headers.items(), key=lambda kv: pos[kv[0]]):
        body = {h}
        stack = [u for u in latches if u != h]
        body.update(stack)
        while stack:
            u = stack.pop()
            for p in blocks[u].preds:
                if p not in body:
                    body.add(p)
                    stack.append(p)
        loops.append(Loop(len(loops), h, sorted(latches), body, code[blocks[h].start].line))
    for lp in loops:   # innermost enclosing loop
        outer = [o for o in loops if o is not lp and lp.header in o.body and lp.body <= o.body]
        if outer:
            lp.parent = min(outer, key=lambda o: len(o.body)).id
    for lp in loops:
        d, p = 1, lp.parent
        while p is not None:
            d, p = d + 1, loops[p].parent
        lp.depth = d
    return loops


# ------------------------------------------------------------------------------------------------
# The path most threads take
# ------------------------------------------------------------------------------------------------

@dataclass
class LoopRun:
    """A loop on the path: ``items`` is one pass; the last pass stops after ``prefix`` items (the exit test)."""

    loop: Loop
    trip: int
    items: list
    prefix: int
    info: dict[str, Any]


def expand(items: list, overrides: dict[int, int] | None = None) -> list[int]:
    """The block sequence of a path, loops unrolled by their trip counts (``overrides`` by loop id)."""
    out: list[int] = []
    for it in items:
        if isinstance(it, LoopRun):
            trip = (overrides or {}).get(it.loop.id, it.trip)
            body = expand(it.items, overrides)
            if trip > 0:
                out.extend(body * (trip - 1))
                out.extend(expand(it.items[:it.prefix], overrides))
        else:
            out.append(it)
    return out


def block_counts(items: list, n_blocks: int, mult: float = 1.0, out: np.ndarray | None = None) -> np.ndarray:
    """How many times each block runs on the path (per warp)."""
    if out is None:
        out = np.zeros(n_blocks)
    for it in items:
        if isinstance(it, LoopRun):
            if it.trip > 0:
                block_counts(it.items, n_blocks, mult * (it.trip - 1), out)
                block_counts(it.items[:it.prefix], n_blocks, mult, out)
        else:
            out[it] += mult
    return out


def loop_runs(items: list) -> list[LoopRun]:
    out = []
    for it in items:
        if isinstance(it, LoopRun):
            out.append(it)
            out.extend(loop_runs(it.items))
    return out


@dataclass
class Path:
    items: list
    branches: list[dict[str, Any]]
    loops: list[dict[str, Any]]
    warnings: list[str]
    accesses: dict[int, dict[str, Any]]
    active_fraction: float


class Walker:
    """Walks the CFG with an :class:`Evaluator`, recording branches, loops and memory addresses."""

    def __init__(self, cfg: CFG, ev: Evaluator, trips: dict[str, int] | None = None, default_trip: int = 1,
                 source: str = "<ptx>"):
        self.cfg, self.ev, self.source = cfg, ev, source
        self.code = cfg.entry.instructions
        self.trips = trips or {}
        self.default_trip = default_trip
        self.active = np.ones(ev.sample.size, dtype=bool)
        self.recording = True
        self.branches: list[dict[str, Any]] = []
        self.loop_info: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.accesses: dict[int, dict[str, Any]] = {}
        self.steps = 0
        self.test_values: dict[int, list[Any]] = {}
        self.test_of: dict[int, int | None] = {}

    def run(self) -> Path:
        items, _ = self.region(0, None)
        return Path(items, self.branches, self.loop_info, self.warnings, self.accesses,
                    float(self.active.mean()))

    def warn(self, text: str) -> None:
        if self.recording and text not in self.warnings:
            self.warnings.append(text)

    # -- blocks ------------------------------------------------------------------------------
    def exec_block(self, b: int) -> None:
        blk = self.cfg.blocks[b]
        ev = self.ev
        for i in range(blk.start, blk.end):
            ins = self.code[i]
            if ins.base in ("ld", "st", "atom", "red", "ldu", "prefetch") and ins.space != "param":
                if self.recording and i not in self.accesses:
                    self.record_access(ins)
                elif not self.recording and i in self.accesses and "address2" not in self.accesses[i]:
                    self.accesses[i]["address2"] = self.ev.address(ins)[0]  # a loop's second pass
            ev.execute(ins)

    def record_access(self, ins: Instruction) -> None:
        addr, why = self.ev.address(ins)
        mask = self.active.copy()
        if ins.guard is not None:
            g = self.ev.env.get(ins.guard)
            if g is not None:
                mask &= (~g if ins.guard_neg else g)
        if addr is not None:
            addr = np.broadcast_to(np.asarray(addr, dtype=np.int64), mask.shape).copy()
        self.accesses[ins.index] = {"address": addr, "why": why, "mask": mask}

    # -- walking -------------------------------------------------------------------------------
    def region(self, start: int, loop: Loop | None) -> tuple[list, int | None]:
        """Blocks from ``start`` until the path leaves ``loop`` or returns to its header."""
        items: list = []
        b: int | None = start
        first = True
        while b is not None:
            self.steps += 1
            if self.steps > MAX_WALK_STEPS:
                raise UserError(f"{self.source}:{self.code[self.cfg.blocks[b].start].line}: the control flow "
                                "could not be followed (too many steps)")
            lp = self.cfg.loop_at(b)
            if lp is not None and not (loop is not None and lp.id == loop.id and first):
                if loop is not None and lp.id == loop.id:
                    return items, b
                run, nxt = self.run_loop(lp)
                items.append(run)
                b = nxt
                first = False
                if loop is not None and (b is None or b not in loop.body or b == loop.header):
                    return items, b
                continue
            first = False
            self.exec_block(b)
            items.append(b)
            nxt = self.decide(b, loop)
            if loop is not None and (nxt is None or nxt not in loop.body or nxt == loop.header):
                return items, nxt
            b = nxt
        return items, None

    def decide(self, b: int, loop: Loop | None) -> int | None:
        blk = self.cfg.blocks[b]
        last = self.code[blk.end - 1]
        if last.base not in ("bra", "ret", "exit", "trap") or last.guard is None:
            return blk.taken if last.base == "bra" else (None if last.base in ("ret", "exit", "trap") else blk.fall)
        taken_succ = blk.taken if last.base == "bra" else None
        if loop is not None and self.is_test(loop, b):
            # the loop's controlling test: record it and stay in the loop
            self.record_test(loop, b, last)
            return taken_succ if (taken_succ is not None and taken_succ in loop.body) else blk.fall
        g = self.ev.env.get(last.guard)
        if loop is not None:
            inside = [s for s in (taken_succ, blk.fall) if s is not None and s in loop.body]
            if len(inside) == 1:
                if g is not None and self.recording:
                    tk = (~g if last.guard_neg else g)
                    tk = np.broadcast_to(tk, self.active.shape)
                    leave = tk if taken_succ not in loop.body else ~tk
                    frac = float(leave[self.active].mean()) if self.active.any() else 0.0
                    if frac > 0.5:
                        self.warn(f"line {last.line}: most threads leave loop {loop.id} (line {loop.line}) here "
                                  "on its first pass; the model keeps them in the loop")
                return inside[0]
        if g is None:
            why = self.ev.why.get(last.guard, "")
            self.warn(f"line {last.line}: branch condition not known statically ({why}); assumed not taken")
            self.branch_stat(last, None)
            return blk.fall
        tk = np.broadcast_to(~g if last.guard_neg else g, self.active.shape)
        frac = float(tk[self.active].mean()) if self.active.any() else 0.0
        self.branch_stat(last, tk)
        go = frac > 0.5
        if self.recording:
            self.active = self.active & (tk if go else ~tk)
        return taken_succ if go else blk.fall

    def branch_stat(self, ins: Instruction, taken: np.ndarray | None) -> None:
        if not self.recording:
            return
        if taken is None:
            self.branches.append({"line": ins.line, "taken_fraction": None, "divergent_warps": None})
            return
        w = self.ev.sample.warp
        act = self.active
        n = self.ev.sample.n_warps
        any_t = np.bincount(w[act & taken], minlength=n) > 0
        any_f = np.bincount(w[act & ~taken], minlength=n) > 0
        has = np.bincount(w[act], minlength=n) > 0
        frac = float(taken[act].mean()) if act.any() else 0.0
        self.branches.append({"line": ins.line, "taken_fraction": frac,
                              "divergent_warps": float((any_t & any_f).sum() / max(has.sum(), 1))})

    # -- loops ---------------------------------------------------------------------------------
    def test_block(self, loop: Loop) -> int | None:
        """The exit test that controls the trip count: in a latch, else the header, else any exit."""
        exits = [b for b in sorted(loop.body) if any(s not in loop.body for s in self.cfg.blocks[b].succs)
                 and self.code[self.cfg.blocks[b].end - 1].guard is not None]
        for b in loop.latches:
            if b in exits:
                return b
        if loop.header in exits:
            return loop.header
        return exits[0] if exits else None

    def is_test(self, loop: Loop, b: int) -> bool:
        return b == self.test_of.get(loop.id, -1)

    def record_test(self, loop: Loop, b: int, last: Instruction) -> None:
        key = loop.id
        setp = self._setp_for(b, last)
        vals: Any = None
        if setp is not None:
            ct = setp.type
            cmp = next((m for m in setp.mods if m in ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")),
                       None)
            a = self.ev.value(setp.operands[1], setp)
            c = self.ev.value(setp.operands[2], setp)
            if a is not None and c is not None and cmp is not None and ct and ct[0] in "sub":
                if cmp in ("lo", "ls", "hi", "hs") and ct[0] == "s":
                    ct = "u" + ct[1:]
                vals = (cmp, as_type(a, ct), as_type(c, ct))
            elif a is None or c is None:
                op = setp.operands[1] if a is None else setp.operands[2]
                vals = ("unknown", self.ev.reason(op, setp))
        g = self.ev.env.get(last.guard)
        stay = None
        if g is not None:
            tk = ~g if last.guard_neg else g
            blk = self.cfg.blocks[b]
            stay = tk if (blk.taken is not None and blk.taken in loop.body) else ~tk
            stay = np.broadcast_to(stay, self.active.shape)
        self.test_values.setdefault(key, []).append((vals, stay, setp))

    def _setp_for(self, b: int, last: Instruction) -> Instruction | None:
        blk = self.cfg.blocks[b]
        for i in range(blk.end - 2, blk.start - 1, -1):
            ins = self.code[i]
            if last.guard in ins.dsts:
                if ins.base == "setp" and ins.guard is None and ins.dsts[0] == last.guard and \
                        not any(m in ("and", "or", "xor") for m in ins.mods):
                    srcs = set(ins.srcs)
                    if any(srcs & set(self.code[j].dsts) for j in range(i + 1, blk.end - 1)):
                        return None
                    return ins
                return None
        return None

    def run_loop(self, loop: Loop) -> tuple[LoopRun, int | None]:
        tb = self.test_block(loop)
        self.test_of[loop.id] = tb
        self.test_values[loop.id] = []
        line = loop.line
        label = self.cfg.blocks[loop.header].label or f"block{loop.header}"
        recording = self.recording
        active0 = self.active.copy()
        env0 = dict(self.ev.env)
        items, nxt = self.region(loop.header, loop)
        env1 = dict(self.ev.env)
        why1 = dict(self.ev.why)
        self.recording = False
        self.region(loop.header, loop)
        env2 = dict(self.ev.env)
        tests = list(self.test_values[loop.id])
        info: dict[str, Any] = {"line": line, "label": label, "depth": loop.depth}
        per_thread = None
        if tb is None:
            info["trip_source"] = "no exit test"
            reason = "the loop has no conditional exit"
        else:
            self._env0 = env0
            per_thread, reason = self._solve(tests, info)
            if per_thread is None and reason == "iterate":
                per_thread, reason = self._iterate(loop, tests, info)
        override = self.trips.get(label, self.trips.get(str(line)))
        if override is not None:
            trip = int(override)
            info["trip_source"] = "--trip"
            if per_thread is None:
                per_thread = np.full(self.active.shape, trip)
        elif per_thread is not None:
            warp_trip = self._warp_max(per_thread, active0)
            trip = int(np.median(warp_trip)) if len(warp_trip) else 0
            info["trip_source"] = info.get("trip_source", "static")
            if len(warp_trip) and warp_trip.min() != warp_trip.max():
                info["trip_range"] = [int(warp_trip.min()), int(warp_trip.max())]
        else:
            trip = self.default_trip
            info["trip_source"] = "assumed"
            if recording:
                self.recording = True
                self.warn(f"line {line}: trip count of loop {label} not known statically ({reason}); "
                          f"assumed {trip} (set it with --trip {label}=N)")
            per_thread = np.full(self.active.shape, trip)
        info["trip"] = trip
        # registers after the loop: extrapolate the ones that change linearly
        env = {}
        for r in set(env1) | set(env2):
            v1, v2 = env1.get(r), env2.get(r)
            if v1 is None or v2 is None:
                env[r] = None
                continue
            a1, a2 = np.asarray(v1), np.asarray(v2)
            if a1.dtype == bool or a2.dtype == bool:
                env[r] = v1 if np.array_equal(a1, a2) else None
                continue
            if np.array_equal(a1, a2):
                env[r] = v1
            elif a1.dtype.kind == "i" and a2.dtype.kind == "i":
                env[r] = a1 + (np.maximum(per_thread, 1) - 1) * (a2 - a1)
            else:
                env[r] = None
        self.ev.env = env
        self.ev.why = {**why1, **{r: f"{r} changes from pass to pass of the loop at line {line}"
                                  for r, v in env.items() if v is None and r not in why1}}
        self.recording = recording
        self.active = active0
        if recording:
            self.loop_info.append(info)
        prefix = len(items)
        if tb is not None:
            for k, it in enumerate(items):
                if it == tb:
                    prefix = k + 1
                    break
        exit_to = None
        if tb is not None:
            blk = self.cfg.blocks[tb]
            outs = [s for s in blk.succs if s not in loop.body]
            exit_to = outs[0] if outs else None
        elif nxt is not None and nxt not in loop.body:
            exit_to = nxt
        return LoopRun(loop, trip, items, prefix, info), exit_to

    def _warp_max(self, per_thread: np.ndarray, active: np.ndarray) -> np.ndarray:
        w = self.ev.sample.warp
        n = self.ev.sample.n_warps
        vals = np.full(n, -1, dtype=np.int64)
        np.maximum.at(vals, w[active], np.asarray(per_thread, dtype=np.int64)[active])
        return vals[vals >= 0]

    def _solve(self, tests: list, info: dict[str, Any]) -> tuple[np.ndarray | None, str]:
        if len(tests) < 2 or tests[0][0] is None or tests[1][0] is None:
            return None, "iterate" if len(tests) >= 2 and tests[0][1] is not None else "exit test not understood"
        (v1, stay1, setp), (v2, _, _) = tests[0], tests[1]
        if v1[0] == "unknown":
            return None, v1[1]
        if v2[0] == "unknown":
            return None, v2[1]
        cmp, a1, b1 = v1
        _, a2, b2 = v2
        shape = self.active.shape
        x1 = np.broadcast_to(np.asarray(a1 - b1, dtype=np.int64), shape)
        d = np.broadcast_to(np.asarray((a2 - b2) - (a1 - b1), dtype=np.int64), shape)
        stay_when = cmp if np.array_equal(np.asarray(stay1), _cmp_int(cmp, x1)) else _negate(cmp)
        if not np.array_equal(np.asarray(stay1), _cmp_int(stay_when, x1)):
            return None, "iterate"
        k = _first_leave(stay_when, x1, d)
        if k is None:
            return None, "iterate"
        info.update(_describe(setp, a1, a2, b1, b2, stay_when, self.active, self._env0))
        return k, ""

    def _iterate(self, loop: Loop, tests: list, info: dict[str, Any]) -> tuple[np.ndarray | None, str]:
        """Run passes of the loop on the evaluator until every sampled thread has left (at most MAX_ITERATE)."""
        stays = [t[1] for t in tests]
        if not stays or any(st is None for st in stays):
            return None, "the exit test depends on run-time data"
        saved_env, saved_why = dict(self.ev.env), dict(self.ev.why)
        alive = np.ones(self.active.shape, dtype=bool)
        passes = np.zeros(self.active.shape, dtype=np.int64)
        for st in stays:
            passes += alive
            alive &= np.asarray(st)
        k = len(stays)
        reason = ""
        while alive[self.active].any() and k < MAX_ITERATE:
            self.test_values[loop.id] = []
            self.region(loop.header, loop)
            tv = self.test_values[loop.id]
            if not tv or tv[-1][1] is None:
                reason = "the exit test depends on run-time data"
                break
            passes += alive
            alive &= np.asarray(tv[-1][1])
            k += 1
        self.ev.env, self.ev.why = saved_env, saved_why
        if reason:
            return None, reason
        if alive[self.active].any():
            return None, f"more than {MAX_ITERATE} passes"
        info["trip_source"] = "iterated"
        return passes, ""


def _cmp_int(cmp: str, x: np.ndarray) -> np.ndarray:
    return {"eq": x == 0, "ne": x != 0, "lt": x < 0, "lo": x < 0, "le": x <= 0, "ls": x <= 0, "gt": x > 0,
            "hi": x > 0, "ge": x >= 0, "hs": x >= 0, "nlt": x >= 0, "nle": x > 0, "ngt": x <= 0, "nge": x < 0,
            "neq": x != 0, "nne": x == 0}[cmp]


def _negate(cmp: str) -> str:
    base = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(cmp, cmp)
    return {"eq": "ne", "ne": "eq", "lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}[base]


def _first_leave(stay: str, x1: np.ndarray, d: np.ndarray) -> np.ndarray | None:
    """Smallest k >= 1 with not stay(x1 + (k-1) d) per thread; None if some thread never leaves."""
    stay = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}.get(stay, stay)
    x1 = x1.astype(np.int64)
    d = d.astype(np.int64)
    k = np.ones_like(x1)
    now = _cmp_int(stay, x1)
    if not now.any():
        return k
    safe = np.where(d == 0, 1, d)
    with np.errstate(all="ignore"):
        if stay == "lt":      # leave when x >= 0
            ok = ~now | (d > 0)
            k = np.where(now, 1 + (-x1 + safe - 1) // safe, 1)
        elif stay == "le":    # leave when x > 0
            ok = ~now | (d > 0)
            k = np.where(now, 1 + (-x1) // safe + 1, 1)
        elif stay == "gt":    # leave when x <= 0
            ok = ~now | (d < 0)
            k = np.where(now, 1 + (x1 + (-safe) - 1) // (-safe), 1)
        elif stay == "ge":    # leave when x < 0
            ok = ~now | (d < 0)
            k = np.where(now, 1 + x1 // (-safe) + 1, 1)
        elif stay == "ne":    # leave when x == 0
            ok = ~now | ((d != 0) & ((-x1) % safe == 0) & ((-x1) // safe > 0))
            k = np.where(now, 1 + (-x1) // safe, 1)
        elif stay == "eq":    # leave when x != 0
            ok = ~now | (d != 0)
            k = np.where(now, 2, 1)
        else:
            return None
    if not ok.all():
        return None
    return np.maximum(k, 1)


def _describe(setp: Instruction, a1, a2, b1, b2, stay: str, active: np.ndarray,
              env0: dict[str, Any]) -> dict[str, Any]:
    """Induction variable (start on entry, step per pass) and bound of a loop test, for the report."""
    def med(v):
        if v is None:
            return None
        v = np.broadcast_to(np.asarray(v), active.shape)[active]
        return int(np.median(v)) if len(v) else None

    ops = setp.operands
    if np.array_equal(np.asarray(b1), np.asarray(b2)):
        k, first, step, bound = 1, a1, np.asarray(a2) - np.asarray(a1), b1
    elif np.array_equal(np.asarray(a1), np.asarray(a2)):
        k, first, step, bound = 2, b1, np.asarray(b2) - np.asarray(b1), a1
    else:
        return {"test_line": setp.line, "induction": f"{ops[1].text} - {ops[2].text}",
                "first_test_value": med(np.asarray(a1) - b1), "step": med((np.asarray(a2) - b2) - (np.asarray(a1) - b1)),
                "bound": 0, "stay_while": f"({ops[1].text} - {ops[2].text}) {stay} 0"}
    iv = ops[k]
    start = env0.get(iv.name) if iv.kind == "reg" else None
    return {"test_line": setp.line, "induction": iv.text, "start": med(start), "first_test_value": med(first),
            "step": med(step), "bound": med(bound),
            "stay_while": f"{ops[1].text} {stay} {ops[2].text}"}


def find_path(cfg: CFG, ev: Evaluator, trips: dict[str, int] | None = None, default_trip: int = 1,
              source: str = "<ptx>") -> Path:
    """The path most sampled threads take, with loop trip counts, branch statistics and memory addresses."""
    return Walker(cfg, ev, trips, default_trip, source).run()


def cfg_features(cfg: CFG, path: Path) -> dict[str, float]:
    """The CFG's summary in the prediction's ``features``: blocks, loops, dynamic path length, divergence."""
    counts = block_counts(path.items, len(cfg.blocks))
    div = [b["divergent_warps"] for b in path.branches if b.get("divergent_warps") is not None]
    return {"blocks": float(len(cfg.blocks)), "loops": float(len(cfg.loops)),
            "path_blocks": float(counts.sum()), "path_log_blocks": math.log1p(float(counts.sum())),
            "divergent_branch_fraction": float(np.mean(div)) if div else 0.0,
            "active_fraction": path.active_fraction}
