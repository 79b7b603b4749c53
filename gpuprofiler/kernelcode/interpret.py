"""Symbolic execution of a kernel's code over sampled work-items.

One walk of the syntax tree stands for every sampled work-item at once:

* integer arithmetic on thread indices and scalar arguments stays an index (an affine form in the thread ids,
  :mod:`.index`, or a sympy expression), so every access knows its element index at each sampled work-item;
* a condition on the work-item is a truth value per work-item; control flow narrows two masks, the work-items that
  *may* run a statement (``mask``) and those that certainly do (``must``): an ``if`` on a known condition narrows
  both, one on unknown data only ``must``; ``return``, ``break`` and ``continue`` take work-items out until their
  function, loop or pass ends; the arms of ``?:``, ``&&`` and ``||`` run only where C evaluates them;
* loops whose trip count follows from constants and the launch's arguments are unrolled;
* pointers are an array and an element offset (``__global float *row = A + i * n``), vector types keep their width
  (a ``float4 *`` element is 16 bytes; ``vload4``/``vstore4`` reach four elements), atomics read and write.

What an execution does with loads, stores, operations and barriers is its :class:`Executor`'s: the max-plus
builder makes graph nodes of them, the access tracer (:mod:`.trace`) records addresses.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import sympy
from pycparser import c_ast

from gpuprofiler.kernelcode import index as ix
from gpuprofiler.kernelcode.index import Affine
from gpuprofiler.kernelcode.sample import Sample
from gpuprofiler.kernelcode.source import DTYPE, ELEM_BYTES, CodeError, TooLarge, extent, functions

MAX_STATEMENTS = 1 << 17  # statements executed before an execution gives up (a cheaper check: fewer)

MATH = {"sqrt": "sqrt", "native_sqrt": "sqrt", "half_sqrt": "sqrt", "sqrtf": "sqrt", "rsqrt": "rsqrt",
        "native_rsqrt": "rsqrt", "rsqrtf": "rsqrt", "exp": "exp", "expf": "exp", "native_exp": "exp",
        "__expf": "exp", "exp2": "exp", "native_exp2": "exp", "log": "log", "logf": "log", "native_log": "log",
        "log2": "log", "native_log2": "log", "sin": "sin", "sinf": "sin", "native_sin": "sin", "__sinf": "sin",
        "cos": "cos", "cosf": "cos", "native_cos": "cos", "__cosf": "cos", "tan": "sin", "native_tan": "sin",
        "pow": "exp", "powf": "exp", "native_powr": "exp", "fabs": "fabs", "fabsf": "fabs", "abs": "fabs",
        "fmin": "min", "fminf": "min", "fmax": "max", "fmaxf": "max", "min": "min", "max": "max", "clamp": "max",
        "fma": "fma", "fmaf": "fma", "mad": "fma", "native_recip": "recip", "__frcp_rn": "recip",
        "native_divide": "div", "__fdividef": "div", "floor": "fabs", "ceil": "fabs", "round": "fabs",
        "trunc": "fabs", "dot": "fma", "length": "sqrt", "normalize": "rsqrt", "select": "select",
        "convert_float": "fabs", "convert_int": "fabs", "as_float": "fabs", "as_int": "fabs", "tanh": "exp",
        "tanhf": "exp", "atan2": "sin", "erf": "exp", "mul24": "mul", "mad24": "fma", "popcount": "and",
        "sincos": "sin", "fract": "fabs", "modf": "fabs", "frexp": "fabs", "lgamma_r": "exp", "remquo": "rem"}
BARRIERS = {"barrier", "__syncthreads", "work_group_barrier", "mem_fence", "__syncwarp", "read_mem_fence",
            "write_mem_fence", "__threadfence", "__threadfence_block"}
ATOMIC = frozenset({"atomic_add", "atomic_sub", "atomic_inc", "atomic_dec", "atomic_min", "atomic_max", "atomic_and",
                    "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cmpxchg", "atom_add", "atom_sub", "atom_inc",
                    "atom_dec", "atom_min", "atom_max", "atom_xchg", "atom_cmpxchg", "atomicAdd", "atomicSub",
                    "atomicMin", "atomicMax", "atomicInc", "atomicDec", "atomicExch", "atomicCAS", "atomicAnd",
                    "atomicOr", "atomicXor"})
# builtins that write a second result through a pointer argument: its position
OUT_PARAMETER = {"sincos": 1, "fract": 1, "modf": 1, "frexp": 1, "lgamma_r": 1, "remquo": 2}
BINOPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<<": "shift", ">>": "shift", "&": "and",
          "|": "or", "^": "xor", "<": "cmp", ">": "cmp", "<=": "cmp", ">=": "cmp", "==": "cmp", "!=": "cmp",
          "&&": "and", "||": "or"}
# integer operations on sampled values (C semantics where Python's differ)
VALUE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "<": np.less, ">": np.greater, "<=": np.less_equal,
    ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "&": np.bitwise_and, "|": np.bitwise_or,
    "^": np.bitwise_xor, "<<": np.left_shift, ">>": np.right_shift, "min": np.minimum, "max": np.maximum,
    "&&": lambda a, b: (a != 0) & (b != 0), "||": lambda a, b: (a != 0) | (b != 0),
    "/": lambda a, b: np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64), "%": lambda a, b: np.fmod(a, b)}
# bitwise operators on an index that moves with the work-item: functions sympy keeps as written, evaluated with numpy
BITWISE = {"&": sympy.Function("bitand"), "|": sympy.Function("bitor"), "^": sympy.Function("bitxor"),
           "<<": sympy.Function("shl"), ">>": sympy.Function("shr")}
ix.register_numeric({"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
                     "shl": np.left_shift, "shr": np.right_shift})
SWIZZLE = set("xyzw") | {"lo", "hi", "even", "odd"}
# OpenCL C's (and C's) predefined constants: the floating-point ones are data, the integer ones indices
FLOAT_CONSTANTS = {"INFINITY", "NAN", "HUGE_VALF", "HUGE_VAL", "MAXFLOAT", "FLT_MAX", "FLT_MIN", "FLT_EPSILON",
                   "DBL_MAX", "DBL_MIN", "DBL_EPSILON", "CUDART_INF_F", "CUDART_NAN_F", "CUDART_PI_F"} | {
    f"M_{k}{s}" for k in ("E", "LOG2E", "LOG10E", "LN2", "LN10", "PI", "PI_2", "PI_4", "1_PI", "2_PI", "2_SQRTPI",
                          "SQRT2", "SQRT1_2") for s in ("", "_F", "_H")}
INT_CONSTANTS = {"CHAR_BIT": 8, "CHAR_MAX": 127, "CHAR_MIN": -128, "SCHAR_MAX": 127, "SCHAR_MIN": -128,
                 "UCHAR_MAX": 255, "SHRT_MAX": 32767, "SHRT_MIN": -32768, "USHRT_MAX": 65535,
                 "INT_MAX": 2**31 - 1, "INT_MIN": -2**31, "UINT_MAX": 2**32 - 1, "LONG_MAX": 2**63 - 1,
                 "LONG_MIN": -2**63, "CLK_LOCAL_MEM_FENCE": 1, "CLK_GLOBAL_MEM_FENCE": 2, "true": 1, "false": 0}


@dataclass
class Array:
    """An array the code indexes: a kernel argument (global or constant), a local-memory array, or a private one;
    ``width`` elements of ``elem`` make one element of the declared type (a ``float4 *``: 4)."""

    name: str
    space: str  # global, local, constant, private
    elem: str
    dims: tuple[int, ...] = ()
    width: int = 1

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES.get(self.elem, 4) * self.width


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
    # as a condition whose values are not known: where it may be true and where it certainly is (None: anywhere,
    # nowhere), from its known parts (``i < n && x[i] > 0`` may be true only where i < n)
    maybe: np.ndarray | None = None
    surely: np.ndarray | None = None
    # a constant computed from the work-item's index (``(float)i``): it differs between work-items, so what is
    # computed from it is the work-item's work, where a constant of the kernel's arguments alone is hoisted
    varying: bool = False


@dataclass
class Cond:
    """A condition on the thread index: its truth at each sampled work-item (None where not computable)."""

    values: np.ndarray | None


@dataclass
class Pointer:
    """A pointer into one of the kernel's arrays: the array and the element offset (an index)."""

    array: Array
    offset: Any = 0


@dataclass
class _Frame:
    """Work-items that left the running function (``return``) or loop (``break``, ``continue``): those that may
    have and those that certainly have."""

    kind: str  # function | loop
    gone_may: np.ndarray
    gone_must: np.ndarray
    next_may: np.ndarray | None = None  # a loop's work-items that continued: back at the next pass
    next_must: np.ndarray | None = None
    exited: bool = False  # a function some work-items left under a condition on the work-item (``if (i >= n) return;``)
    value: list = field(default_factory=list)  # a function's returned values, with the work-items that return each


@dataclass
class Executor:
    """The state of one symbolic execution and what it does with the code's effects (subclasses: the hooks)."""

    filename: str
    scalars: dict[str, Any]
    local_size: list[int]
    local_arrays: dict[str, tuple[str, tuple[int, ...]]]
    sample: Sample
    contents: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Array] = field(default_factory=dict)
    executed: int = 0
    max_statements: int = MAX_STATEMENTS
    global_size: list[int] | None = None
    trips: dict[int, float] = field(default_factory=dict)  # source line -> iterations per entry, as counted
    # source line -> the passes a counted loop is cut to (a graph too large to unroll whole), and the passes per
    # entry each such loop would have run (every entry's, for their mean)
    caps: dict[int, int] = field(default_factory=dict)
    capped: dict[int, list[float]] = field(default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)  # names declared with a vector type: their width
    exact: bool = False  # every followed work-item exactly (both arms of a branch, each loop to its own end)
    local_given: bool = True  # the launch names its work-group size (else the runtime picks one dividing the grid)

    def __post_init__(self) -> None:
        self.mask = np.ones(self.sample.size, dtype=bool)  # work-items that may run the current statement
        self.must = self.sample.valid.copy()  # those that certainly do
        self.guards = 0  # conditions on the work-item that the statement being run is under
        self.frames: list[_Frame] = [self._frame("function")]

    # ---- hooks --------------------------------------------------------------------------------
    def load(self, array: Array, index, where, span: int = 1) -> Data:
        raise NotImplementedError

    def store(self, array: Array, index, value: Data, where, span: int = 1) -> None:
        raise NotImplementedError

    def operation(self, op: str, operands: list[Any], where, cop: str | None = None) -> Data:
        raise NotImplementedError

    def barrier(self) -> None:
        """A work-group barrier."""

    def atomic_at(self, array: Array, index, result: Data) -> None:
        """An atomic read-modify-write of ``array`` at ``index`` ran (its operation's result ``result``)."""

    def materialise(self, value: Data) -> None:
        """A value is kept in a variable (it may be read more than once)."""

    def begin_statement(self) -> None:
        """A new statement starts."""

    def looping(self, s, trips: float | None) -> None:
        """A loop of ``trips`` passes (None: not fixed by constants) ran."""

    def checkpoint(self) -> Any:
        """A mark of what the execution has recorded so far (None: it cannot skip a loop's middle passes)."""
        return None

    def rollback(self, mark: Any) -> None:
        """Forget what was recorded since ``mark``."""

    def arithmetic(self, marks: list[Any]) -> bool:
        """Whether the passes between consecutive marks made the same accesses, each one's addresses moving by the
        same amount from pass to pass at every work-item (so a loop's first and last passes hold its extremes)."""
        return False

    # ---- reporting ----------------------------------------------------------------------------
    def error(self, node, message: str, kind: type[CodeError] = CodeError) -> CodeError:
        line = getattr(getattr(node, "coord", None), "line", None)
        where = f"{self.filename}:{line}" if line else self.filename
        return kind(f"{where}: {message}")

    def note(self, node, message: str) -> None:
        line = getattr(getattr(node, "coord", None), "line", "?")
        text = f"line {line}: {message}"
        if text not in self.notes:
            self.notes.append(text)

    def values_of(self, v) -> np.ndarray | None:
        """Integer values of an index or a datum at the sampled work-items (None where unknown)."""
        if isinstance(v, Data):
            return v.values
        if isinstance(v, (bool, np.bool_)):
            return np.full(self.sample.size, int(v), dtype=np.int64)
        if isinstance(v, (Cond, Pointer)):
            return None
        return ix.values(v, self.sample.ids)

    def int_values(self, operands: list[Any], cop: str | None) -> np.ndarray | None:
        """An integer operation's values at the sampled work-items, where its operands' are known."""
        if cop not in VALUE_OPS or len(operands) != 2:
            return None
        a, b = (self.values_of(v) for v in operands)
        if a is None or b is None:
            return None
        with np.errstate(all="ignore"):
            return np.asarray(VALUE_OPS[cop](a, b), dtype=np.int64)

    # ---- control flow -------------------------------------------------------------------------
    def _frame(self, kind: str) -> _Frame:
        empty = np.zeros(self.sample.size, dtype=bool)
        return _Frame(kind, empty, empty.copy())

    def gone(self) -> tuple[np.ndarray, np.ndarray]:
        """The work-items that may have, and that certainly have, left the running function's current pass."""
        may = np.zeros(self.sample.size, dtype=bool)
        must = may.copy()
        for f in reversed(self.frames):
            may |= f.gone_may
            must |= f.gone_must
            if f.next_may is not None:
                may |= f.next_may
                must |= f.next_must
            if f.kind == "function":
                break
        return may, must

    @property
    def conditional(self) -> bool:
        """Whether the statement being run is conditional on the work-item: under a branch on it, or after some
        work-items returned under one (the rest of the function is then the other arm of that branch)."""
        return bool(self.guards) or next(f for f in reversed(self.frames) if f.kind == "function").exited

    def restore(self, mask: np.ndarray, must: np.ndarray) -> None:
        """Back to a statement that ran under ``mask``/``must``, less the work-items that left since."""
        may_gone, must_gone = self.gone()
        self.mask = mask & ~must_gone
        self.must = must & ~may_gone

    def leave(self, kind: str) -> None:
        """``return`` (kind function), ``break`` (loop) or ``continue`` (next): the running work-items leave."""
        if kind == "function":
            target = next(f for f in reversed(self.frames) if f.kind == "function")
        else:
            target = self.frames[-1]
            if target.kind != "loop":
                raise CodeError(f"{self.filename}: {'break' if kind == 'loop' else 'continue'} outside a loop")
        if kind == "next":
            target.next_may |= self.mask
            target.next_must |= self.must
        else:
            target.gone_may |= self.mask
            target.gone_must |= self.must
        if kind == "function" and self.guards:
            target.exited = True
        self.mask = np.zeros_like(self.mask)
        self.must = np.zeros_like(self.must)

    def narrowed(self, values, body: Callable[[], Any], guard: bool = True):
        """``body()`` with the running work-items narrowed to those where the condition ``values`` holds (an array
        of truth values; or a pair (where it may hold, where it certainly does), :func:`truth`), then back to the
        work-items before, less those that left meanwhile; ``guard`` counts it as a condition on the work-item (a
        branch, not an operand of ``?:`` or ``&&``)."""
        saved, saved_must = self.mask, self.must
        maybe, surely = values if isinstance(values, tuple) else (values, values)
        if maybe is not None:
            self.mask = saved & (np.asarray(maybe) != 0)
        self.must = saved_must & (np.asarray(surely) != 0) if surely is not None else np.zeros_like(saved_must)
        if guard:
            self.guards += 1
        try:
            return body()
        finally:
            if guard:
                self.guards -= 1
            self.restore(saved, saved_must)


def _not(values):
    """The negation of a condition given as :meth:`Executor.narrowed` takes it."""
    if isinstance(values, tuple):
        maybe, surely = values
        return (None if surely is None else ~surely, None if maybe is None else ~maybe)
    return None if values is None else ~(np.asarray(values) != 0)


def truth(cond):
    """A condition's truth for :meth:`Executor.narrowed`: its values where known, else (where it may be true, where
    it certainly is) from its known parts, else None."""
    values = cond.values if isinstance(cond, (Cond, Data)) else None
    if values is not None:
        return np.asarray(values) != 0
    if isinstance(cond, Data) and (cond.maybe is not None or cond.surely is not None):
        return (cond.maybe, cond.surely)
    return None


class Interpreter:
    """Walks a kernel's syntax tree for the sampled work-items, calling its executor for the code's effects."""

    def __init__(self, b: Executor, c_ast, functions: dict):
        self.b, self.c, self.functions = b, c_ast, functions
        self.depth = 0
        self.loops: list[int] = []  # source lines of the loops being run, outermost first

    # ---- declarations -------------------------------------------------------------------------
    def declare_param(self, p, local_params) -> None:
        c = self.c
        if isinstance(p.type, c.PtrDecl):
            elem = _type_name(p.type.type)
            space = "local" if p.name in local_params else "global"
            self.b.arrays[p.name] = Array(p.name, space, elem, width=self.b.widths.get(p.name, 1))
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

    def declare_globals(self, ast) -> None:
        """Program-scope arrays (``__constant float w[17] = {...}``): constant arrays the code may index."""
        c = self.c
        for e in ast.ext:
            if isinstance(e, c.Decl) and isinstance(e.type, c.ArrayDecl) and e.name not in self.b.arrays:
                self.b.arrays[e.name] = Array(e.name, "constant", _type_name(e.type.type),
                                              width=self.b.widths.get(e.name, 1))

    # ---- statements ---------------------------------------------------------------------------
    def block(self, node) -> None:
        for item in node.block_items or []:
            self.stmt(item)

    def stmt(self, s) -> None:
        c = self.c
        self.b.begin_statement()
        self.b.executed += 1
        if self.b.executed > self.b.max_statements:
            where = (f"the loop{'s' if len(self.loops) > 1 else ''} at line{'s' if len(self.loops) > 1 else ''} "
                     f"{', '.join(map(str, self.loops))} unroll" if self.loops else "the kernel unrolls")
            exc = self.b.error(s, f"{where} past {self.b.max_statements} statements for one work-item (a body of "
                                  "that many statements after unrolling: the graph is too large)", TooLarge)
            exc.loops = tuple(self.loops)
            raise exc
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
        elif isinstance(s, (c.FuncCall, c.UnaryOp, c.BinaryOp, c.TernaryOp, c.Cast, c.ID, c.Constant)):
            self.expr(s)
        elif isinstance(s, c.If):
            self.branch(s)
        elif isinstance(s, c.For):
            self.loop(s)
        elif isinstance(s, (c.While, c.DoWhile)):
            self.while_loop(s)
        elif isinstance(s, c.Return):
            self.returning(s)
        elif isinstance(s, c.Break):
            self.b.leave("loop")
        elif isinstance(s, c.Continue):
            self.b.leave("next")
        elif isinstance(s, (c.EmptyStatement, c.Pragma)):
            pass
        elif isinstance(s, c.ExprList):
            for e in s.exprs:
                self.stmt(e)
        else:
            raise self.b.error(s, f"unsupported statement ({type(s).__name__})")

    def returning(self, s) -> None:
        frame = next(f for f in reversed(self.b.frames) if f.kind == "function")
        if s.expr is not None:
            if self.depth == 0:
                raise self.b.error(s, "a kernel returns nothing")
            frame.value.append((self.expr(s.expr), self.b.mask.copy()))
        self.b.leave("function")

    def decl(self, d) -> None:
        c = self.c
        if isinstance(d.type, c.ArrayDecl):
            if d.name in self.b.arrays and self.b.arrays[d.name].space == "local":
                return  # a local array, declared from the source scan
            dims, t = [], d.type
            while isinstance(t, c.ArrayDecl):
                extent = self.expr(t.dim) if t.dim is not None else 1
                dims.append(extent if isinstance(extent, int) else 1)
                t = t.type
            self.b.arrays[d.name] = Array(d.name, "private", _type_name(t), tuple(dims),
                                          width=self.b.widths.get(d.name, 1))
            self.b.env.pop(d.name, None)
            self.private_init(d)
            return
        if isinstance(d.type, c.PtrDecl):
            if d.init is None:
                self.b.env[d.name] = None
                return
            target = self.expr(d.init)
            if not isinstance(target, Pointer):
                raise self.b.error(d, f"pointer variable {d.name!r}: not a pointer into one of the kernel's arrays")
            self.b.env[d.name] = target
            return
        elem = _type_name(d.type)
        if d.init is None:
            self.b.env[d.name] = Data(DTYPE[elem], const=True) if elem in DTYPE else 0
            return
        if isinstance(d.init, c.InitList):
            values = [self.expr(x) for x in d.init.exprs]
            self.b.env[d.name] = Data(DTYPE.get(elem, "int"), const=True) if not values else self.as_variable(
                values[-1] if isinstance(values[-1], Data) else Data(DTYPE.get(elem, "int"), const=True), elem, d)
            return
        self.b.env[d.name] = self.as_variable(self.expr(d.init), elem, d)

    def private_init(self, d) -> None:
        """A private array's initialiser: element values kept in the executor's register file."""
        c = self.c
        store = self.b.env.setdefault(("private", d.name), {})
        if isinstance(d.init, c.InitList):
            for k, x in enumerate(d.init.exprs):
                store[ix.key(k)] = self.expr(x)

    def as_variable(self, value, elem: str, where):
        """A value held in a variable: loads are materialised (a variable is read maybe more than once)."""
        if elem in DTYPE and not isinstance(value, (Data, Pointer)):
            return Data(DTYPE[elem], const=True, varying=ix.thread_dependent(value))
        if isinstance(value, Data):
            self.b.materialise(value)
            return Data(value.dtype, node=value.node, const=value.const, values=value.values, varying=value.varying)
        if isinstance(value, Cond):
            if value.values is None:
                return Data("int", const=True)
            return Data("int", const=True, values=value.values.astype(np.int64))
        return int(value) if isinstance(value, (bool, np.bool_)) else value

    def assign(self, s) -> None:
        c = self.c
        target = s.lvalue
        if isinstance(target, c.StructRef) and not _is_builtin_struct(target, c):
            target = target.name  # a vector's component: the vector as a whole
        value = self.expr(s.rvalue)
        if s.op != "=":
            op = s.op[:-1]
            current = self.expr(target)
            value = self.binary(op, current, value, s)
        if isinstance(target, c.ID):
            old = self.b.env.get(target.name)
            if isinstance(old, Pointer) or isinstance(value, Pointer) or old is None and target.name in self.b.env:
                if not isinstance(value, Pointer):
                    raise self.b.error(s, f"pointer {target.name!r} assigned something that is not a pointer")
                self.b.env[target.name] = value
                return
            elem = "float" if isinstance(old, Data) and old.dtype == "float" else (
                "double" if isinstance(old, Data) and old.dtype == "double" else "int")
            self.set_variable(target.name, self.as_variable(value, elem, s))
        elif isinstance(target, c.ArrayRef) or (isinstance(target, c.UnaryOp) and target.op == "*"):
            array, index = self.place(target)
            if array.space == "private":
                self.private_store(array, index, value)
                return
            if not isinstance(value, Data):
                value = Data(DTYPE.get(array.elem, "int"), const=True, values=self.b.values_of(value))
            self.b.store(array, index, value, s)
        else:
            raise self.b.error(s, "unsupported assignment target")

    def incdec(self, s) -> None:
        c = self.c
        delta = 1 if "++" in s.op else -1
        if not isinstance(s.expr, c.ID):
            self.assign(c.Assignment("+=", s.expr, c.Constant("int", str(delta)), s.coord))
            return
        v = self.b.env.get(s.expr.name)
        if isinstance(v, Data):
            self.set_variable(s.expr.name, self.b.operation("add", [v, delta], s, "+"))
        elif isinstance(v, Pointer):
            self.b.env[s.expr.name] = Pointer(v.array, ix.add(v.offset, delta))
        else:
            self.set_variable(s.expr.name, ix.add(v, delta))

    def set_variable(self, name: str, value) -> None:
        """A variable's new value. In an exact execution, work-items that do not run the assignment keep the old
        value: where some are left out, the two are merged per work-item (as data with their values, where both
        are known; else unknown data)."""
        old = self.b.env.get(name)
        b = self.b
        if not b.exact or old is None or isinstance(value, Pointer) or isinstance(old, Pointer):
            b.env[name] = value
            return
        frame = next(f for f in reversed(b.frames) if f.kind == "function")
        live = b.sample.valid & ~frame.gone_must  # who may read the variable later
        if not (live & ~b.mask).any():
            b.env[name] = value
            return
        new_v, old_v = b.values_of(value), b.values_of(old)
        dtype = value.dtype if isinstance(value, Data) else "int"
        if new_v is not None and old_v is not None:
            b.env[name] = Data(dtype, const=True, values=np.where(b.mask, new_v, old_v).astype(np.int64))
        elif isinstance(value, Data) and value.dtype != "int":
            b.env[name] = value
        else:
            b.env[name] = Data(dtype, const=True)

    def branch(self, s) -> None:
        cond = self.expr(s.cond)
        if isinstance(cond, (Data, Cond)):
            if isinstance(cond, Data):
                self.b.note(s, "branch on loaded data: the graph follows the then-branch" if not self.b.exact
                            else "branch on loaded data")
            else:
                self.b.note(s, "branch on the thread index: the graph follows the work-items that take it "
                               "(the slowest; a barrier or the kernel's end waits for them)")
            self.b.narrowed(truth(cond), lambda: self.stmt(s.iftrue))
            if s.iffalse is not None and self.b.exact:
                self.b.narrowed(_not(truth(cond)), lambda: self.stmt(s.iffalse))
            return
        value = _truth_value(cond)
        if value is None:
            raise self.b.error(s, f"a condition the code's execution cannot decide ({ix.pretty(cond)})")
        chosen = s.iftrue if value else s.iffalse
        if chosen is not None:
            self.stmt(chosen)

    def _looping(self, s, trips: float | None) -> None:
        if not _has_barrier(s.stmt):
            self.b.looping(s, trips)

    def _pass(self, body, step) -> None:
        """One pass of a loop's body, then its step, run by the work-items still in the loop."""
        frame = self.b.frames[-1]
        entry_mask, entry_must = self.b.mask, self.b.must
        frame.next_may = np.zeros_like(entry_mask)
        frame.next_must = np.zeros_like(entry_must)
        self.stmt(body)
        frame.next_may = frame.next_must = None  # the work-items that continued are back for the step
        self.b.restore(entry_mask, entry_must)
        if step is not None:
            self.stmt(step)

    def run_loop(self, s, cond_node, body, step, first_unchecked: bool = False, cap: int | None = None) -> None:
        """A loop run pass by pass: while its condition is the same for every work-item, until it is false; where
        it differs between work-items (exact execution only), each work-item leaves at its own end; ``cap``: at
        most that many passes (:meth:`_cap`)."""
        c = self.c
        var = _loop_var(s, c) if isinstance(s, c.For) else None
        entry_mask, entry_must = self.b.mask, self.b.must
        self.b.frames.append(self.b._frame("loop"))
        trips = 0
        fixed = True
        try:
            while True:
                if cap is not None and trips >= cap:
                    break
                if cond_node is not None and not (first_unchecked and trips == 0):
                    cond = self.expr(cond_node)
                    if isinstance(cond, Data) and self.counted(s) and not self.b.exact:
                        self.unroll_counted(s, body, step)
                        return
                    value = _truth_value(cond)
                    if value is None:
                        held = truth(cond) if isinstance(cond, (Cond, Data)) else _known(self.b.values_of(cond))
                        maybe, surely = held if isinstance(held, tuple) else (held, held)
                        if not self.b.exact and (maybe is None or surely is None or maybe is not surely):
                            self._undecidable(s, cond)  # a graph needs each work-item's own count
                        if maybe is None:  # may hold anywhere: the loop goes on while its known parts allow
                            maybe = np.ones_like(self.b.mask)
                        fixed = False
                        entered = int((entry_mask & self.b.sample.valid).sum())
                        self.b.mask = self.b.mask & maybe
                        self.b.must = self.b.must & surely if surely is not None else np.zeros_like(self.b.must)
                        running = int((self.b.mask & self.b.sample.valid).sum())
                        if not running or (not self.b.exact and 2 * running < entered):
                            # a graph follows the typical work-item: it stops where most have left (the median
                            # count of passes), as a counted loop unrolls its mean
                            break
                    elif not value:
                        break
                elif cond_node is None and trips > self.b.max_statements:
                    raise self.b.error(s, "a loop without a condition")
                self._pass(body, step)
                trips += 1
                if var is not None and isinstance(self.b.env.get(var), Data) and self.b.env[var].values is None:
                    raise self.b.error(s, f"loop variable {var!r} is computed from loaded data")
                if self.b.exact and not (self.b.mask & self.b.sample.valid).any():
                    break
        finally:
            self.b.frames.pop()
            self.b.restore(entry_mask, entry_must)
        self._looping(s, trips if fixed else None)

    def _cap(self, s, passes: int | None, real: float) -> int | None:
        """The passes a loop the caller cut (:attr:`Executor.caps`) runs, its full count ``real`` kept in
        :attr:`Executor.capped`; ``passes`` where it is not cut."""
        line = getattr(s.coord, "line", None)
        if line not in self.b.caps:
            return passes
        self.b.capped.setdefault(line, []).append(real)
        cap = self.b.caps[line]
        return cap if passes is None else min(passes, cap)

    def _undecidable(self, s, cond) -> None:
        if isinstance(cond, Data):
            raise self.b.error(s, "the loop's trip count depends on data read from memory, in a loop the "
                                  "builder cannot count (write it as for (v = a; v < b; v += c), or count "
                                  "it on the device: `gpuprofiler maxplus --count-loops`)")
        what = (", ".join(sorted(str(x) for x in ix.as_sympy(cond).free_symbols))
                if not isinstance(cond, Cond) else "the work-item")
        raise self.b.error(s, f"the loop's trip count is not fixed by constants and the launch's "
                              f"arguments (it depends on {what})")

    @contextmanager
    def _in_loop(self, s):
        """The loop at ``s``'s line is being run (for the statement limit's message)."""
        self.loops.append(getattr(s.coord, "line", 0))
        try:
            yield
        finally:
            self.loops.pop()

    def loop(self, s) -> None:
        with self._in_loop(s):
            self._loop(s)

    def _loop(self, s) -> None:
        c = self.c
        if s.init is not None:
            self.stmt(s.init)
        var = _loop_var(s, c)
        form = _counted_form(s, c, var)
        if form is not None and self.b.exact and self.summarized(s, var, form):
            return
        cap = None
        if form is not None and not self.b.exact:
            op, bound_expr, step = form
            start = self.b.env.get(var)
            bound = self.expr(bound_expr)
            if not (isinstance(start, int) and isinstance(bound, int)):
                self.counted_loop(s, var, start, op, bound, step)
                return
            passes = _trips(np.array([start]), np.array([bound]), op, step)
            if passes is not None:
                cap = self._cap(s, None, float(passes[0]))
        self.run_loop(s, s.cond, s.stmt, s.next, cap=cap)

    def summarized(self, s, var: str, form) -> bool:
        """A long counted loop of an exact execution run as its first passes and its last, where that is exact: a
        fixed trip count, a body without ``break``, ``continue`` or ``return`` whose conditions do not read what it
        changes, the same accesses in every pass at addresses in arithmetic progression, and nothing else changing
        from pass to pass. Else (False) the loop is run in full, from the start."""
        op, bound_expr, step = form
        start, bound = self.b.env.get(var), self.expr(bound_expr)
        if not (isinstance(start, int) and isinstance(bound, int)) or not _plain_body(s.stmt, var, self.c):
            return False
        trips = _trips(np.array([start]), np.array([bound]), op, step)
        if trips is None or int(trips[0]) <= SUMMARY_PASSES + 2 or self.b.checkpoint() is None:
            return False
        total = int(trips[0])
        saved_env = dict(self.b.env)
        entry_mask, entry_must = self.b.mask, self.b.must
        marks, states = [self.b.checkpoint()], []
        local = _declared(s.stmt) | {var}
        self.b.frames.append(self.b._frame("loop"))
        try:
            for _ in range(SUMMARY_PASSES):
                self._pass(s.stmt, s.next)
                marks.append(self.b.checkpoint())
                states.append(_state(self.b.env, local))
            if not (self.b.arithmetic(marks) and all(_same_state(states[0], x) for x in states[1:])
                    and np.array_equal(self.b.mask, entry_mask) and np.array_equal(self.b.must, entry_must)):
                self.b.rollback(marks[0])
                self.b.env = saved_env
                return False
            self.b.env[var] = start + (total - 1) * step
            self._pass(s.stmt, s.next)
        finally:
            self.b.frames.pop()
            self.b.restore(entry_mask, entry_must)
        self.b.note(s, f"loop of {total} passes: its first {SUMMARY_PASSES} and its last followed (its accesses move "
                       "by the same step every pass)")
        self._looping(s, total)
        return True

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
        passes = self._cap(s, passes, float(counts.mean()))
        saved, saved_must = self.b.mask, self.b.must
        self.b.frames.append(self.b._frame("loop"))
        try:
            for k in range(passes):
                self.b.restore(saved & (trips > k), saved_must & (trips > k))
                self._pass(s.stmt, s.next)
        finally:
            self.b.frames.pop()
            self.b.restore(saved, saved_must)

    def counted(self, s) -> bool:
        """Whether the loop profiler counted this loop (its source line)."""
        return getattr(s.coord, "line", None) in self.b.trips

    def unroll_counted(self, s, body, step=None) -> None:
        """A loop the code's execution cannot count, unrolled for the iterations per entry the loop profiler
        counted on the device."""
        per_entry = float(self.b.trips[s.coord.line])
        passes = int(round(per_entry))
        self._looping(s, None)
        self.b.note(s, f"loop counted on the device: {per_entry:.4g} iterations per entry; the graph unrolls {passes}")
        for _ in range(passes):
            self._pass(body, step)

    def while_loop(self, s) -> None:
        with self._in_loop(s):
            self._while_loop(s)

    def _while_loop(self, s) -> None:
        if self.counted(s):
            self.b.frames.append(self.b._frame("loop"))
            try:
                self.unroll_counted(s, s.stmt)
            finally:
                self.b.frames.pop()
            return
        self.run_loop(s, s.cond, s.stmt, None, first_unchecked=isinstance(s, self.c.DoWhile))

    # ---- expressions --------------------------------------------------------------------------
    def expr(self, e):
        c = self.c
        if isinstance(e, c.Constant):
            return _constant(e)
        if isinstance(e, c.ID):
            if e.name in self.b.env:
                value = self.b.env[e.name]
                if value is None:
                    raise self.b.error(e, f"pointer {e.name!r} used before it points anywhere")
                return value
            if e.name in INT_CONSTANTS:
                return INT_CONSTANTS[e.name]
            if e.name in FLOAT_CONSTANTS:
                return Data("double" if not e.name.endswith(("_F", "_H")) and e.name.startswith(("M_", "DBL"))
                            else "float", const=True)
            if e.name in self.b.arrays:
                return Pointer(self.b.arrays[e.name], 0)
            raise self.b.error(e, f"unknown name {e.name!r}")
        if isinstance(e, c.BinaryOp):
            if e.op in ("&&", "||"):
                return self.short_circuit(e)
            return self.binary(e.op, self.expr(e.left), self.expr(e.right), e)
        if isinstance(e, c.UnaryOp):
            return self.unary(e)
        if isinstance(e, c.TernaryOp):
            return self.ternary(e)
        if isinstance(e, c.ArrayRef):
            array, index = self.place(e)
            if array.space == "private":
                return self.private_load(array, index)
            return self.b.load(array, index, e)
        if isinstance(e, c.FuncCall):
            return self.call(e)
        if isinstance(e, c.Cast):
            value = self.expr(e.expr)
            elem = _type_name(e.to_type.type)
            if isinstance(e.to_type.type, c.PtrDecl) and isinstance(value, Pointer):
                return value
            if elem in DTYPE and not isinstance(value, Data):
                return Data(DTYPE[elem], const=True, varying=ix.thread_dependent(value))
            if elem not in DTYPE and isinstance(value, Data) and value.dtype != "int":
                return self.b.operation("cvt", [value], e)  # float to int: an index computed from data
            return value
        if isinstance(e, c.StructRef):
            return self.member(e)
        if isinstance(e, c.ExprList):
            out = None
            for x in e.exprs:
                out = self.expr(x)
            return out
        if isinstance(e, c.Assignment):
            self.assign(e)
            return self.expr(e.lvalue)
        if isinstance(e, c.CompoundLiteral):
            return Data("float", const=True)
        raise self.b.error(e, f"unsupported expression ({type(e).__name__})")

    def short_circuit(self, e):
        """``a && b`` / ``a || b``: ``b`` runs only where C evaluates it (``i < n && x[i] > 0``)."""
        left = self.expr(e.left)
        lv = _truth_value(left)
        if lv is not None:
            if lv is (e.op == "||"):
                return lv
            return self._truth(self.expr(e.right))
        lt = truth(left) if isinstance(left, (Cond, Data)) else _known(self.b.values_of(left))
        take = lt if e.op == "&&" else _not(lt)
        right = self.b.narrowed(take, lambda: self.expr(e.right), guard=False)
        if not (isinstance(left, Data) or isinstance(right, Data)):
            return self.logic(e.op, left, right)
        out = self.b.operation(BINOPS[e.op], [_as_data(left), _as_data(right)], e, e.op)
        if out.values is None:
            rt = truth(right) if isinstance(right, (Cond, Data)) else _known(self.b.values_of(right))
            out.maybe, out.surely = _combine(e.op, lt, rt, self.b.sample.size)
        return out

    def _truth(self, v):
        """A value used as a condition (a number is compared with 0)."""
        if isinstance(v, (Cond, Data, bool)) or _truth_value(v) is not None:
            return v
        return self.compare("!=", v, 0)

    def ternary(self, e):
        cond = self.expr(e.cond)
        value = _truth_value(cond)
        if value is not None:
            return self.expr(e.iftrue if value else e.iffalse)
        values = cond.values if isinstance(cond, (Cond, Data)) else self.b.values_of(cond)
        held = truth(cond) if isinstance(cond, (Cond, Data)) else _known(values)
        a = self.b.narrowed(held, lambda: self.expr(e.iftrue), guard=False)
        b = self.b.narrowed(_not(held), lambda: self.expr(e.iffalse), guard=False)
        if isinstance(cond, Data) and not self.b.exact:
            return self.b.operation("select", [cond, a, b], e)
        if not self.b.exact:
            self.b.note(e, "condition on the thread index: the graph follows the true value")
            return a
        picked = _select(values, a, b, self.b)
        if picked is not None:
            return picked
        datas = [x for x in (cond, a, b) if isinstance(x, Data)]
        return self.b.operation("select", datas, e) if datas else Data("int", const=True)

    def binary(self, op: str, left, right, where):
        if isinstance(left, Pointer) or isinstance(right, Pointer):
            return self.pointer_arith(op, left, right, where)
        left, right = _as_data(left), _as_data(right)
        if isinstance(left, Data) or isinstance(right, Data):
            return self.b.operation(BINOPS.get(op, "add"), [left, right], where, op)
        if op in ("&&", "||"):
            return self.logic(op, left, right)
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
            if op in ("<<", ">>") and isinstance(right, int) and 0 <= right < 63:
                if isinstance(left, int):
                    return left << right if op == "<<" else left >> right
                return ix.mul(left, 1 << right) if op == "<<" else ix.floordiv(left, 1 << right)
            if op in ("<", ">", "<=", ">=", "==", "!="):
                return self.compare(op, left, right)
            if op in ("&", "|", "^"):
                if isinstance(left, int) and isinstance(right, int):
                    return {"&": left & right, "|": left | right, "^": left ^ right}[op]
                return self.bitwise(op, left, right)
            if op in ("<<", ">>"):
                return ix._from_sympy(BITWISE[op](ix.as_sympy(left), ix.as_sympy(right)))
        except (TypeError, ZeroDivisionError):
            pass
        raise self.b.error(where, f"unsupported index arithmetic {op!r}")

    def bitwise(self, op: str, left, right):
        """``&``, ``|``, ``^`` on an index: exact forms where the mask is a power of two less one (``i & 15`` is
        ``i % 16`` for a non-negative index), else the operation as a function numpy evaluates per work-item."""
        if op == "&" and isinstance(right, int) and right > 0 and right & (right + 1) == 0 and _nonnegative(left):
            return ix.sub(left, ix.mul(ix.floordiv(left, right + 1), right + 1))
        if op == "&" and isinstance(left, int) and left > 0 and left & (left + 1) == 0 and _nonnegative(right):
            return self.bitwise(op, right, left)
        return ix._from_sympy(BITWISE[op](ix.as_sympy(left), ix.as_sympy(right)))

    def pointer_arith(self, op: str, left, right, where):
        if op == "+" and isinstance(left, Pointer) and not isinstance(right, (Pointer, Data, Cond)):
            return Pointer(left.array, ix.add(left.offset, right))
        if op == "+" and isinstance(right, Pointer) and not isinstance(left, (Pointer, Data, Cond)):
            return Pointer(right.array, ix.add(right.offset, left))
        if op == "-" and isinstance(left, Pointer) and not isinstance(right, (Pointer, Data, Cond)):
            return Pointer(left.array, ix.sub(left.offset, right))
        if op == "-" and isinstance(left, Pointer) and isinstance(right, Pointer) and left.array is right.array:
            return ix.sub(left.offset, right.offset)
        if isinstance(left, Pointer) and isinstance(right, Data) and op in ("+", "-"):
            return Pointer(left.array, right if op == "+" else self.b.operation("neg", [right], where))
        raise self.b.error(where, f"unsupported pointer arithmetic {op!r}")

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
        c = self.c
        if op in ("p++", "++", "p--", "--"):
            before = self.expr(e.expr) if op.startswith("p") else None
            self.incdec(e)
            return before if before is not None else self.expr(e.expr)
        if op == "&":
            if isinstance(e.expr, c.ArrayRef) or (isinstance(e.expr, c.UnaryOp) and e.expr.op == "*"):
                array, index = self.place(e.expr)
                return Pointer(array, index)
            if isinstance(e.expr, c.ID) and e.expr.name in self.b.arrays:
                return Pointer(self.b.arrays[e.expr.name], 0)
            return self.expr(e.expr)  # the address of a scalar (a helper's out-parameter): its value
        if op == "*":
            array, index = self.place(e)
            if array.space == "private":
                return self.private_load(array, index)
            return self.b.load(array, index, e)
        if op == "sizeof":
            return 4
        v = self.expr(e.expr)
        if op == "-":
            return self.b.operation("neg", [v], e) if isinstance(v, Data) else ix.neg(v)
        if op == "+":
            return v
        if op == "!":
            if isinstance(v, Data):
                return self.b.operation("cmp", [v, 0], e, "==")
            truth = _truth_value(v)
            if truth is not None:
                return not truth
            values = _cond_values(v, self.b) if isinstance(v, Cond) else self.b.values_of(v)
            return Cond(None if values is None else ~(np.asarray(values) != 0))
        if op == "~":
            if isinstance(v, Data):
                return self.b.operation("xor", [v, -1], e, "^")
            if isinstance(v, int):
                return ~v
            return ix.sub(ix.neg(v), 1)
        raise self.b.error(e, f"unsupported operator {op!r}")

    def place(self, e):
        """The array and the element index an lvalue or a subscript denotes (``a[i][j]``, ``p[k]``, ``*p``)."""
        c = self.c
        if isinstance(e, c.UnaryOp) and e.op == "*":
            target = self.expr(e.expr)
            if not isinstance(target, Pointer):
                raise self.b.error(e, "only pointers into the kernel's arrays can be dereferenced")
            return target.array, target.offset
        indices = []
        node = e
        while isinstance(node, c.ArrayRef):
            indices.append(self.expr(node.subscript))
            node = node.name
        indices.reverse()
        if any(isinstance(i, (Cond, Pointer)) for i in indices):
            raise self.b.error(e, "a condition or a pointer used as an index")
        if isinstance(node, c.ID) and isinstance(self.b.env.get(node.name), Pointer) and len(indices) == 1:
            p = self.b.env[node.name]
            return p.array, self._offset(p.offset, indices[0], e)
        if not isinstance(node, c.ID) or node.name not in self.b.arrays:
            base = self.expr(node) if not isinstance(node, c.ID) else None
            if isinstance(base, Pointer) and len(indices) == 1:
                return base.array, self._offset(base.offset, indices[0], e)
            raise self.b.error(e, "only the kernel's arrays can be indexed")
        array = self.b.arrays[node.name]
        if len(indices) == 1:
            return array, indices[0]
        if any(isinstance(i, Data) for i in indices):
            return array, next(i for i in indices if isinstance(i, Data))
        dims = self.b.local_arrays.get(node.name, (None, ()))[1] or array.dims
        if len(dims) != len(indices):
            raise self.b.error(e, f"{node.name!r} has {len(dims)} dimensions, indexed with {len(indices)}")
        flat = 0
        for k, idx in enumerate(indices):
            extent = int(np.prod(dims[k + 1:])) if k + 1 < len(dims) else 1
            flat = ix.add(flat, ix.mul(idx, extent))
        return array, flat

    def _offset(self, base, index, where):
        if isinstance(index, Data) or isinstance(base, Data):
            if isinstance(base, int) and base == 0:
                return index
            return self.b.operation("add", [base, index], where, "+")
        return ix.add(base, index)

    def private_store(self, array: Array, index, value) -> None:
        regs = self.b.env.setdefault(("private", array.name), {})
        key = ix.key(index) if not isinstance(index, Data) else None
        if key is None:
            regs.clear()  # a store at an unknown element: what each element holds is no longer known
            regs[None] = value
        else:
            regs[key] = value

    def private_load(self, array: Array, index):
        regs = self.b.env.get(("private", array.name), {})
        key = ix.key(index) if not isinstance(index, Data) else None
        got = regs.get(key, regs.get(None))
        if got is None:
            return Data(DTYPE.get(array.elem, "int"), const=True)
        return got

    def member(self, e):
        c = self.c
        if _is_builtin_struct(e, c):
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
            raise self.b.error(e, f"unsupported member access {base}.{e.field.name}")
        name = e.field.name
        if e.type == "." and (set(name) <= set("xyzw") or name in SWIZZLE or name.startswith("s")):
            value = self.expr(e.name)
            if isinstance(value, Data):
                # a component of a vector: the same data (loaded together); its integer values are not known apart
                return value if value.values is None else Data(value.dtype, node=value.node, pending=value.pending,
                                                               const=value.const, deps=value.deps)
            return value
        raise self.b.error(e, "unsupported member access (structs are not modelled)")

    def call(self, e):
        c = self.c
        name = e.name.name if isinstance(e.name, c.ID) else None
        args = e.args.exprs if e.args is not None else []
        if name in ("get_global_id", "get_local_id", "get_group_id", "get_local_size", "get_global_size",
                    "get_num_groups", "get_global_offset", "get_work_dim"):
            if name == "get_work_dim":
                return sum(1 for g in (self.b.global_size or [1])[:3] if g > 1) or 1
            d = self.expr(args[0])
            if not isinstance(d, int) or not 0 <= d <= 2:
                raise self.b.error(e, f"{name} needs a constant dimension 0, 1 or 2")
            size = self.b.local_size[d]
            if name == "get_global_offset":
                return 0
            if name == "get_global_id":
                return ix.add(ix.mul(Affine.thread(3 + d), size), Affine.thread(d))
            if name in ("get_global_size", "get_num_groups"):
                if not self.b.global_size:
                    raise self.b.error(e, f"{name} needs the launch's global size")
                groups = -(-self.b.global_size[d] // size)
                if name == "get_global_size":
                    return self.b.global_size[d] if not self.b.local_given else groups * size
                return groups
            return {"get_local_id": Affine.thread(d), "get_group_id": Affine.thread(3 + d),
                    "get_local_size": size}[name]
        if name in BARRIERS:
            self.b.barrier()
            return 0
        if name in ATOMIC or (name and name.startswith(("atomic_", "atom_"))):
            return self.atomic(e, name, args)
        if name and (name.startswith("vload") or name.startswith("vstore")):
            return self.vector_memory(e, name, args)
        if name in self.functions:
            return self.inline(e, name, args)
        values = [self.expr(a) for a in args]
        if name in OUT_PARAMETER and len(args) > OUT_PARAMETER[name]:
            return self.with_output(e, name, args, values)
        if name in MATH or (name and name.startswith(("convert_", "as_", "native_", "half_"))):
            op = MATH.get(name, "fabs")
            if not any(isinstance(v, Data) for v in values):
                if name in ("min", "max") and len(values) == 2 and all(isinstance(v, int) for v in values):
                    return min(values) if name == "min" else max(values)
                if name in ("min", "max") and all(not isinstance(v, (Cond, Pointer)) for v in values):
                    return ix._from_sympy((sympy.Min if name == "min" else sympy.Max)(
                        *[ix.as_sympy(v) for v in values]))
                if name == "clamp" and len(values) == 3 and all(not isinstance(v, (Cond, Pointer)) for v in values):
                    x, lo, hi = (ix.as_sympy(v) for v in values)
                    return ix._from_sympy(sympy.Min(sympy.Max(x, lo), hi))
                if name == "abs" and len(values) == 1 and not isinstance(values[0], (Cond, Pointer)):
                    return ix._from_sympy(sympy.Abs(ix.as_sympy(values[0])))
                if name.startswith(("convert_int", "convert_uint", "as_int", "as_uint")) and len(values) == 1 \
                        and not isinstance(values[0], (Cond, Pointer)):
                    return values[0]
                if name == "popcount":
                    return Data("int", const=True)
                varying = any(ix.thread_dependent(v) for v in values)
                if varying and not name.startswith(("convert_", "as_")):  # math on the work-item's index
                    return self.b.operation(op, [Data("float", const=True, varying=True)], e)
                return Data("float", const=True, varying=varying)
            cop = name if name in ("min", "max") and len(values) == 2 else None
            result = self.b.operation(op, values, e, cop)
            if name.startswith(("convert_int", "convert_uint", "as_int", "as_uint")) and result.dtype != "int":
                result = Data("int", node=result.node, pending=result.pending, const=result.const, deps=result.deps)
            return result
        raise self.b.error(e, f"unsupported function {name!r}")

    def with_output(self, e, name: str, args, values):
        """A builtin that also writes through a pointer argument (``sincos(x, &c)``, ``fract``, ``modf``): the
        operation's result, stored at that pointer too (a private variable, or an array element)."""
        k = OUT_PARAMETER[name]
        inputs = [v for i, v in enumerate(values) if i != k]
        result = self.b.operation(MATH.get(name, "sin"), [v for v in inputs if isinstance(v, Data)] or [1.0], e) \
            if any(isinstance(v, Data) for v in inputs) else Data("float", const=True)
        target = args[k]
        c = self.c
        if isinstance(target, c.UnaryOp) and target.op == "&" and isinstance(target.expr, c.ID) \
                and target.expr.name in self.b.env:
            self.b.env[target.expr.name] = self.as_variable(result, "float", e)
        else:
            ptr = values[k]
            if not isinstance(ptr, Pointer):
                raise self.b.error(e, f"{name}: its output is not a variable or one of the kernel's arrays")
            if ptr.array.space == "private":
                self.private_store(ptr.array, ptr.offset, result)
            else:
                self.b.store(ptr.array, ptr.offset, result, e)
        return result

    def atomic(self, e, name: str, args):
        """An atomic read-modify-write at a pointer: a load, the operation, a store; its value is the old one."""
        target = self.expr(args[0])
        if not isinstance(target, Pointer):
            raise self.b.error(e, f"{name} on something that is not one of the kernel's arrays")
        operands = [self.expr(a) for a in args[1:]]
        old = self.b.load(target.array, target.offset, e)
        new = self.b.operation("atomic", [old] + [v for v in operands if isinstance(v, Data)]
                               + ([1] if not operands else []), e)
        self.b.store(target.array, target.offset, new, e)
        self.b.atomic_at(target.array, target.offset, new)
        return Data(old.dtype, node=old.node, pending=old.pending, const=old.const, deps=old.deps)

    def vector_memory(self, e, name: str, args):
        """``vloadN(k, p)`` reads and ``vstoreN(v, k, p)`` writes elements N*k .. N*k + N - 1 past ``p``."""
        digits = "".join(ch for ch in name if ch.isdigit())
        width = int(digits) if digits else 1
        if name.startswith("vstore"):
            value, k, ptr = (self.expr(a) for a in args[:3])
        else:
            k, ptr = (self.expr(a) for a in args[:2])
            value = None
        if not isinstance(ptr, Pointer):
            raise self.b.error(e, f"{name} on something that is not one of the kernel's arrays")
        if isinstance(k, (Cond, Pointer)):
            raise self.b.error(e, f"{name}: a condition or a pointer as the offset")
        step = self.b.operation("mul", [k, width], e, "*") if isinstance(k, Data) else ix.mul(k, width)
        first = self._offset(ptr.offset, step, e)
        if value is None:
            return self.b.load(ptr.array, first, e, span=width)
        if not isinstance(value, Data):
            value = Data(DTYPE.get(ptr.array.elem, "int"), const=True)
        self.b.store(ptr.array, first, value, e, span=width)
        return 0

    def inline(self, e, name: str, args):
        """A call to a helper function of the source: its body run for the calling work-items, its parameters
        bound to the arguments (arrays and pointers by reference); its value is what it returns."""
        c = self.c
        fn = self.functions[name]
        if self.depth > 16:
            raise self.b.error(e, f"call to {name!r}: helper functions nested more than 16 deep")
        params = fn.decl.type.args.params if fn.decl.type.args else []
        params = [p for p in params if getattr(p, "name", None)]
        if len(params) != len(args):
            raise self.b.error(e, f"call to {name!r} with {len(args)} arguments, it takes {len(params)}")
        values = [self.expr(a) for a in args]
        saved_env = self.b.env
        env = {k: v for k, v in saved_env.items() if not isinstance(k, str)}
        for p, v in zip(params, values):
            if isinstance(p.type, c.PtrDecl) and not isinstance(v, Pointer):
                v = Pointer(v.array, 0) if isinstance(v, Array) else v
            env[p.name] = v
        entry_mask, entry_must = self.b.mask, self.b.must
        self.b.env = env
        self.b.frames.append(self.b._frame("function"))
        self.depth += 1
        try:
            self.block(fn.body)
            frame = self.b.frames[-1]
        finally:
            self.depth -= 1
            self.b.frames.pop()
            self.b.env = saved_env
            self.b.restore(entry_mask, entry_must)
        if not frame.value:
            return Data("float", const=True)
        if len(frame.value) == 1:
            return frame.value[0][0]
        out = frame.value[-1][0]
        for value, where in reversed(frame.value[:-1]):
            picked = _select(where, value, out, self.b)
            out = picked if picked is not None else (self.b.operation("select", [x for x in (value, out)
                                                                                  if isinstance(x, Data)], e)
                                                     if isinstance(value, Data) or isinstance(out, Data) else value)
        return out


def _known(values):
    return None if values is None else np.asarray(values) != 0


def _combine(op: str, a, b, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Where ``a && b`` (``a || b``) may be true and where it certainly is, from its operands' truth."""
    def bounds(t):
        if t is None:
            return np.ones(n, bool), np.zeros(n, bool)
        if isinstance(t, tuple):
            return (np.ones(n, bool) if t[0] is None else t[0]), (np.zeros(n, bool) if t[1] is None else t[1])
        return t, t

    (am, as_), (bm, bs) = bounds(a), bounds(b)
    return (am & bm, as_ & bs) if op == "&&" else (am | bm, as_ | bs)


SUMMARY_PASSES = 3  # passes of a long loop followed before its last (an exact execution)


def _names(node) -> set[str]:
    out = set()
    if type(node).__name__ == "ID":
        out.add(node.name)
    for _, child in node.children():
        out |= _names(child)
    return out


def _assigned(node) -> set[str]:
    """Names a statement assigns (``=``, ``op=``, ``++``/``--``, declarations)."""
    out = set()
    kind = type(node).__name__
    if kind == "Assignment" and type(node.lvalue).__name__ == "ID":
        out.add(node.lvalue.name)
    elif kind == "UnaryOp" and node.op in ("p++", "++", "p--", "--") and type(node.expr).__name__ == "ID":
        out.add(node.expr.name)
    elif kind == "Decl" and node.name:
        out.add(node.name)
    for _, child in node.children():
        out |= _assigned(child)
    return out


def _plain_body(body, var: str, c) -> bool:
    """Whether a loop body has no ``break``, ``continue``, ``return`` or ``goto``, and no condition that reads the
    loop variable or a name the body changes (a nested loop may read its own variable)."""
    changed = _assigned(body) | {var}

    def ok(node) -> bool:
        if isinstance(node, (c.Break, c.Continue, c.Return, c.Goto, c.Switch)):
            return False
        if isinstance(node, (c.If, c.TernaryOp, c.While, c.DoWhile)) and _names(node.cond) & changed:
            return False
        if isinstance(node, c.For):
            own = _loop_var(node, c)
            reads = (_names(node.cond) if node.cond is not None else set()) | (
                _names(node.init) if node.init is not None else set())
            if reads & (changed - {own}):
                return False
        if isinstance(node, c.BinaryOp) and node.op in ("&&", "||") and _names(node) & changed:
            return False
        return all(ok(child) for _, child in node.children())

    return ok(body)


def _declared(node) -> set[str]:
    """Names declared inside a statement (they start afresh every pass of a loop whose body it is)."""
    out = {node.name} if type(node).__name__ == "Decl" and node.name else set()
    for _, child in node.children():
        out |= _declared(child)
    return out


def _state(env: dict, skip: set[str]) -> dict:
    """What of a work-item's state could move an address: every variable but those in ``skip`` (the loop variable,
    the body's own) and floating-point data."""
    return {k: v for k, v in env.items() if k not in skip and not (isinstance(v, Data) and v.dtype != "int")}


def _same_state(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if isinstance(x, Data) or isinstance(y, Data):
            if not (isinstance(x, Data) and isinstance(y, Data)):
                return False
            if (x.values is None) != (y.values is None) or (
                    x.values is not None and not np.array_equal(x.values, y.values)):
                return False
        elif isinstance(x, Pointer) or isinstance(y, Pointer):
            if not (isinstance(x, Pointer) and isinstance(y, Pointer) and x.array is y.array
                    and ix.key(x.offset) == ix.key(y.offset)):
                return False
        elif isinstance(x, dict) or isinstance(y, dict):
            if x is not y:
                return False
        elif x is None or y is None or isinstance(x, (int, Affine)) or isinstance(y, (int, Affine)):
            if x is None or y is None or ix.key(x) != ix.key(y):
                return False
        elif x != y:
            return False
    return True


def _as_data(v):
    """A condition as integer data (its 0/1 values where known)."""
    if isinstance(v, Cond):
        return Data("int", const=True, values=None if v.values is None else v.values.astype(np.int64))
    return v


def _nonnegative(v) -> bool:
    """Whether an index is non-negative for every work-item (its coefficients and constant are)."""
    if isinstance(v, int):
        return v >= 0
    if isinstance(v, Affine):
        return v.const >= 0 and all(k >= 0 for k in v.coef)
    return False


def _is_builtin_struct(e, c) -> bool:
    return (isinstance(e, c.StructRef) and isinstance(e.name, c.ID)
            and e.name.name in ("threadIdx", "blockIdx", "blockDim", "gridDim") and e.field.name in ("x", "y", "z"))


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
          and nxt.op in ("+=", "-=")):
        k = _constant_int(nxt.rvalue, c)
        step = (k if nxt.op == "+=" else -k) if isinstance(k, int) else None
    if not step:
        return None
    return op, right, step


def _constant_int(e, c) -> int | None:
    """An integer constant expression's value (``16 * 16`` after the preprocessor), else None."""
    if isinstance(e, c.Constant):
        v = _constant(e)
        return v if isinstance(v, int) else None
    if isinstance(e, c.UnaryOp) and e.op in ("-", "+"):
        v = _constant_int(e.expr, c)
        return None if v is None else (-v if e.op == "-" else v)
    if isinstance(e, c.BinaryOp) and e.op in ("+", "-", "*", "<<"):
        a, b = _constant_int(e.left, c), _constant_int(e.right, c)
        if a is None or b is None or (e.op == "<<" and not 0 <= b < 63):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if e.op == "<<" else 0}[e.op]
    return None


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
    if isinstance(v, (Cond, Data, Affine, Pointer)):
        return None  # differs between work-items (even where the sampled ones agree)
    if v is sympy.true or v is sympy.false:
        return bool(v)
    if isinstance(v, sympy.Basic) and v.is_number:
        return bool(v != 0)
    return None


def _select(which: np.ndarray | None, a, b, executor: Executor) -> Data | None:
    """``cond ? a : b`` at each followed work-item, for indices (or integer data known there): their values as
    data, without a node; None where a value is unknown."""
    if which is None or any(isinstance(v, Data) and not v.const for v in (a, b)):
        return None
    av, bv = executor.values_of(a), executor.values_of(b)
    if av is None or bv is None:
        return None
    return Data("int", const=True, values=np.where(np.asarray(which) != 0, av, bv).astype(np.int64))


def _cond_values(v, b: Executor) -> np.ndarray | None:
    if isinstance(v, Cond):
        return v.values
    truth = _truth_value(v)
    if truth is not None:
        return np.full(b.sample.size, truth, dtype=bool)
    values = b.values_of(v)
    return None if values is None else np.asarray(values) != 0


def _sympy_compare(op, a, b):
    fn = {"<": sympy.Lt, ">": sympy.Gt, "<=": sympy.Le, ">=": sympy.Ge, "==": sympy.Eq, "!=": sympy.Ne}[op]
    return fn(a, b)


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


def kernel_function(parsed, kernel_name: str, filename: str):
    """The kernel's definition in a parsed source (a CodeError naming the kernels found where it is missing)."""
    funcs = {e.decl.name: e for e in parsed.ast.ext if type(e).__name__ == "FuncDef"}
    if kernel_name not in funcs:
        raise CodeError(f"{filename}: no kernel named {kernel_name!r} (found: {', '.join(funcs) or 'none'})")
    return funcs[kernel_name]


def launch_shape(global_size, local_size) -> tuple[list[int] | None, list[int], list[str]]:
    """The launch's global size (three dimensions), its work-group size, and a note where the launch gives none
    (then 256 work-items along dimension 0, as drivers often pick)."""
    glob = [int(x) for x in (list(global_size) + [1, 1, 1])[:3]] if global_size else None
    notes = []
    if not local_size and glob:
        local_size = [min(256, glob[0])]
        notes.append(f"no work-group size given: modelled as {local_size[0]} work-items (as drivers often pick)")
    return glob, [int(x) for x in list(local_size or [1]) + [1, 1, 1]][:3], notes


def run_kernel(executor: Executor, parsed, kernel_name: str) -> Executor:
    """Execute the kernel's body with ``executor``: its parameters, local and program-scope arrays declared."""
    fn = kernel_function(parsed, kernel_name, executor.filename)
    interp = Interpreter(executor, c_ast, functions(parsed))
    for p in (fn.decl.type.args.params if fn.decl.type.args else []):
        interp.declare_param(p, parsed.local_params)
    for name, (elem, dims) in executor.local_arrays.items():
        executor.arrays[name] = Array(name, "local", elem, tuple(dims), width=executor.widths.get(name, 1))
    interp.declare_globals(parsed.ast)
    interp.block(fn.body)
    return executor


def local_extents(parsed, filename: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The local arrays of a parsed source with their extents as numbers."""
    return {name: (elem, tuple(extent(d, filename) for d in dims)) for name, (elem, dims) in parsed.local_arrays.items()}
