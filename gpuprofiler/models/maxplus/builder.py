"""Build a kernel's max-plus graph from its OpenCL C or CUDA source (the paper's missing code analyser).

The source is preprocessed (pcpp), stripped of address-space qualifiers and parsed as C (pycparser);
then one work-item is executed symbolically:

* integer arithmetic on thread indices and scalar arguments stays an index (an affine form in the thread
  ids, :mod:`~gpuprofiler.models.maxplus.index`), so every global access knows how its address moves with
  the thread index: unit stride, strided (with the stride), uniform, or a gather (the address depends on
  loaded data);
* a global load is an input node (the data in memory) with a read arc to its consumer; a store is an
  output node with a write arc; each arithmetic operation is a node whose own time is a self-loop;
* loops whose trip count follows from constants and the launch's scalar arguments are unrolled; a loop
  ``for (v = a; v < b; v += c)`` whose bounds depend on the work-item or on loaded data is unrolled for the
  mean trip count of the sampled work-items, from the launch's real inputs where the kernel spec gives
  them (the CSR row lengths of a sparse matrix), and refused where nothing gives the data;
* a floating-point product added in the same expression (``sum += a[k] * b[k]``, ``a * b + c``) is one fused
  multiply-add, as OpenCL C's default ``FP_CONTRACT ON`` and nvcc's ``--fmad=true`` compile it: its chain
  runs through the FMA's latency, not the add's;
* branches on the thread index follow the work-item that takes them (the slowest one, that a
  barrier or the kernel's end waits for); ``barrier()`` / ``__syncthreads()`` end a fragment.

Beside the symbolic work-item the builder follows whole work-groups spread over the grid numerically (the
*sample*): every access records the distinct 128-byte lines and 32-byte sectors each warp's request touches,
the share of warps that execute it, and the sectors each work-group touches (what its L1 serves more than
once), and every local-memory access its bank conflicts.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pcpp
import sympy
from pycparser import c_ast, c_parser
from pycparser.c_parser import ParseError

from gpuprofiler.errors import UserError
from gpuprofiler.models.maxplus import index as ix
from gpuprofiler.models.maxplus.graph import Access, Kernel, KernelGraph
from gpuprofiler.models.maxplus.index import Affine
from gpuprofiler.models.maxplus.requests import Sample, annotate, make_sample
from gpuprofiler.workloads.safe_eval import evaluate_int

MAX_UNROLLED = 1 << 17  # statements executed while unrolling: beyond this the graph takes seconds to build

ELEM_BYTES = {"float": 4, "double": 8, "half": 2, "int": 4, "uint": 4, "unsigned": 4, "long": 8, "ulong": 8,
              "short": 2, "ushort": 2, "char": 1, "uchar": 1, "size_t": 8, "bool": 1}
DTYPE = {"float": "float", "half": "float", "double": "double"}
PRELUDE = ("typedef int uint; typedef int ulong; typedef int ushort; typedef int uchar; typedef int size_t; "
           "typedef float half; typedef int bool;\n")
BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<<": "shift", ">>": "shift", "&": "and",
          "|": "or", "^": "xor", "<": "cmp", ">": "cmp", "<=": "cmp", ">=": "cmp", "==": "cmp", "!=": "cmp",
          "&&": "and", "||": "or"}
MATH = {"sqrt": "sqrt", "native_sqrt": "sqrt", "sqrtf": "sqrt", "rsqrt": "rsqrt", "rsqrtf": "rsqrt",
        "exp": "exp", "expf": "exp", "native_exp": "exp", "__expf": "exp", "log": "log", "logf": "log",
        "native_log": "log", "sin": "sin", "sinf": "sin", "native_sin": "sin", "__sinf": "sin", "cos": "cos",
        "cosf": "cos", "native_cos": "cos", "fabs": "fabs", "fabsf": "fabs", "fmin": "min", "fminf": "min",
        "fmax": "max", "fmaxf": "max", "min": "min", "max": "max", "fma": "fma", "fmaf": "fma", "mad": "fma",
        "native_recip": "recip", "__frcp_rn": "recip", "native_divide": "div", "__fdividef": "div"}
BARRIERS = {"barrier", "__syncthreads", "work_group_barrier", "mem_fence", "__syncwarp"}
UNROLLED_TRIPS = 1  # a loop of more fixed iterations than this runs as a loop (PoCL's matmul_tiled with its
# 16-step inner loop ran 8 ns per work-item and region on a Zen 4 VM: one work-item at a time, not in lanes)
# integer operations on sampled values (C semantics where Python's differ)
VALUE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "<": np.less, ">": np.greater, "<=": np.less_equal,
    ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "&": np.bitwise_and, "|": np.bitwise_or,
    "^": np.bitwise_xor, "<<": np.left_shift, ">>": np.right_shift, "min": np.minimum, "max": np.maximum,
    "&&": lambda a, b: (a != 0) & (b != 0), "||": lambda a, b: (a != 0) | (b != 0),
    "/": lambda a, b: np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64), "%": lambda a, b: np.fmod(a, b)}


class BuildError(UserError):
    """A kernel the graph builder cannot turn into a max-plus graph, naming the line."""


class TooLarge(BuildError):
    """A kernel whose unrolled graph passes the builder's statement limit at this size (and, its loops running
    longer, at larger ones)."""


@dataclass
class Array:
    name: str
    space: str  # global, local, constant
    elem: str
    dims: tuple[int, ...] = ()

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES.get(self.elem, 4)


@dataclass
class Data:
    """A data value: a graph node, a load not yet consumed (``pending``), or a constant; ``values`` are its
    integer values at the sampled work-items, where known (loads of the spec's inputs and what follows)."""

    dtype: str
    node: int | None = None
    pending: tuple[int, str, dict] | None = None  # (source node, arc kind, arc info)
    const: bool = False
    deps: tuple[int, ...] = ()  # nodes an address depended on (gathers)
    values: np.ndarray | None = None


@dataclass
class Cond:
    """A condition on the thread index: its truth at each sampled work-item (None where not computable)."""

    values: np.ndarray | None


@dataclass
class Builder:
    """Symbolic execution of one work-item, producing the kernel's fragments."""

    filename: str
    scalars: dict[str, Any]
    local_size: list[int]
    local_arrays: dict[str, tuple[str, tuple[int, ...]]]
    sample: Sample
    contents: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)
    fragments: list[KernelGraph] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Array] = field(default_factory=dict)
    executed: int = 0
    max_statements: int = MAX_UNROLLED  # statements executed before the builder gives up (a cheaper check: fewer)
    # addresses exact at every followed work-item (a buffer-bounds check), the graph secondary: a condition on the
    # thread index in ``c ? a : b`` picks a or b per work-item (as data) instead of following the true value
    exact: bool = False
    global_size: list[int] | None = None
    trips: dict[int, float] = field(default_factory=dict)  # source line -> iterations per entry, as counted

    def __post_init__(self) -> None:
        self.mask = np.ones(self.sample.size, dtype=bool)
        self.guards = 0  # conditions on the work-item that the statement being built runs under
        self.seq = 0  # program order of the global accesses, across reads, writes and fragments
        self.products: set[int] = set()  # floating-point products of the current statement, not yet used
        self._new_fragment()

    # ---- graph bookkeeping ----------------------------------------------------------------------
    def _new_fragment(self) -> None:
        self.g = KernelGraph()
        self.fragments.append(self.g)
        self.mem_in: dict[tuple, int] = {}
        self.mem_out: dict[tuple, int] = {}
        self.local_state: dict[tuple, int] = {}
        self.read_order = 0
        self.write_order = 0

    def error(self, node, message: str, kind: type[BuildError] = BuildError) -> BuildError:
        line = getattr(getattr(node, "coord", None), "line", None)
        where = f"{self.filename}:{line}" if line else self.filename
        return kind(f"{where}: {message}")

    def note(self, node, message: str) -> None:
        line = getattr(getattr(node, "coord", None), "line", "?")
        text = f"line {line}: {message}"
        if text not in self.notes:
            self.notes.append(text)

    def node_of(self, value: Data) -> int | None:
        """The node holding ``value``, creating a load node for a pending read."""
        if value.const:
            return None
        if value.node is None and value.pending is not None:
            src, kind, info = value.pending
            node = self.g.add_node(f"{info.get('label', 'load')}@r")
            self.g.add_arc(src, node, kind, **info)
            for d in value.deps:
                self.g.add_arc(d, node, "move")
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
                self.g.add_arc(d, dst, "move")
            return
        if value.node is not None and value.node != dst:
            self.g.add_arc(value.node, dst, "move")

    def values_of(self, v) -> np.ndarray | None:
        """Integer values of an index or a datum at the sampled work-items (None where unknown)."""
        if isinstance(v, Data):
            return v.values
        if isinstance(v, bool):
            return np.full(self.sample.size, int(v), dtype=np.int64)
        return ix.values(v, self.sample.ids)

    def operation(self, op: str, operands: list[Any], where, cop: str | None = None) -> Data:
        datas = [v for v in operands if isinstance(v, Data)]
        dtype = "double" if any(d.dtype == "double" for d in datas) else (
            "float" if any(d.dtype == "float" for d in datas) else "int")
        values = None
        if dtype == "int" and cop in VALUE_OPS and len(operands) == 2:
            a, b = (self.values_of(v) for v in operands)
            if a is not None and b is not None:
                values = np.asarray(VALUE_OPS[cop](a, b), dtype=np.int64)
        if all(d.const for d in datas):
            return Data(dtype, const=True, values=values)
        if op in ("add", "sub") and dtype != "int":
            fused = self.contract(operands)
            if fused is not None:
                return fused
        node = self.g.add_node(f"{op}#{self.g.size}")
        self.g.add_loop(node, op=op, dtype=dtype, line=getattr(where.coord, "line", None))
        for d in datas:
            self.connect(d, node)
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
    def access_info(self, array: Array, index, where) -> dict[str, Any]:
        info: dict[str, Any] = {"array": array.name, "elem_bytes": array.elem_bytes,
                                "line": getattr(where.coord, "line", None)}
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
        if not self.guards:
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

    def load(self, array: Array, index, where) -> Data:
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
        info = self.access_info(array, index, where)
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
        if dtype == "int" and array.name in self.contents:
            addr = self.values_of(index)
            if addr is not None:
                values = np.asarray(self.contents[array.name](addr), dtype=np.int64)
        return Data(dtype, pending=(src, "read", info), deps=deps, values=values)

    def store(self, array: Array, index, value: Data, where) -> None:
        if array.space == "local":
            key = _local_key(array, index)
            dst = self.g.add_node(f"{array.name}[{_pretty(index)}]'", "output")
            self.local_state[key] = dst
            src = self.node_of(value)
            if src is not None:
                self.g.add_arc(src, dst, "local_write", **self.local_info(array, index))
            return
        info = self.access_info(array, index, where)
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
                self.g.add_arc(dep, dst, "move")

    def barrier(self) -> None:
        """End the fragment: registers computed in it are its outputs too, and inputs of the next one."""
        if not self.g.arcs:
            return
        live = {}
        for name, value in self.env.items():
            if isinstance(value, Data) and not value.const:
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


# ---- source handling ----------------------------------------------------------------------------

QUALIFIERS = re.compile(r'extern\s+"C"|\b(__kernel|kernel(?=\s+void)|__global__|__device__|__host__|__forceinline__|'
                        r'__global|global(?=\s+\w)|__constant|constant(?=\s+\w)|__local|local(?=\s+\w)|__shared__|'
                        r'__private|private(?=\s+\w)|__restrict__|__restrict|restrict|__read_only|__write_only|'
                        r'__launch_bounds__\s*\([^)]*\))\b')
ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
LOCAL_DECL = re.compile(r"\b(?:__local|local|__shared__)\s+(?:volatile\s+)?(\w+)\s+(\w+)\s*((?:\[[^\]]+\])+)")
LOCAL_PARAM = re.compile(r"\b(?:__local|local)\s+(?:const\s+)?(\w+)\s*\*\s*(\w+)")


def preprocess(text: str, filename: str, defines: dict[str, Any]) -> str:
    pp = pcpp.Preprocessor()
    pp.line_directive = "#line"
    for k, v in defines.items():
        pp.define(f"{k} {v}")
    pp.parse(text, filename)
    out = io.StringIO()
    pp.write(out)
    if pp.return_code:
        raise BuildError(f"{filename}: the preprocessor failed")
    return out.getvalue()


def parse(source: str, filename: str, defines: dict[str, Any] | None = None):
    """Preprocess and parse a kernel source; returns (pycparser AST, local arrays, local pointer params). Parsed
    once per source, file name and defines (a program's launches of one kernel share it; nothing mutates it)."""
    return _parse(source, filename, tuple(sorted((str(k), str(v)) for k, v in (defines or {}).items())))


@lru_cache(maxsize=64)
def _parse(source: str, filename: str, defines: tuple[tuple[str, str], ...]):
    text = preprocess(source, filename, dict(defines))
    local_arrays = {}
    for elem, name, dims in LOCAL_DECL.findall(text):
        local_arrays[name] = (elem, tuple(d.strip() for d in re.findall(r"\[([^\]]+)\]", dims)))
    local_params = {name for _, name in LOCAL_PARAM.findall(text)}
    clean = QUALIFIERS.sub(lambda m: " " * len(m.group(0)), ATTRIBUTE.sub(" ", text))
    clean = re.sub(r"\b(float|int|double|uint|half)([2-9]|16)\b", r"\1", clean)
    try:
        ast = c_parser.CParser().parse(PRELUDE + clean, filename)
    except ParseError as exc:
        raise BuildError(f"cannot parse the kernel source: {exc}") from None
    return ast, local_arrays, local_params


def parameter_names(source: str, kernel_name: str, filename: str = "kernel",
                    defines: dict[str, Any] | None = None) -> list[str]:
    """The kernel's parameter names, in order (to bind a launch's positional arguments)."""
    ast, _, _ = parse(source, filename, defines)
    for e in ast.ext:
        if isinstance(e, c_ast.FuncDef) and e.decl.name == kernel_name:
            return [p.name for p in (e.decl.type.args.params if e.decl.type.args else [])]
    raise BuildError(f"{filename}: no kernel named {kernel_name!r}")


def build(source: str, kernel_name: str, scalars: dict[str, Any], local_size: list[int] | None,
          filename: str = "kernel", defines: dict[str, Any] | None = None, global_size: list[int] | None = None,
          contents: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
          buffers: dict[str, int] | None = None, groups: np.ndarray | None = None,
          items: int | None = None, trips: dict[int, float] | None = None,
          max_statements: int = MAX_UNROLLED, exact: bool = False) -> Kernel:
    """The max-plus graph of ``kernel_name`` for one work-item, at the given scalar arguments (a BuildError past
    ``max_statements`` statements executed; with ``exact``, conditional indices picked per work-item, for a check
    of the addresses rather than a graph to time).

    ``global_size`` spreads the sampled work-groups over the grid (else the first group only); ``contents``
    gives integer input arrays' values as functions of element indices (data-dependent loops and gathers are
    followed with them); ``buffers`` the bytes of each array argument (memory footprints). With ``groups`` (linear
    work-group numbers) exactly those work-groups are followed and every global access is kept, with its
    addresses at each of their work-items (their first ``items``, where given), in ``Kernel.accesses`` (the address
    stream of :mod:`gpuprofiler.models.cache.streams`); the request figures are then not computed. ``trips`` gives
    loops the builder cannot count (a while loop, a bound read from memory the launch does not give) the iterations
    per entry the loop profiler counted on the device, by source line."""
    ast, local_arrays, local_params = parse(source, filename, defines)
    funcs = [e for e in ast.ext if isinstance(e, c_ast.FuncDef) and e.decl.name == kernel_name]
    if not funcs:
        names = [e.decl.name for e in ast.ext if isinstance(e, c_ast.FuncDef)]
        raise BuildError(f"{filename}: no kernel named {kernel_name!r} (found: {', '.join(names) or 'none'})")
    fn = funcs[0]
    glob = [int(x) for x in (list(global_size) + [1, 1, 1])[:3]] if global_size else None
    notes = []
    if not local_size and glob:
        local_size = [min(256, glob[0])]
        notes.append(f"no work-group size given: modelled as {local_size[0]} work-items (as drivers often pick)")
    sizes = [int(x) for x in list(local_size or [1]) + [1, 1, 1]][:3]
    scalars = {k: (v.item() if hasattr(v, "item") else v) for k, v in scalars.items()}
    b = Builder(filename, scalars, sizes, {name: (elem, tuple(_extent(d, filename) for d in dims))
                                           for name, (elem, dims) in local_arrays.items()},
                make_sample(glob, sizes, groups=groups, items=items), dict(contents or {}), notes=notes,
                global_size=glob, trips=dict(trips or {}), max_statements=max_statements, exact=exact)
    interp = Interpreter(b, c_ast, {e.decl.name: e for e in ast.ext if isinstance(e, c_ast.FuncDef)})
    for p in (fn.decl.type.args.params if fn.decl.type.args else []):
        interp.declare_param(p, local_params)
    for name, (elem, dims) in local_arrays.items():
        b.arrays[name] = Array(name, "local", elem)
    interp.block(fn.body)
    frags = [g for g in b.fragments if g.arcs or g.outputs]
    accesses: list[Access] = []
    if groups is not None:
        for a in (a for g in b.fragments for a in g.arcs):
            if a.kind in ("read", "write") and "_addr" in a.info:
                addr = a.info.pop("_addr")
                active = a.info.pop("_mask") & b.sample.valid
                accesses.append(Access(a.info["seq"], a.kind, a.info["array"], a.info["elem_bytes"], addr, active))
        accesses.sort(key=lambda x: x.seq)
        l1_miss: dict[str, float] = {}
    else:
        mark_first_reads(frags)
        l1_miss = annotate([a for g in b.fragments for a in g.arcs], b.sample)
    for g in frags:
        if not g.outputs:
            b.notes.append("a fragment writes nothing: it is not timed")
    local_bytes = sum(ELEM_BYTES.get(elem, 4) * int(np.prod(dims or (1,))) for elem, dims in b.local_arrays.values())
    return Kernel(kernel_name, frags or [KernelGraph()], b.notes, local_bytes=local_bytes, local_size=tuple(sizes),
                  global_size=tuple(glob) if glob else None, buffers=dict(buffers or {}), l1_miss=l1_miss,
                  accesses=accesses, sample=b.sample if groups is not None else None)


def build_spec(spec_instance, backend: str = "opencl", groups: np.ndarray | None = None,
               items: int | None = None, trips: dict[int, float] | None = None,
               max_statements: int = MAX_UNROLLED, exact: bool = False) -> Kernel:
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
                 max_statements, exact)


class Interpreter:
    """Walks the kernel's AST for one work-item, calling the builder for loads, stores and operations."""

    def __init__(self, b: Builder, c_ast, functions: dict):
        self.b, self.c, self.functions = b, c_ast, functions

    # ---- declarations -------------------------------------------------------------------------
    def declare_param(self, p, local_params: set[str]) -> None:
        c = self.c
        if isinstance(p.type, c.PtrDecl):
            elem = _type_name(p.type.type)
            space = "local" if p.name in local_params else "global"
            self.b.arrays[p.name] = Array(p.name, space, elem)
            return
        elem = _type_name(p.type)
        if elem in DTYPE:
            self.b.env[p.name] = Data(DTYPE[elem], const=True)  # a kernel argument: in a register at start
            return
        value = self.b.scalars.get(p.name)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            self.b.env[p.name] = int(value)
        else:
            self.b.env[p.name] = sympy.Symbol(p.name, integer=True)

    # ---- statements ---------------------------------------------------------------------------
    def block(self, node) -> None:
        for item in node.block_items or []:
            self.stmt(item)

    def stmt(self, s) -> None:
        c = self.c
        self.b.products.clear()  # a product contracts with an add of its own statement only
        self.b.executed += 1
        if self.b.executed > self.b.max_statements:
            raise self.b.error(s, f"more than {self.b.max_statements} statements after unrolling: the graph is too "
                                  "large", TooLarge)
        if isinstance(s, c.Compound):
            self.block(s)
        elif isinstance(s, c.Decl):
            self.decl(s)
        elif isinstance(s, c.DeclList):
            for d in s.decls:
                self.decl(d)
        elif isinstance(s, c.Assignment):
            self.assign(s)
        elif isinstance(s, c.UnaryOp) and s.op in ("p++", "++", "p--", "--"):
            self.incdec(s)
        elif isinstance(s, c.FuncCall):
            self.expr(s)
        elif isinstance(s, c.If):
            self.branch(s)
        elif isinstance(s, c.For):
            self.loop(s)
        elif isinstance(s, (c.While, c.DoWhile)):
            self.while_loop(s)
        elif isinstance(s, c.Return):
            if s.expr is not None:
                raise self.b.error(s, "a kernel returns nothing")
        elif isinstance(s, (c.EmptyStatement, c.Pragma)):
            pass
        elif isinstance(s, c.ExprList):
            for e in s.exprs:
                self.stmt(e)
        else:
            raise self.b.error(s, f"unsupported statement ({type(s).__name__}) for the max-plus graph builder")

    def decl(self, d) -> None:
        c = self.c
        if isinstance(d.type, c.ArrayDecl):
            if d.name in self.b.arrays:
                return  # a local array, declared from the source scan
            raise self.b.error(d, f"private array {d.name!r}: the builder models scalars, global and local arrays")
        if isinstance(d.type, c.PtrDecl):
            raise self.b.error(d, f"pointer variable {d.name!r}: index the kernel's arrays directly")
        elem = _type_name(d.type)
        if d.init is None:
            self.b.env[d.name] = Data(DTYPE[elem], const=True) if elem in DTYPE else 0
            return
        self.b.env[d.name] = self.as_variable(self.expr(d.init), elem, d)

    def as_variable(self, value, elem: str, where):
        """A value held in a variable: loads are materialised (a variable is read maybe more than once)."""
        if elem in DTYPE and not isinstance(value, Data):
            return Data(DTYPE[elem], const=True)
        if isinstance(value, Data):
            self.b.node_of(value)
            return Data(value.dtype, node=value.node, const=value.const, values=value.values)
        if isinstance(value, Cond):
            raise self.b.error(where, "a condition on the thread index kept in a variable is not modelled")
        return int(value) if isinstance(value, bool) else value

    def assign(self, s) -> None:
        c = self.c
        value = self.expr(s.rvalue)
        if s.op != "=":
            op = s.op[:-1]
            current = self.expr(s.lvalue)
            value = self.binary(op, current, value, s)
        target = s.lvalue
        if isinstance(target, c.ID):
            old = self.b.env.get(target.name)
            elem = "float" if isinstance(old, Data) and old.dtype == "float" else (
                "double" if isinstance(old, Data) and old.dtype == "double" else "int")
            self.b.env[target.name] = self.as_variable(value, elem, s)
        elif isinstance(target, c.ArrayRef):
            array, index = self.subscript(target)
            if not isinstance(value, Data):
                value = Data(DTYPE.get(array.elem, "int"), const=True)
            self.b.store(array, index, value, s)
        else:
            raise self.b.error(s, "unsupported assignment target")

    def incdec(self, s) -> None:
        if not isinstance(s.expr, self.c.ID):
            raise self.b.error(s, "++/-- only on variables")
        v = self.b.env.get(s.expr.name)
        delta = 1 if "++" in s.op else -1
        if isinstance(v, Data):
            self.b.env[s.expr.name] = self.operation("add", [v, delta], s, "+")
        else:
            self.b.env[s.expr.name] = ix.add(v, delta)

    def with_mask(self, cond: Cond | Data, body) -> None:
        """Run ``body`` with the sampled work-items narrowed to those where ``cond`` holds (where known)."""
        values = cond.values
        saved = self.b.mask
        if values is not None:
            self.b.mask = saved & (np.asarray(values) != 0)
        self.b.guards += 1
        try:
            self.stmt(body)
        finally:
            self.b.mask = saved
            self.b.guards -= 1

    def branch(self, s) -> None:
        cond = self.expr(s.cond)
        if isinstance(cond, Data):
            self.b.note(s, "branch on loaded data: the graph follows the then-branch")
            self.with_mask(cond, s.iftrue)
            return
        if isinstance(cond, Cond):
            self.b.note(s, "branch on the thread index: the graph follows the work-items that take it "
                           "(the slowest; a barrier or the kernel's end waits for them)")
            self.with_mask(cond, s.iftrue)
            return
        value = _truth_value(cond)
        if value is None:
            raise self.b.error(s, f"a condition the builder cannot decide ({ix.pretty(cond)})")
        chosen = s.iftrue if value else s.iffalse
        if chosen is not None:
            self.stmt(chosen)

    def _looping(self, s, trips: float | None) -> None:
        """Marks the current fragment as running a loop of its own (:attr:`KernelGraph.looped`): one without a
        barrier in its body, of more than :data:`UNROLLED_TRIPS` iterations or of a count not fixed by constants."""
        if (trips is None or trips > UNROLLED_TRIPS) and not _has_barrier(s.stmt):
            self.b.g.looped = True

    def loop(self, s) -> None:
        c = self.c
        if s.init is not None:
            self.stmt(s.init)
        var = _loop_var(s, c)
        form = _counted_form(s, c, var)
        if form is not None:
            op, bound_expr, step = form
            start = self.b.env.get(var)
            bound = self.expr(bound_expr)
            if not (isinstance(start, int) and isinstance(bound, int)):
                self.counted_loop(s, var, start, op, bound, step)
                return
        trips = 0
        while True:
            if s.cond is not None:
                cond = self.expr(s.cond)
                if isinstance(cond, Data) and self.counted(s):
                    self.unroll_counted(s, s.stmt, s.next)
                    return
                if isinstance(cond, Data):
                    raise self.b.error(s, "the loop's trip count depends on data read from memory, in a loop the "
                                          "builder cannot count (write it as for (v = a; v < b; v += c), or count "
                                          "it on the device: `gpuprofiler maxplus --count-loops`)")
                value = _truth_value(cond)
                if value is None:
                    what = (", ".join(sorted(str(x) for x in ix.as_sympy(cond).free_symbols))
                            if not isinstance(cond, Cond) else "the work-item")
                    raise self.b.error(s, f"the loop's trip count is not fixed by constants and the launch's "
                                          f"arguments (it depends on {what})")
                if not value:
                    break
            elif trips > MAX_UNROLLED:
                raise self.b.error(s, "a loop without a condition")
            self.stmt(s.stmt)
            trips += 1
            if s.next is not None:
                self.stmt(s.next)
            if var is not None and isinstance(self.b.env.get(var), Data):
                raise self.b.error(s, f"loop variable {var!r} is computed from loaded data")
        self._looping(s, trips)

    def counted_loop(self, s, var: str, start, op: str, bound, step: int) -> None:
        """A loop whose bounds vary over the work-items: unrolled for the mean trip count of the sampled
        work-items, each pass narrowing them to those still looping."""
        lo, hi = self.b.values_of(start), self.b.values_of(bound)
        if lo is None or hi is None:
            raise self.b.error(s, "the loop's trip count depends on data read from memory that the launch does "
                                  "not give (the max-plus model needs its values: describe the input in a kernel "
                                  "spec)")
        trips = _trips(lo, hi, op, step)
        if trips is None:
            raise self.b.error(s, f"the loop 'for ({var} ...; {var} {op} ...; {var} += {step})' does not end "
                                  "for some work-items")
        self._looping(s, None)
        active = self.b.mask & self.b.sample.valid
        counts = trips[active] if active.any() else np.zeros(1, np.int64)
        passes = int(round(float(counts.mean())))
        self.b.note(s, f"data-dependent loop: {counts.mean():.3g} passes on average over {len(counts)} sampled "
                       f"work-items (min {counts.min()}, max {counts.max()}); the graph unrolls {passes}")
        saved = self.b.mask
        try:
            for k in range(passes):
                self.b.mask = saved & (trips > k)
                self.stmt(s.stmt)
                if s.next is not None:
                    self.stmt(s.next)
        finally:
            self.b.mask = saved

    def counted(self, s) -> bool:
        """Whether the loop profiler counted this loop (its source line)."""
        return getattr(s.coord, "line", None) in self.b.trips

    def unroll_counted(self, s, body, step=None) -> None:
        """A loop the builder cannot count, unrolled for the iterations per entry the loop profiler counted on
        the device."""
        per_entry = float(self.b.trips[s.coord.line])
        passes = int(round(per_entry))
        self._looping(s, None)
        self.b.note(s, f"loop counted on the device: {per_entry:.4g} iterations per entry; the graph unrolls {passes}")
        for _ in range(passes):
            self.stmt(body)
            if step is not None:
                self.stmt(step)

    def while_loop(self, s) -> None:
        if self.counted(s):
            self.unroll_counted(s, s.stmt)
            return
        cond = self.expr(s.cond)
        if isinstance(cond, Data):
            raise self.b.error(s, "the loop's trip count depends on data read from memory: the max-plus model "
                                  "needs loops it can count (write it as for (v = a; v < b; v += c), or count it on "
                                  "the device: `gpuprofiler maxplus --count-loops`)")
        raise self.b.error(s, "while loops are not unrolled: write a for loop with a fixed trip count (or count it "
                              "on the device: `gpuprofiler maxplus --count-loops`)")

    # ---- expressions --------------------------------------------------------------------------
    def expr(self, e):
        c = self.c
        if isinstance(e, c.Constant):
            return _constant(e)
        if isinstance(e, c.ID):
            if e.name in self.b.env:
                return self.b.env[e.name]
            if e.name in ("CLK_LOCAL_MEM_FENCE", "CLK_GLOBAL_MEM_FENCE", "true", "false"):
                return 1 if e.name != "false" else 0
            if e.name in self.b.arrays:
                raise self.b.error(e, f"array {e.name!r} used without an index")
            raise self.b.error(e, f"unknown name {e.name!r}")
        if isinstance(e, c.BinaryOp):
            return self.binary(e.op, self.expr(e.left), self.expr(e.right), e)
        if isinstance(e, c.UnaryOp):
            return self.unary(e)
        if isinstance(e, c.TernaryOp):
            cond = self.expr(e.cond)
            a, b = self.expr(e.iftrue), self.expr(e.iffalse)
            if isinstance(cond, Data):
                return self.operation("select", [cond, a, b], e)
            value = _truth_value(cond)
            if value is not None:
                return a if value else b
            if self.b.exact:
                picked = _select(cond, a, b, self.b)
                if picked is not None:
                    return picked
            self.b.note(e, "condition on the thread index: the graph follows the true value")
            return a
        if isinstance(e, c.ArrayRef):
            array, index = self.subscript(e)
            return self.b.load(array, index, e)
        if isinstance(e, c.FuncCall):
            return self.call(e)
        if isinstance(e, c.Cast):
            value = self.expr(e.expr)
            elem = _type_name(e.to_type.type)
            if elem in DTYPE and not isinstance(value, Data):
                return Data(DTYPE[elem], const=True)
            return value
        if isinstance(e, c.StructRef):
            return self.builtin_struct(e)
        if isinstance(e, c.ExprList):
            out = None
            for x in e.exprs:
                out = self.expr(x)
            return out
        if isinstance(e, c.Assignment):
            self.assign(e)
            return self.expr(e.lvalue)
        raise self.b.error(e, f"unsupported expression ({type(e).__name__})")

    def binary(self, op: str, left, right, where):
        if isinstance(left, Data) or isinstance(right, Data):
            return self.operation(BINOPS.get(op, "add"), [left, right], where, op)
        if op in ("&&", "||"):
            return self.logic(op, left, right)
        if isinstance(left, Cond) or isinstance(right, Cond):
            raise self.b.error(where, f"unsupported arithmetic {op!r} on a condition")
        try:
            if op == "+":
                return ix.add(left, right)
            if op == "-":
                return ix.sub(left, right)
            if op == "*":
                return ix.mul(left, right)
            if op == "/":
                return ix.div(left, right)
            if op == "%":
                return ix.mod(left, right)
            if op in ("<<", ">>") and isinstance(right, int):
                if isinstance(left, int):
                    return left << right if op == "<<" else left >> right
                return ix.mul(left, 1 << right) if op == "<<" else ix.floordiv(left, 1 << right)
            if op in ("<", ">", "<=", ">=", "==", "!="):
                return self.compare(op, left, right)
            if op in ("&", "|", "^") and isinstance(left, int) and isinstance(right, int):
                return {"&": left & right, "|": left | right, "^": left ^ right}[op]
        except (TypeError, ZeroDivisionError):
            pass
        raise self.b.error(where, f"unsupported index arithmetic {op!r}")

    def compare(self, op: str, left, right):
        """A comparison of indices: a bool when both are numbers, else a condition on the thread index with its
        truth at the sampled work-items."""
        if isinstance(left, int) and isinstance(right, int):
            return bool(VALUE_OPS[op](left, right))
        a, b = self.b.values_of(left), self.b.values_of(right)
        if a is None or b is None:
            value = _truth_value(_sympy_compare(op, ix.as_sympy(left), ix.as_sympy(right)))
            if value is not None:
                return value
            return Cond(None)
        return Cond(np.asarray(VALUE_OPS[op](a, b), dtype=bool))

    def logic(self, op: str, left, right):
        lv, rv = _truth_value(left), _truth_value(right)
        absorbing = op == "||"  # the value that decides alone: false for &&, true for ||
        if lv is absorbing or rv is absorbing:
            return absorbing
        if lv is not None:  # the neutral value: the other side decides
            return right if rv is None else rv
        if rv is not None:
            return left
        a, b = _cond_values(left, self.b), _cond_values(right, self.b)
        if a is None or b is None:
            return Cond(None)
        return Cond(a & b if op == "&&" else a | b)

    def unary(self, e):
        op = e.op
        if op in ("p++", "++", "p--", "--"):
            self.incdec(e)
            return self.expr(e.expr)
        v = self.expr(e.expr)
        if op == "-":
            return self.operation("neg", [v], e) if isinstance(v, Data) else ix.neg(v)
        if op == "+":
            return v
        if op == "!":
            if isinstance(v, Data):
                return self.operation("cmp", [v, 0], e, "==")
            truth = _truth_value(v)
            if truth is not None:
                return not truth
            values = _cond_values(v, self.b)
            return Cond(None if values is None else ~values)
        if op == "sizeof":
            return 4
        raise self.b.error(e, f"unsupported operator {op!r}")

    def operation(self, op: str, operands, where, cop: str | None = None) -> Data:
        return self.b.operation(op, list(operands), where, cop)

    def subscript(self, e):
        c = self.c
        indices = []
        node = e
        while isinstance(node, c.ArrayRef):
            indices.append(self.expr(node.subscript))
            node = node.name
        if not isinstance(node, c.ID) or node.name not in self.b.arrays:
            raise self.b.error(e, "only the kernel's arrays can be indexed")
        array = self.b.arrays[node.name]
        indices.reverse()
        if any(isinstance(i, Cond) for i in indices):
            raise self.b.error(e, "a condition used as an index")
        if len(indices) == 1:
            return array, indices[0]
        if any(isinstance(i, Data) for i in indices):
            return array, next(i for i in indices if isinstance(i, Data))
        dims = self.b.local_arrays.get(node.name, (None, ()))[1]
        if len(dims) != len(indices):
            raise self.b.error(e, f"{node.name!r} has {len(dims)} dimensions, indexed with {len(indices)}")
        flat = 0
        for k, idx in enumerate(indices):
            extent = int(np.prod(dims[k + 1:])) if k + 1 < len(dims) else 1
            flat = ix.add(flat, ix.mul(idx, extent))
        return array, flat

    def builtin_struct(self, e):
        c = self.c
        if isinstance(e.name, c.ID) and e.field.name in ("x", "y", "z"):
            d = "xyz".index(e.field.name)
            base = e.name.name
            if base == "threadIdx":
                return Affine.thread(d)
            if base == "blockIdx":
                return Affine.thread(3 + d)
            if base == "blockDim":
                return self.b.local_size[d]
            if base == "gridDim" and self.b.global_size:
                return -(-self.b.global_size[d] // self.b.local_size[d])
        raise self.b.error(e, "unsupported member access (vector types and structs are not modelled)")

    def call(self, e):
        c = self.c
        name = e.name.name if isinstance(e.name, c.ID) else None
        args = e.args.exprs if e.args is not None else []
        if name in ("get_global_id", "get_local_id", "get_group_id", "get_local_size", "get_global_size",
                    "get_num_groups"):
            d = self.expr(args[0])
            if not isinstance(d, int) or not 0 <= d <= 2:
                raise self.b.error(e, f"{name} needs a constant dimension 0, 1 or 2")
            size = self.b.local_size[d]
            if name == "get_global_id":
                return ix.add(ix.mul(Affine.thread(3 + d), size), Affine.thread(d))
            if name in ("get_global_size", "get_num_groups"):
                if not self.b.global_size:
                    raise self.b.error(e, f"{name} needs the launch's global size")
                groups = -(-self.b.global_size[d] // size)
                return groups * size if name == "get_global_size" else groups
            return {"get_local_id": Affine.thread(d), "get_group_id": Affine.thread(3 + d),
                    "get_local_size": size}[name]
        if name in BARRIERS:
            self.b.barrier()
            return 0
        values = [self.expr(a) for a in args]
        if name in MATH:
            if not any(isinstance(v, Data) for v in values):
                if name in ("min", "max") and len(values) == 2 and all(isinstance(v, int) for v in values):
                    return min(values) if name == "min" else max(values)
                if name in ("min", "max") and all(not isinstance(v, Cond) for v in values):
                    return ix._from_sympy((sympy.Min if name == "min" else sympy.Max)(
                        *[ix.as_sympy(v) for v in values]))
                return Data("float", const=True)
            cop = name if name in ("min", "max") and len(values) == 2 else None
            return self.operation(MATH[name], values, e, cop)
        if name in self.functions:
            raise self.b.error(e, f"call to {name!r}: inline helper functions into the kernel for the builder")
        raise self.b.error(e, f"unsupported function {name!r}")


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


def _counted_form(s, c, var: str | None) -> tuple[str, Any, int] | None:
    """``for (v = a; v OP b; v += k)`` with a constant step: (OP, the AST of b, k); else None."""
    if var is None or not isinstance(s.cond, c.BinaryOp) or s.cond.op not in ("<", "<=", ">", ">=", "!="):
        return None
    op, left, right = s.cond.op, s.cond.left, s.cond.right
    if isinstance(right, c.ID) and right.name == var and not (isinstance(left, c.ID) and left.name == var):
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "!=": "!="}[op]
        left, right = right, left
    if not (isinstance(left, c.ID) and left.name == var):
        return None
    nxt, step = s.next, None
    if isinstance(nxt, c.UnaryOp) and isinstance(nxt.expr, c.ID) and nxt.expr.name == var:
        step = 1 if "++" in nxt.op else -1 if "--" in nxt.op else None
    elif (isinstance(nxt, c.Assignment) and isinstance(nxt.lvalue, c.ID) and nxt.lvalue.name == var
          and nxt.op in ("+=", "-=") and isinstance(nxt.rvalue, c.Constant)):
        k = _constant(nxt.rvalue)
        step = (k if nxt.op == "+=" else -k) if isinstance(k, int) else None
    if not step:
        return None
    return op, right, step


def _trips(start: np.ndarray, bound: np.ndarray, op: str, step: int) -> np.ndarray | None:
    """Passes of ``for (v = start; v OP bound; v += step)`` per work-item (None where it never ends)."""
    d = bound.astype(np.int64) - start.astype(np.int64)
    if op in ("<", "<="):
        if step < 0:
            return None if np.any(d > 0) else np.zeros_like(d)
        d = d + (1 if op == "<=" else 0)
        return np.maximum(0, -(-d // step))
    if op in (">", ">="):
        if step > 0:
            return None if np.any(d < 0) else np.zeros_like(d)
        d = -d + (1 if op == ">=" else 0)
        return np.maximum(0, -(-d // -step))
    if np.any(d % step != 0) or np.any(d // step < 0):
        return None
    return d // step


def _truth_value(v) -> bool | None:
    """A condition's truth where it is the same for every work-item, else None."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, int):
        return v != 0
    if isinstance(v, (Cond, Data, Affine)):
        return None  # differs between work-items (even where the sampled ones agree)
    if v is sympy.true or v is sympy.false:
        return bool(v)
    if isinstance(v, sympy.Basic) and v.is_number:
        return bool(v != 0)
    return None


def _select(cond, a, b, builder: Builder) -> Data | None:
    """``cond ? a : b`` at each followed work-item, for indices (or integer data known there): their values as
    data, without a node (the exact mode of a bounds check); None where a value is unknown."""
    if any(isinstance(v, Data) and not v.const for v in (a, b)):
        return None
    which, av, bv = _cond_values(cond, builder), builder.values_of(a), builder.values_of(b)
    if which is None or av is None or bv is None:
        return None
    return Data("int", const=True, values=np.where(which, av, bv).astype(np.int64))


def _cond_values(v, b: Builder) -> np.ndarray | None:
    if isinstance(v, Cond):
        return v.values
    truth = _truth_value(v)
    if truth is not None:
        return np.full(b.sample.size, truth, dtype=bool)
    return None


def _sympy_compare(op, a, b):
    fn = {"<": sympy.Lt, ">": sympy.Gt, "<=": sympy.Le, ">=": sympy.Ge, "==": sympy.Eq, "!=": sympy.Ne}[op]
    return fn(a, b)


def _extent(text: str, filename: str) -> int:
    """A local array's extent (``TILE + 1`` after preprocessing) by the safe arithmetic evaluator."""
    return evaluate_int(text, {}, f"{filename}: local array extent")


def _type_name(t) -> str:
    node = t
    while hasattr(node, "type") and not hasattr(node, "names"):
        node = node.type
    names = [n for n in getattr(node, "names", ["int"]) if n not in ("unsigned", "signed", "const", "volatile")]
    return names[-1] if names else "int"


def _constant(e):
    text = e.value.rstrip("uUlLfF") if e.type in ("int", "long", "unsigned int") else e.value
    if e.type in ("float", "double"):
        return Data("float" if e.value[-1:] in "fF" else "double", const=True)
    if e.type == "char":
        return ord(e.value.strip("'")[0])
    try:
        return int(text, 0)
    except ValueError:
        return int(text.rstrip("uUlL"), 0)


def _has_barrier(node) -> bool:
    """Whether a statement calls a barrier anywhere inside it."""
    if node is None:
        return False
    if type(node).__name__ == "FuncCall" and getattr(node.name, "name", None) in BARRIERS:
        return True
    return any(_has_barrier(child) for _, child in node.children())


def _loop_var(s, c) -> str | None:
    init = s.init
    if isinstance(init, c.DeclList) and init.decls:
        return init.decls[0].name
    if isinstance(init, c.Assignment) and isinstance(init.lvalue, c.ID):
        return init.lvalue.name
    return None
