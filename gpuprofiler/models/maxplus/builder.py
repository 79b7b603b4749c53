"""Build a kernel's max-plus graph from its OpenCL C or CUDA source (the paper's missing code analyser).

The source is preprocessed (pcpp), stripped of address-space qualifiers and parsed as C (pycparser);
then one work-item is executed symbolically:

* integer arithmetic on thread indices and scalar arguments stays an index expression (sympy), so
  every global access knows how its address moves with the thread index: unit stride, strided (with
  the stride), uniform, or a gather (the address depends on loaded data);
* a global load is an input node (the data in memory) with a read arc to its consumer; a store is an
  output node with a write arc; each arithmetic operation is a node whose own time is a self-loop;
* loops whose trip count follows from constants and the launch's scalar arguments are unrolled; a
  loop whose length depends on loaded data is refused (the model's stated limit);
* branches on the thread index follow the work-item that takes them (the slowest one, that a
  barrier or the kernel's end waits for); ``barrier()`` / ``__syncthreads()`` end a fragment.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pcpp
import sympy
from pycparser import c_ast, c_parser
from pycparser.c_parser import ParseError

from gpuprofiler.errors import UserError
from gpuprofiler.models.maxplus.graph import Kernel, KernelGraph
from gpuprofiler.workloads.safe_eval import evaluate_int

MAX_UNROLLED = 1 << 20  # statements executed while unrolling: beyond this the graph is too large

LX, LY, LZ = sympy.symbols("lx ly lz", integer=True, nonnegative=True)
BX, BY, BZ = sympy.symbols("bx by bz", integer=True, nonnegative=True)
THREAD = (LX, LY, LZ, BX, BY, BZ)

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


class BuildError(UserError):
    """A kernel the graph builder cannot turn into a max-plus graph, naming the line."""


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
    """A data value: a graph node, a load not yet consumed (``pending``), or a constant."""

    dtype: str
    node: int | None = None
    pending: tuple[int, str, dict] | None = None  # (source node, arc kind, arc info)
    const: bool = False
    deps: tuple[int, ...] = ()  # nodes an address depended on (gathers)


@dataclass
class Builder:
    """Symbolic execution of one work-item, producing the kernel's fragments."""

    filename: str
    scalars: dict[str, Any]
    local_size: list[int]
    local_arrays: dict[str, tuple[str, tuple[int, ...]]]
    fragments: list[KernelGraph] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Array] = field(default_factory=dict)
    executed: int = 0

    def __post_init__(self) -> None:
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

    def error(self, node, message: str) -> BuildError:
        line = getattr(getattr(node, "coord", None), "line", None)
        where = f"{self.filename}:{line}" if line else self.filename
        return BuildError(f"{where}: {message}")

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

    def operation(self, op: str, operands: list[Any], where) -> Data:
        datas = [v for v in operands if isinstance(v, Data)]
        dtype = "double" if any(d.dtype == "double" for d in datas) else (
            "float" if any(d.dtype == "float" for d in datas) else "int")
        if all(d.const for d in datas):
            return Data(dtype, const=True)
        node = self.g.add_node(f"{op}#{self.g.size}")
        self.g.add_loop(node, op=op, dtype=dtype, line=getattr(where.coord, "line", None))
        for d in datas:
            self.connect(d, node)
        return Data(dtype, node=node)

    # ---- memory -------------------------------------------------------------------------------
    def access_info(self, array: Array, index, where) -> dict[str, Any]:
        info: dict[str, Any] = {"array": array.name, "elem_bytes": array.elem_bytes,
                                "line": getattr(where.coord, "line", None)}
        if isinstance(index, Data):
            info.update(pattern="gather", stride=None, label=f"{array.name}[gather]")
            return info
        expr = sympy.expand(index)
        info["index"] = str(expr)
        info["_expr"] = expr
        info["label"] = f"{array.name}[{_pretty(expr)}]"
        concrete = expr.subs({sympy.Symbol(k, integer=True): v for k, v in self.scalars.items()})
        stride = sympy.diff(concrete, LX)
        if not stride.is_number:
            info.update(pattern="gather", stride=None)
        elif stride == 0:
            info.update(pattern="uniform", stride=0)
        elif abs(int(stride)) == 1:
            info.update(pattern="unit", stride=1)
        else:
            info.update(pattern="strided", stride=abs(int(stride)))
        return info

    def load(self, array: Array, index, where) -> Data:
        dtype = DTYPE.get(array.elem, "int")
        if array.space == "local":
            key = _local_key(array, index)
            src = self.local_state.get(key)
            if src is None:
                src = self.g.add_node(f"{array.name}[{_pretty(index)}]", "input")
                self.local_state[key] = src
            return Data(dtype, pending=(src, "local_read", {"array": array.name, "label": self.g.names[src]}))
        info = self.access_info(array, index, where)
        key = (array.name, info.get("index", f"gather{self.g.size}"))  # each gather is its own address
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
        return Data(dtype, pending=(src, "read", info), deps=deps)

    def store(self, array: Array, index, value: Data, where) -> None:
        if array.space == "local":
            key = _local_key(array, index)
            dst = self.g.add_node(f"{array.name}[{_pretty(index)}]'", "output")
            self.local_state[key] = dst
            src = self.node_of(value)
            if src is not None:
                self.g.add_arc(src, dst, "local_write", array=array.name)
            return
        info = self.access_info(array, index, where)
        key = (array.name, info.get("index", f"gather{self.g.size}"))  # each gather is its own address
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
                live[name] = value.dtype
        self._new_fragment()
        for name, dtype in live.items():
            self.env[name] = Data(dtype, node=self.g.add_node(name, "input"))


def _local_key(array: Array, index) -> tuple:
    """A local-memory address: the array and its index expression (a data-dependent index is its own)."""
    return (array.name, str(sympy.expand(index)) if not isinstance(index, Data) else id(index))


def _pretty(expr) -> str:
    if isinstance(expr, Data):
        return "?"
    text = sympy.sstr(expr)
    return text.replace(" ", "")


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
    """Preprocess and parse a kernel source; returns (pycparser AST, local arrays, local pointer params)."""
    text = preprocess(source, filename, defines or {})
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


def build(source: str, kernel_name: str, scalars: dict[str, Any], local_size: list[int] | None,
          filename: str = "kernel", defines: dict[str, Any] | None = None) -> Kernel:
    """The max-plus graph of ``kernel_name`` for one work-item, at the given scalar arguments."""
    ast, local_arrays, local_params = parse(source, filename, defines)
    funcs = [e for e in ast.ext if isinstance(e, c_ast.FuncDef) and e.decl.name == kernel_name]
    if not funcs:
        names = [e.decl.name for e in ast.ext if isinstance(e, c_ast.FuncDef)]
        raise BuildError(f"{filename}: no kernel named {kernel_name!r} (found: {', '.join(names) or 'none'})")
    fn = funcs[0]
    sizes = list(local_size or [1]) + [1, 1, 1]
    scalars = {k: (v.item() if hasattr(v, "item") else v) for k, v in scalars.items()}
    b = Builder(filename, scalars, sizes[:3], {name: (elem, tuple(_extent(d, filename) for d in dims))
                                                    for name, (elem, dims) in local_arrays.items()})
    interp = Interpreter(b, c_ast, {e.decl.name: e for e in ast.ext if isinstance(e, c_ast.FuncDef)})
    for p in (fn.decl.type.args.params if fn.decl.type.args else []):
        interp.declare_param(p, local_params)
    for name, (elem, dims) in local_arrays.items():
        b.arrays[name] = Array(name, "local", elem)
    interp.block(fn.body)
    frags = [g for g in b.fragments if g.arcs or g.outputs]
    mark_first_reads(frags)
    for g in frags:
        if not g.outputs:
            b.notes.append("a fragment writes nothing: it is not timed")
    return Kernel(kernel_name, frags or [KernelGraph()], b.notes)


def build_spec(spec_instance, backend: str = "opencl") -> Kernel:
    """The graph of a kernel spec at its instantiated size, from its OpenCL (or CUDA) source."""
    spec = spec_instance.spec
    kinds = [backend] + [k for k in ("opencl", "cuda") if k != backend]
    path = next((spec.sources[k] for k in kinds if k in spec.sources), None)
    if path is None:
        raise BuildError(f"{spec.path}: spec {spec.name!r} has no source")
    text = Path(path).read_text()
    return build(text, spec.kernel, spec_instance.scalars, spec_instance.local_size, str(path),
                 spec_instance.defines)


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
        else:
            self.b.env[p.name] = sympy.Symbol(p.name, integer=True)

    # ---- statements ---------------------------------------------------------------------------
    def block(self, node) -> None:
        for item in node.block_items or []:
            self.stmt(item)

    def stmt(self, s) -> None:
        c = self.c
        self.b.executed += 1
        if self.b.executed > MAX_UNROLLED:
            raise self.b.error(s, f"more than {MAX_UNROLLED} statements after unrolling: the graph is too large")
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
            self.b.env[d.name] = Data(DTYPE[elem], const=True) if elem in DTYPE else sympy.Integer(0)
            return
        self.b.env[d.name] = self.as_variable(self.expr(d.init), elem, d)

    def as_variable(self, value, elem: str, where):
        """A value held in a variable: loads are materialised (a variable is read maybe more than once)."""
        if elem in DTYPE and not isinstance(value, Data):
            return Data(DTYPE[elem], const=True)
        if isinstance(value, Data):
            self.b.node_of(value)
            return Data(value.dtype, node=value.node, const=value.const)
        return value

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
            self.b.env[s.expr.name] = self.operation("add", [v], s)
        else:
            self.b.env[s.expr.name] = v + delta

    def branch(self, s) -> None:
        cond = self.expr(s.cond)
        if isinstance(cond, Data):
            self.b.note(s, "branch on loaded data: the graph follows the then-branch")
            self.stmt(s.iftrue)
            return
        concrete = self.concrete(cond)
        if concrete is not None and not concrete.free_symbols:
            chosen = s.iftrue if bool(concrete) else s.iffalse
            if chosen is not None:
                self.stmt(chosen)
            return
        self.b.note(s, "branch on the thread index: the graph follows the work-items that take it "
                       "(the slowest; a barrier or the kernel's end waits for them)")
        self.stmt(s.iftrue)

    def loop(self, s) -> None:
        c = self.c
        if s.init is not None:
            self.stmt(s.init)
        var = _loop_var(s, c)
        trips = 0
        while True:
            if s.cond is not None:
                cond = self.expr(s.cond)
                if isinstance(cond, Data):
                    raise self.b.error(s, "the loop's trip count depends on data read from memory: the max-plus "
                                          "model needs loops of fixed length (unrolled)")
                value = self.concrete(cond)
                if value is None or value.free_symbols:
                    what = ", ".join(sorted(str(x) for x in (value.free_symbols if value is not None else [])))
                    raise self.b.error(s, f"the loop's trip count is not fixed by constants and the launch's "
                                          f"arguments (it depends on {what or 'the work-item'})")
                if not bool(value):
                    break
            elif trips > MAX_UNROLLED:
                raise self.b.error(s, "a loop without a condition")
            self.stmt(s.stmt)
            trips += 1
            if s.next is not None:
                self.stmt(s.next)
            if var is not None and isinstance(self.b.env.get(var), Data):
                raise self.b.error(s, f"loop variable {var!r} is computed from loaded data")

    def while_loop(self, s) -> None:
        cond = self.expr(s.cond)
        if isinstance(cond, Data):
            raise self.b.error(s, "the loop's trip count depends on data read from memory: the max-plus model "
                                  "needs loops of fixed length (unrolled)")
        raise self.b.error(s, "while loops are not unrolled: write a for loop with a fixed trip count")

    # ---- expressions --------------------------------------------------------------------------
    def concrete(self, value):
        """An index expression with the scalar arguments substituted (a number, or symbols left)."""
        if isinstance(value, bool):
            return sympy.true if value else sympy.false
        subs = {sympy.Symbol(k, integer=True): v for k, v in self.b.scalars.items() if isinstance(v, (int, float))}
        try:
            return sympy.sympify(value).subs(subs)
        except (TypeError, sympy.SympifyError):
            return None

    def expr(self, e):
        c = self.c
        if isinstance(e, c.Constant):
            return _constant(e)
        if isinstance(e, c.ID):
            if e.name in self.b.env:
                return self.b.env[e.name]
            if e.name in ("CLK_LOCAL_MEM_FENCE", "CLK_GLOBAL_MEM_FENCE", "true", "false"):
                return sympy.Integer(1 if e.name != "false" else 0)
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
            value = self.concrete(cond)
            if value is not None and not value.free_symbols:
                return a if bool(value) else b
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
            if elem not in DTYPE and isinstance(value, Data) and value.const:
                return value
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
            return self.operation(BINOPS.get(op, "add"), [left, right], where)
        try:
            if op == "+":
                return left + right
            if op == "-":
                return left - right
            if op == "*":
                return left * right
            if op == "/":
                return _div(left, right)
            if op == "%":
                return sympy.Mod(left, right)
            if op == "<<":
                return left * 2 ** right
            if op == ">>":
                return sympy.floor(left / 2 ** right)
            if op in ("<", ">", "<=", ">=", "==", "!="):
                return _compare(op, left, right)
            if op == "&&":
                return sympy.And(_truth(left), _truth(right))
            if op == "||":
                return sympy.Or(_truth(left), _truth(right))
            if op in ("&", "|", "^"):
                lv, rv = self.concrete(left), self.concrete(right)
                if lv is not None and rv is not None and lv.is_Integer and rv.is_Integer:
                    return sympy.Integer({"&": int(lv) & int(rv), "|": int(lv) | int(rv), "^": int(lv) ^ int(rv)}[op])
        except TypeError:
            pass
        raise self.b.error(where, f"unsupported index arithmetic {op!r}")

    def unary(self, e):
        op = e.op
        if op in ("p++", "++", "p--", "--"):
            self.incdec(e)
            return self.expr(e.expr)
        v = self.expr(e.expr)
        if op == "-":
            return self.operation("neg", [v], e) if isinstance(v, Data) else -v
        if op == "+":
            return v
        if op == "!":
            return self.operation("cmp", [v], e) if isinstance(v, Data) else sympy.Not(_truth(v))
        if op == "sizeof":
            return sympy.Integer(4)
        raise self.b.error(e, f"unsupported operator {op!r}")

    def operation(self, op: str, operands, where) -> Data:
        return self.b.operation(op, list(operands), where)

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
        if len(indices) == 1:
            return array, indices[0]
        if any(isinstance(i, Data) for i in indices):
            return array, next(i for i in indices if isinstance(i, Data))
        dims = self.b.local_arrays.get(node.name, (None, ()))[1]
        if len(dims) != len(indices):
            raise self.b.error(e, f"{node.name!r} has {len(dims)} dimensions, indexed with {len(indices)}")
        flat = sympy.Integer(0)
        for k, idx in enumerate(indices):
            extent = 1
            for d in dims[k + 1:]:
                extent *= d
            flat += idx * extent
        return array, flat

    def builtin_struct(self, e):
        c = self.c
        if isinstance(e.name, c.ID) and e.field.name in ("x", "y", "z"):
            d = "xyz".index(e.field.name)
            base = e.name.name
            if base == "threadIdx":
                return THREAD[d]
            if base == "blockIdx":
                return THREAD[3 + d]
            if base == "blockDim":
                return sympy.Integer(self.b.local_size[d])
        raise self.b.error(e, "unsupported member access (vector types and structs are not modelled)")

    def call(self, e):
        c = self.c
        name = e.name.name if isinstance(e.name, c.ID) else None
        args = e.args.exprs if e.args is not None else []
        if name in ("get_global_id", "get_local_id", "get_group_id", "get_local_size"):
            d = self.concrete(self.expr(args[0]))
            if d is None or not d.is_Integer or not 0 <= int(d) <= 2:
                raise self.b.error(e, f"{name} needs a constant dimension 0, 1 or 2")
            d = int(d)
            size = self.b.local_size[d]
            return {"get_global_id": THREAD[3 + d] * size + THREAD[d], "get_local_id": THREAD[d],
                    "get_group_id": THREAD[3 + d], "get_local_size": sympy.Integer(size)}[name]
        if name in BARRIERS:
            self.b.barrier()
            return sympy.Integer(0)
        values = [self.expr(a) for a in args]
        if name in MATH:
            if not any(isinstance(v, Data) for v in values):
                if name in ("min", "max"):
                    return (sympy.Min if name == "min" else sympy.Max)(*values)
                return Data("float", const=True)
            return self.operation(MATH[name], values, e)
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
            expr = a.info.get("_expr")
            if expr is None:
                a.info["first"] = True
                continue
            reps = groups.setdefault(a.info["array"], [])
            a.info["first"] = not any(not ((expr - r).free_symbols & set(THREAD)) for r in reps)
            if a.info["first"]:
                reps.append(expr)


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
        return sympy.Integer(ord(e.value.strip("'")[0]))
    try:
        return sympy.Integer(int(text, 0))
    except ValueError:
        return sympy.Integer(int(text.rstrip("uUlL"), 0))


def _div(a, b):
    """C integer division (toward zero) for index arithmetic."""
    a, b = sympy.sympify(a), sympy.sympify(b)
    if a.is_Integer and b.is_Integer:
        q = abs(int(a)) // abs(int(b))
        return sympy.Integer(q if (int(a) >= 0) == (int(b) > 0) else -q)
    return sympy.floor(a / b)


def _truth(v):
    if isinstance(v, (sympy.logic.boolalg.Boolean, bool)):
        return v
    return sympy.Ne(v, 0)


def _compare(op, a, b):
    fn = {"<": sympy.Lt, ">": sympy.Gt, "<=": sympy.Le, ">=": sympy.Ge, "==": sympy.Eq, "!=": sympy.Ne}[op]
    return fn(a, b)


def _loop_var(s, c) -> str | None:
    init = s.init
    if isinstance(init, c.DeclList) and init.decls:
        return init.decls[0].name
    if isinstance(init, c.Assignment) and isinstance(init.lvalue, c.ID):
        return init.lvalue.name
    return None
