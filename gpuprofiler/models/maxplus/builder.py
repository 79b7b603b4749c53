"""Build a kernel's max-plus graph from its OpenCL C or CUDA source (the paper's missing code analyser).

The code is executed symbolically by :mod:`gpuprofiler.kernelcode` (indices as affine forms in the thread ids,
control flow as masks over sampled work-items, loops unrolled); this executor turns its effects into the graph of
one work-item:

* a global load is an input node (the data in memory) with a read arc to its consumer; a store is an
  output node with a write arc; each arithmetic operation is a node whose own time is a self-loop; every access
  knows how its address moves with the thread index: unit stride, strided (with the stride), uniform, or a gather;
* a loop whose bounds depend on the work-item or on loaded data is unrolled for the mean trip count of the sampled
  work-items, from the launch's real inputs where the kernel spec gives them (the CSR row lengths of a sparse
  matrix), and refused where nothing gives the data;
* a floating-point product added in the same expression (``sum += a[k] * b[k]``, ``a * b + c``) is one fused
  multiply-add, as OpenCL C's default ``FP_CONTRACT ON`` and nvcc's ``--fmad=true`` compile it: its chain
  runs through the FMA's latency, not the add's;
* branches on the thread index follow the work-items that take the then-branch (the slowest one, that a
  barrier or the kernel's end waits for); ``barrier()`` / ``__syncthreads()`` end a fragment.

Beside the symbolic work-item the builder follows whole work-groups spread over the grid numerically (the
*sample*): every access records the distinct 128-byte lines and 32-byte sectors each warp's request touches,
the share of warps that execute it, and the sectors each work-group touches (what its L1 serves more than
once), and every local-memory access its bank conflicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from gpuprofiler.kernelcode import index as ix
from gpuprofiler.kernelcode.index import Affine
from gpuprofiler.kernelcode.interpret import Array, Data, Executor, launch_shape, local_extents, run_kernel
from gpuprofiler.kernelcode.sample import make_sample
from gpuprofiler.kernelcode.source import DTYPE, ELEM_BYTES, CodeError, TooLarge, parse
from gpuprofiler.kernelcode.trace import Access
from gpuprofiler.models.maxplus.graph import Kernel, KernelGraph
from gpuprofiler.models.maxplus.requests import annotate

MAX_UNROLLED = 1 << 17  # statements executed while unrolling: beyond this the graph takes seconds to build
UNROLLED_TRIPS = 1  # a loop of more fixed iterations than this runs as a loop (PoCL's matmul_tiled with its
# 16-step inner loop ran one work-item at a time, not in lanes)

BuildError = CodeError  # a kernel the graph builder cannot follow, naming the line
__all__ = ["BuildError", "TooLarge", "build", "build_spec", "parse", "mark_first_reads"]


class Builder(Executor):
    """The symbolic execution's effects as graph nodes: the kernel's fragments for one work-item (the slowest)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.fragments: list[KernelGraph] = []
        self.seq = 0  # program order of the global accesses, across reads, writes and fragments
        self.products: set[int] = set()  # floating-point products of the current statement, not yet used
        self._new_fragment()

    def begin_statement(self) -> None:
        self.products.clear()  # a product contracts with an add of its own statement only

    def materialise(self, value: Data) -> None:
        self.node_of(value)

    def atomic_at(self, array: Array, index, result: Data) -> None:
        """An atomic's operation node records the share of its work-groups' lines that other followed work-groups
        hit too (``shared``): atomics of different cores on one line wait for each other; on lines no other
        work-group touches they run at their own latency."""
        if result.node is None or result.node not in self.g.loops:
            return
        addr = self.values_of(index)
        active = self.mask & self.sample.valid
        shared = 1.0  # an address the sample cannot place: assume the worst
        if addr is not None and active.any():
            lines = (np.asarray(addr)[active] * array.elem_bytes) // 64
            groups = self.sample.group[active]
            pairs = np.unique(np.stack([groups, lines]), axis=1)
            _, owners = np.unique(pairs[1], return_counts=True)
            per_line = dict(zip(np.unique(pairs[1]), owners))
            shared = float(np.mean([per_line[x] > 1 for x in pairs[1]])) if len(np.unique(groups)) > 1 else 0.0
        self.g.loops[result.node]["shared"] = shared

    def looping(self, s, trips: float | None) -> None:
        """Marks the current fragment as running a loop of its own (:attr:`KernelGraph.looped`): one without a
        barrier in its body, of more than :data:`UNROLLED_TRIPS` iterations or of a count not fixed by constants."""
        if trips is None or trips > UNROLLED_TRIPS:
            self.g.looped = True

    # ---- graph bookkeeping ----------------------------------------------------------------------
    def _new_fragment(self) -> None:
        self.g = KernelGraph()
        self.fragments.append(self.g)
        self.mem_in: dict[tuple, int] = {}
        self.mem_out: dict[tuple, int] = {}
        self.local_state: dict[tuple, int] = {}
        self.item_start: int | None = None  # the input node of what the work-item's index alone computes
        self.read_order = 0
        self.write_order = 0

    def node_of(self, value: Data) -> int | None:
        """The node holding ``value``, creating a load node for a pending read."""
        if value.const:
            return None
        if value.node is None and value.pending is not None:
            src, kind, info = value.pending
            node = self.g.add_node(f"{info.get('label', 'load')}@r")
            self.g.add_arc(src, node, kind, **info)
            for d in value.deps:
                self.g.add_arc(d, node, "move", address=True)
            value.node, value.pending = node, None
        return value.node

    def connect(self, value: Data, dst: int) -> None:
        """An arc from ``value`` to node ``dst``: its read arc if it is a pending load, else a move."""
        if value.const:
            return
        if value.pending is not None and value.node is None:
            src, kind, info = value.pending
            self.g.add_arc(src, dst, kind, **info)
            for d in value.deps:
                self.g.add_arc(d, dst, "move", address=True)
            return
        if value.node is not None and value.node != dst:
            self.g.add_arc(value.node, dst, "move")

    def operation(self, op: str, operands: list[Any], where, cop: str | None = None) -> Data:
        datas = [v for v in operands if isinstance(v, Data)]
        dtype = "double" if any(d.dtype == "double" for d in datas) else (
            "float" if any(d.dtype == "float" for d in datas) else "int")
        values = self.int_values(operands, cop) if dtype == "int" else None
        const = all(d.const for d in datas)
        varying = any(d.varying for d in datas) or any(ix.thread_dependent(v) for v in operands)
        if const and (dtype == "int" or not varying):
            return Data(dtype, const=True, values=values)  # index arithmetic, or hoisted out of the work-items
        if op in ("add", "sub") and dtype != "int":
            fused = self.contract(operands)
            if fused is not None:
                return fused
        node = self.g.add_node(f"{op}#{self.g.size}")
        self.g.add_loop(node, op=op, dtype=dtype, line=getattr(where.coord, "line", None))
        for d in datas:
            self.connect(d, node)
        if const:  # computed from the work-item's index alone: it starts with the work-item
            if self.item_start is None:
                self.item_start = self.g.add_node("work-item", "input")
            self.g.add_arc(self.item_start, node, "move")
        if op == "mul" and dtype != "int":
            self.products.add(node)
        return Data(dtype, node=node, values=values)

    def contract(self, operands: list[Any]) -> Data | None:
        """``a * b + c`` within one statement as one FMA node (the compilers' default contraction): the
        product's node becomes the FMA and takes the addend; None where neither operand is such a product."""
        for k, v in enumerate(operands):
            if isinstance(v, Data) and v.node is not None and v.node in self.products and v.pending is None:
                self.products.discard(v.node)
                info = self.g.loops[v.node]
                other = operands[1 - k]
                dtype = info["dtype"]
                if isinstance(other, Data):
                    if other.dtype == "double":
                        dtype = "double"
                    self.connect(other, v.node)
                info.update(op="fma", dtype=dtype, contracted=True)
                self.g.names[v.node] = f"fma#{v.node}"
                return Data(dtype, node=v.node)
        return None

    # ---- memory -------------------------------------------------------------------------------
    def access_info(self, array: Array, index, where, span: int = 1) -> dict[str, Any]:
        info: dict[str, Any] = {"array": array.name, "elem_bytes": array.elem_bytes,
                                "line": getattr(where.coord, "line", None)}
        if span > 1:
            info["span"] = span
        addr = self.values_of(index)
        if isinstance(index, Data):
            info.update(pattern="gather", stride=None, label=f"{array.name}[gather]")
        else:
            info["index"] = ix.pretty(index)
            info["_index"] = index
            info["label"] = f"{array.name}[{info['index']}]"
            coef, _ = ix.coefficients(index)
            stride = coef[0]
            if stride is None:
                info.update(pattern="gather", stride=None)
            elif stride == 0:
                info.update(pattern="uniform", stride=0)
            elif abs(stride) == 1:
                info.update(pattern="unit", stride=1)
            else:
                info.update(pattern="strided", stride=abs(stride))
        info.update(_addr=addr, _mask=self.mask, seq=self.seq)
        self.seq += 1
        self._guarded()
        return info

    def _guarded(self) -> None:
        """An access under a condition on the work-item marks the fragment guarded, with the share of the followed
        work-items that take it; every access counts towards the share that makes any (``access_share``)."""
        if not self.conditional:
            self.g.access_share = 1.0
            return
        valid = self.sample.valid
        share = float((self.mask & valid).sum() / max(1, valid.sum()))
        self.g.guard_share = share if not self.g.guarded else max(self.g.guard_share, share)
        self.g.access_share = max(self.g.access_share, share)
        self.g.guarded = True

    def local_info(self, array: Array, index) -> dict[str, Any]:
        info = {"array": array.name, "elem_bytes": array.elem_bytes, "_addr": self.values_of(index),
                "_mask": self.mask, "key": _local_key(array, index)}
        self._guarded()
        if isinstance(index, Data):
            info.update(pattern="gather", stride=None)
        else:
            stride = ix.coefficients(index)[0][0]
            info.update(pattern="gather" if stride is None else "uniform" if stride == 0 else
                        "unit" if abs(stride) == 1 else "strided", stride=None if stride is None else abs(stride))
        return info

    def load(self, array: Array, index, where, span: int = 1) -> Data:
        dtype = DTYPE.get(array.elem, "int")
        if array.space == "local":
            key = _local_key(array, index)
            src = self.local_state.get(key)
            if src is None:
                src = self.g.add_node(f"{array.name}[{_pretty(index)}]", "input")
                self.local_state[key] = src
            info = self.local_info(array, index)
            info["label"] = self.g.names[src]
            return Data(dtype, pending=(src, "local_read", info))
        info = self.access_info(array, index, where, span)
        key = (array.name, ix.key(index) if not isinstance(index, Data) else f"gather{self.g.size}")
        src = self.mem_in.get(key)
        if src is None:
            src = self.g.add_node(info["label"], "input")
            self.mem_in[key] = src
        info["order"] = self.read_order
        self.read_order += 1
        deps = ()
        if isinstance(index, Data):
            dep = self.node_of(index)
            deps = (dep,) if dep is not None else ()
        values = None
        if dtype == "int" and array.name in self.contents and span == 1:
            addr = self.values_of(index)
            if addr is not None:
                values = np.asarray(self.contents[array.name](addr), dtype=np.int64)
        return Data(dtype, pending=(src, "read", info), deps=deps, values=values)

    def store(self, array: Array, index, value: Data, where, span: int = 1) -> None:
        if array.space == "local":
            key = _local_key(array, index)
            dst = self.g.add_node(f"{array.name}[{_pretty(index)}]'", "output")
            self.local_state[key] = dst
            src = self.node_of(value)
            if src is not None:
                self.g.add_arc(src, dst, "local_write", **self.local_info(array, index))
            return
        info = self.access_info(array, index, where, span)
        key = (array.name, ix.key(index) if not isinstance(index, Data) else f"gather{self.g.size}")
        dst = self.mem_out.get(key)
        if dst is None:
            dst = self.g.add_node(info["label"] + "'", "output")
            self.mem_out[key] = dst
        info["order"] = self.write_order
        self.write_order += 1
        src = self.node_of(value)
        if src is None:  # storing a constant: the write starts at once
            src = self.g.add_node("const", "input")
        self.g.add_arc(src, dst, "write", **info)
        if isinstance(index, Data):
            dep = self.node_of(index)
            if dep is not None:
                self.g.add_arc(dep, dst, "move", address=True)

    def barrier(self) -> None:
        """End the fragment: registers computed in it are its outputs too, and inputs of the next one."""
        if not self.g.arcs:
            return
        live = {}
        for name, value in self.env.items():
            if isinstance(name, str) and isinstance(value, Data) and not value.const:
                node = self.node_of(value)
                if node not in self.g.inputs and node not in self.g.outputs:
                    self.g.outputs.append(node)
                live[name] = value
        self._new_fragment()
        for name, value in live.items():
            self.env[name] = Data(value.dtype, node=self.g.add_node(name, "input"), values=value.values)


def _local_key(array: Array, index) -> tuple:
    """A local-memory address: the array and its index (a data-dependent index is its own)."""
    return (array.name, ix.key(index) if not isinstance(index, Data) else id(index))


def _pretty(index) -> str:
    return "?" if isinstance(index, Data) else ix.pretty(index)


def build(source: str, kernel_name: str, scalars: dict[str, Any], local_size: list[int] | None,
          filename: str = "kernel", defines: dict[str, Any] | None = None, global_size: list[int] | None = None,
          contents: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
          buffers: dict[str, int] | None = None, groups: np.ndarray | None = None,
          items: int | None = None, trips: dict[int, float] | None = None,
          max_statements: int = MAX_UNROLLED, caps: dict[int, int] | None = None) -> Kernel:
    """The max-plus graph of ``kernel_name`` for one work-item, at the given scalar arguments (a BuildError past
    ``max_statements`` statements executed; ``caps``: counted loops, by source line, cut to that many passes, their
    full counts in :attr:`~gpuprofiler.models.maxplus.graph.Kernel.capped`).

    ``global_size`` spreads the sampled work-groups over the grid (else the first group only); ``contents``
    gives integer input arrays' values as functions of element indices (data-dependent loops and gathers are
    followed with them); ``buffers`` the bytes of each array argument (memory footprints). With ``groups`` (linear
    work-group numbers) exactly those work-groups are followed and every global access is kept, with its
    addresses at each of their work-items (their first ``items``, where given), in ``Kernel.accesses`` (the address
    stream of :mod:`gpuprofiler.models.cache.streams`); the request figures are then not computed. ``trips`` gives
    loops the builder cannot count (a while loop, a bound read from memory the launch does not give) the iterations
    per entry the loop profiler counted on the device, by source line."""
    parsed = parse(source, filename, defines)
    glob, sizes, notes = launch_shape(global_size, local_size)
    scalars = {k: (v.item() if hasattr(v, "item") else v) for k, v in scalars.items()}
    b = Builder(filename, scalars, sizes, local_extents(parsed, filename),
                make_sample(glob, sizes, groups=groups, items=items), dict(contents or {}), notes=notes,
                global_size=glob, trips=dict(trips or {}), max_statements=max_statements, widths=parsed.widths,
                caps=dict(caps or {}))
    run_kernel(b, parsed, kernel_name)
    frags = [g for g in b.fragments if g.arcs or g.outputs]
    accesses: list[Access] = []
    if groups is not None:
        for a in (a for g in b.fragments for a in g.arcs):
            if a.kind in ("read", "write") and "_addr" in a.info:
                addr = a.info.pop("_addr")
                active = a.info.pop("_mask") & b.sample.valid
                accesses.append(Access(a.info["seq"], a.kind, a.info["array"], a.info["elem_bytes"], addr, active,
                                       a.info.get("span", 1)))
        accesses.sort(key=lambda x: x.seq)
        l1_miss: dict[str, float] = {}
    else:
        mark_first_reads(frags)
        l1_miss = annotate([a for g in b.fragments for a in g.arcs], b.sample)
    for g in frags:
        if not g.outputs:
            b.notes.append("a fragment writes nothing: it is not timed")
    local_bytes = sum(ELEM_BYTES.get(elem, 4) * b.widths.get(name, 1) * int(np.prod(dims or (1,)))
                      for name, (elem, dims) in b.local_arrays.items())
    return Kernel(kernel_name, frags or [KernelGraph()], b.notes, local_bytes=local_bytes, local_size=tuple(sizes),
                  global_size=tuple(glob) if glob else None, buffers=dict(buffers or {}), l1_miss=l1_miss,
                  accesses=accesses, sample=b.sample if groups is not None else None,
                  capped={line: float(np.mean(v)) for line, v in b.capped.items()})


def build_spec(spec_instance, backend: str = "opencl", groups: np.ndarray | None = None,
               items: int | None = None, trips: dict[int, float] | None = None,
               max_statements: int = MAX_UNROLLED, caps: dict[int, int] | None = None) -> Kernel:
    """The graph of a kernel spec at its instantiated size, from its OpenCL (or CUDA) source, with the spec's
    integer inputs as the data of data-dependent loops and gathers, and its arrays' sizes as footprints (with
    ``groups``, those work-groups' address streams: :func:`build`)."""
    spec = spec_instance.spec
    kinds = [backend] + [k for k in ("opencl", "cuda") if k != backend]
    path = next((spec.sources[k] for k in kinds if k in spec.sources), None)
    if path is None:
        raise BuildError(f"{spec.path}: spec {spec.name!r} has no source")
    text = Path(path).read_text()
    arrays = [a for a in spec.args if not a.is_scalar]
    contents = {a.name: spec_instance.elements(a.name) for a in arrays if a.dtype.kind in "iu"}
    buffers = {a.name: int(np.prod(spec_instance.shapes[a.name])) * a.dtype.itemsize for a in arrays}
    return build(text, spec.kernel, spec_instance.scalars, spec_instance.local_size, str(path),
                 spec_instance.defines, spec_instance.global_size, contents, buffers, groups, items, trips,
                 max_statements, caps)


def mark_first_reads(fragments: list[KernelGraph]) -> None:
    """Flag each global read as the first read of its address group or a repeated one (cache model).

    Reads of one array whose indices differ by an amount that does not depend on the thread index
    touch the same addresses over the grid (u[i-1], u[i], u[i+1]; B[k*n + j] for every k): with the
    paper's unbounded cache only the first of them in program order comes from memory.
    """
    groups: dict[str, list] = {}
    for g in fragments:
        for a in sorted((a for a in g.arcs if a.kind == "read"), key=lambda a: a.info.get("order", 0)):
            index = a.info.pop("_index", None)
            if index is None:
                a.info["first"] = True
                continue
            reps = groups.setdefault(a.info["array"], [])
            # one representative per distinct thread dependence: a new one is a first read
            sig = index.coef if isinstance(index, Affine) else (0,) * 6 if isinstance(index, int) else None
            if sig is not None:
                a.info["first"] = sig not in reps
                if a.info["first"]:
                    reps.append(sig)
            else:
                a.info["first"] = not any(not isinstance(r, tuple) and ix.thread_free_difference(index, r)
                                          for r in reps)
                if a.info["first"]:
                    reps.append(index)
