"""Kernel graphs: nodes are data states, arcs carry the time to move or transform data.

Matrix convention (the paper's): z_ij is the time of the arc from node j to node i, so a column is
a source and a row a destination. An operation's time is a self-loop on its node (section 8).
Barriers split a kernel into :class:`Fragment` graphs that run one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from gpuprofiler.models.maxplus.algebra import EPS


@dataclass
class Arc:
    """An arc src -> dst; ``kind`` is read, write, local_read, local_write, move (no time) or time
    (a named time, ``info["symbol"]``, as in the paper's Table 1)."""

    src: int
    dst: int
    kind: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class KernelGraph:
    """One fragment of a kernel: named nodes, arcs, self-loops (operation times), inputs, outputs."""

    names: list[str] = field(default_factory=list)
    arcs: list[Arc] = field(default_factory=list)
    loops: dict[int, dict[str, Any]] = field(default_factory=dict)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    # the fragment runs a loop of its own (no barrier inside: the loop stays inside the fragment) longer than a
    # compiler unrolls: a CPU's OpenCL compiler then runs its work-items one at a time instead of in vector lanes
    looped: bool = False
    # a memory access in it runs only where a condition on the work-item holds (``if (i < n) b[i] = a[i]``): a CPU's
    # OpenCL compiler may then run its work-items one at a time (``concurrency.guarded_item_s`` in the profile)
    guarded: bool = False
    guard_share: float = 1.0  # the share of the followed work-items that take the guarded accesses (the most of any)
    # the share of the followed work-items that make any of its accesses (1 where one is unguarded): out of the lanes,
    # the others run none of the region (a tree reduction's step ``if (l < k) s[l] += s[l + k]``)
    access_share: float = 0.0

    @property
    def size(self) -> int:
        return len(self.names)

    def add_node(self, name: str, role: str | None = None) -> int:
        self.names.append(name)
        node = len(self.names) - 1
        if role == "input":
            self.inputs.append(node)
        elif role == "output":
            self.outputs.append(node)
        return node

    def add_arc(self, src: int, dst: int, kind: str, **info: Any) -> Arc:
        if src == dst:
            raise ValueError("an operation's own time is a loop: use add_loop")
        arc = Arc(src, dst, kind, info)
        self.arcs.append(arc)
        return arc

    def add_loop(self, node: int, **info: Any) -> None:
        self.loops[node] = {"kind": "op", **info}


def _bigger(a, b):
    """(+) of two parallel arcs, for numbers or sympy expressions."""
    try:
        return max(a, b)
    except TypeError:
        return sympy.Max(a, b)


@dataclass
class Kernel:
    """A kernel as fragments separated by barriers; the fragments run strictly one after another."""

    name: str
    fragments: list[KernelGraph]
    notes: list[str] = field(default_factory=list)
    local_bytes: int = 0                                  # local (shared) memory per work-group
    local_size: tuple[int, int, int] = (1, 1, 1)          # work-group shape
    global_size: tuple[int, ...] | None = None            # the launch's grid in work-items, where known
    buffers: dict[str, int] = field(default_factory=dict)  # bytes of each array argument, where known
    l1_miss: dict[str, float] = field(default_factory=dict)  # per global array read: share of requested sectors
                                                             # its work-groups had not touched before
    accesses: list[Any] = field(default_factory=list)  # with chosen work-groups: every global access (builder.Access)
    sample: Any = None                                 # and those work-groups' work-items (requests.Sample)
    capped: dict[int, float] = field(default_factory=dict)  # loops cut short (source line): passes per entry in full


def levels(n: int, dst: np.ndarray, src: np.ndarray, loops: np.ndarray | None = None,
           loops_once: bool = True) -> tuple[np.ndarray, int]:
    """The paper's height procedure: strike out nodes with no incoming arcs, round after round.

    Returns each node's round (0-based) and the height k = rounds - 1. With ``loops_once`` a node
    whose only incoming arc is its self-loop spends one round having the loop removed (section 8).
    A cycle through several nodes (a data-dependent loop) has no height and raises ValueError.
    """
    dst = np.asarray(dst, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    pending = np.zeros(n, dtype=bool) if loops is None else np.asarray(loops, dtype=bool).copy()
    if pending.any() and not loops_once:
        raise ValueError("the graph has self-loops: its plain height is unbounded (count loops once)")
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order = np.argsort(src, kind="stable")
    out_dst = dst[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    level = np.full(n, -1, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    frontier = np.flatnonzero(indeg == 0)
    rounds = 0
    while frontier.size:
        looped = frontier[pending[frontier]]
        pending[looped] = False
        gone = frontier[~np.isin(frontier, looped, assume_unique=True)] if looped.size else frontier
        level[gone] = rounds
        alive[gone] = False
        rounds += 1
        targets = out_dst[_ranges(indptr, gone)]
        if targets.size:
            np.subtract.at(indeg, targets, 1)
            hit = np.unique(targets)
            fresh = hit[indeg[hit] == 0]
        else:
            fresh = np.empty(0, dtype=np.int64)
        frontier = np.concatenate([looped, fresh])
    if alive.any():
        stuck = np.flatnonzero(alive)[:5].tolist()
        raise ValueError(f"the graph has a cycle through nodes {stuck}: no finite height (a loop of "
                         "data-dependent length cannot be modelled)")
    return level, rounds - 1


def _ranges(indptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Indices of the CSR rows ``nodes`` concatenated, without a Python loop."""
    starts = indptr[nodes]
    lens = indptr[nodes + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return offsets + np.arange(total)


def longest(n: int, dst, src, weight, inputs: Sequence[int], outputs: Sequence[int],
            loop_weight: np.ndarray | None = None) -> float:
    """Latest output time with inputs ready at 0: <1_o, (I (+) Z)^k (.) 1_i> for the loop-free matrix,
    each node's own loop (operation time) counted once. Sparse and level by level: O(arcs) work.

    When every input-output path has k arcs this is the paper's <1_o, Z^k (.) 1_i>.
    """
    dst = np.asarray(dst, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    weight = np.asarray(weight, dtype=float)
    loops = None if loop_weight is None else np.isfinite(loop_weight)
    level, k = levels(n, dst, src, loops)
    x = np.full(n, EPS)
    x[list(inputs)] = 0.0
    lw = np.zeros(n) if loop_weight is None else np.where(np.isfinite(loop_weight), loop_weight, 0.0)
    src_level = level[src]
    order = np.argsort(src_level, kind="stable")
    bounds = np.searchsorted(src_level[order], np.arange(k + 2))
    node_order = np.argsort(level, kind="stable")
    node_bounds = np.searchsorted(level[node_order], np.arange(k + 2))
    for r in range(k + 1):
        nodes = node_order[node_bounds[r]:node_bounds[r + 1]]
        x[nodes] += lw[nodes]
        arcs = order[bounds[r]:bounds[r + 1]]
        if arcs.size:
            np.maximum.at(x, dst[arcs], x[src[arcs]] + weight[arcs])
    outs = list(outputs)
    return float(x[outs].max()) if outs else EPS


def _structure(g: KernelGraph, with_loops: bool) -> tuple:
    """The fragment's levels and level-by-level arc and node order, computed once per fragment."""
    cache = g.__dict__.setdefault("_structure", {})
    key = (with_loops, len(g.arcs), g.size)
    if key not in cache:
        dst = np.array([a.dst for a in g.arcs], dtype=np.int64)
        src = np.array([a.src for a in g.arcs], dtype=np.int64)
        loops = np.zeros(g.size, dtype=bool)
        if with_loops and g.loops:
            loops[list(g.loops)] = True
        level, k = levels(g.size, dst, src, loops)
        order = np.argsort(level[src], kind="stable") if len(src) else np.empty(0, np.int64)
        bounds = np.searchsorted(level[src][order], np.arange(k + 2))
        node_order = np.argsort(level, kind="stable")
        node_bounds = np.searchsorted(level[node_order], np.arange(k + 2))
        cache[key] = (dst, src, level, k, order, bounds, node_order, node_bounds)
    return cache[key]


def graph_times(g: KernelGraph, weights: np.ndarray, loop_values: np.ndarray | None = None) -> np.ndarray:
    """:func:`longest` for several sets of times at once: ``weights`` (sets x arcs, in ``g.arcs`` order),
    ``loop_values`` (sets x nodes, operation times; None for a graph timed without its loops)."""
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    m = weights.shape[0]
    dst, src, level, k, order, bounds, node_order, node_bounds = _structure(g, loop_values is not None)
    x = np.full((m, g.size), EPS)
    x[:, list(g.inputs)] = 0.0
    lw = np.zeros((m, g.size)) if loop_values is None else np.atleast_2d(loop_values)
    for r in range(k + 1):
        nodes = node_order[node_bounds[r]:node_bounds[r + 1]]
        x[:, nodes] += lw[:, nodes]
        arcs = order[bounds[r]:bounds[r + 1]]
        if arcs.size:
            cand = x[:, src[arcs]] + weights[:, arcs]
            for j in range(m):
                np.maximum.at(x[j], dst[arcs], cand[j])
    outs = list(g.outputs)
    return x[:, outs].max(axis=1) if outs else np.full(m, EPS)


def _issue_order(g: KernelGraph) -> tuple:
    """Per node: its memory arcs, the moves that feed their addresses and its other moves, each as (arc index,
    source); and the order to take the nodes in: creation order, each node after the sources of its arcs (a
    product that became an FMA takes its addend's node, made after it). Computed once per fragment."""
    cache = g.__dict__.setdefault("_issue_order", {})
    key = (len(g.arcs), g.size)
    if key not in cache:
        mem: list[list] = [[] for _ in range(g.size)]
        addr: list[list] = [[] for _ in range(g.size)]
        ops: list[list] = [[] for _ in range(g.size)]
        place = np.arange(g.size, dtype=float)
        for i, a in enumerate(g.arcs):
            if a.kind != "move":
                mem[a.dst].append((i, a.src))
            else:
                (addr if a.info.get("address") else ops)[a.dst].append((i, a.src))
            place[a.dst] = max(place[a.dst], a.src + 0.5)
        order = np.lexsort((np.arange(g.size), place)).tolist()
        cache[key] = (mem, addr, ops, order, set(g.inputs))
    return cache[key]


def inorder_times(g: KernelGraph, weights: np.ndarray, loop_values: np.ndarray | None = None) -> np.ndarray:
    """The latest output time when one thread issues its instructions in program order (a GPU warp): an
    instruction issues once the one before it has and its operands are ready, so a load waits for its address and
    the instruction before it, and the first use of a loaded value waits for the load; a store does not hold the
    instructions after it. Nodes in creation order are program order (the builder makes them as it interprets the
    code), each taken after the nodes it reads. :func:`graph_times` is the same graph with every instruction issued
    as soon as its operands are ready."""
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    m = weights.shape[0]
    lw = np.zeros((m, g.size)) if loop_values is None else np.atleast_2d(loop_values)
    mem, addr, ops, order, inputs = _issue_order(g)
    loops = g.loops
    out = np.full(m, EPS)
    for j in range(m):
        w, lv = weights[j].tolist(), lw[j].tolist()
        ready = [0.0] * g.size
        issued = 0.0
        for v in order:
            if v in inputs and not mem[v] and not ops[v]:
                continue
            done = None
            if mem[v]:  # its memory instructions issue in order, once their values and addresses are ready
                start = max([issued] + [ready[s] for _, s in mem[v]] + [ready[s] + w[i] for i, s in addr[v]])
                issued = start
                done = start + max(w[i] for i, _ in mem[v])
                if v not in loops:
                    ready[v] = max([done] + [ready[s] + w[i] for i, s in ops[v]])
                    continue
            operands = [ready[s] + w[i] for i, s in ops[v]] + [ready[s] + w[i] for i, s in addr[v] if not mem[v]]
            start = max([issued] + operands + ([done] if done is not None else []))
            issued = start
            ready[v] = start + lv[v]
        if g.outputs:
            out[j] = max(ready[o] for o in g.outputs)
    return out


def graph_time(g: KernelGraph, weights: Sequence[float], loop_values: dict[int, float] | None = None) -> float:
    """:func:`longest` on a :class:`KernelGraph`: ``weights`` per arc (in ``g.arcs`` order), loop times per node."""
    lw = None
    if g.loops:
        lw = np.zeros(g.size)
        for node in g.loops:
            lw[node] = (loop_values or {}).get(node, 0.0)
    return float(graph_times(g, np.asarray(weights, dtype=float)[None, :], None if lw is None else lw[None, :])[0])


def height(g: KernelGraph, loops_once: bool = True, with_loops: bool = True) -> int:
    """The height k of a fragment (section 6; its loops counted once, section 8, unless ``with_loops`` is off)."""
    if loops_once:
        return _structure(g, with_loops)[3]
    loops = np.zeros(g.size, dtype=bool)
    if with_loops:
        loops[list(g.loops)] = True
    return levels(g.size, [a.dst for a in g.arcs], [a.src for a in g.arcs], loops, loops_once)[1]


def collapse(n: int, arcs: dict[tuple[int, int], Any], loops: dict[int, Any], keep: set[int],
             plus=None, big=None) -> tuple[dict[tuple[int, int], Any], dict[int, Any]]:
    """Series/parallel reduction (Table 1): parallel arcs become one arc with the larger time (max),
    a node with one arc in and one arc out (not in ``keep``: inputs and outputs) becomes one arc with
    the sum of the times, its own loop counted once. The time from inputs to outputs is unchanged.

    ``arcs`` maps (src, dst) to a time; ``plus`` and ``big`` default to + and max (pass sympy's for
    symbols). Returns the reduced arcs and loops.
    """
    plus = plus or (lambda a, b: a + b)
    big = big or _bigger
    arcs, loops = dict(arcs), dict(loops)
    changed = True
    while changed:
        changed = False
        ins: dict[int, list[tuple[int, int]]] = {}
        outs: dict[int, list[tuple[int, int]]] = {}
        for (s, d) in arcs:
            ins.setdefault(d, []).append((s, d))
            outs.setdefault(s, []).append((s, d))
        for v in range(n):
            if v in keep or len(ins.get(v, [])) != 1 or len(outs.get(v, [])) != 1:
                continue
            (u, _), (_, w) = ins[v][0], outs[v][0]
            if u == w or u == v or w == v:
                continue
            time = plus(arcs.pop((u, v)), arcs.pop((v, w)))
            if v in loops:
                time = plus(time, loops.pop(v))
            arcs[(u, w)] = big(arcs[(u, w)], time) if (u, w) in arcs else time
            changed = True
            break
    return arcs, loops
