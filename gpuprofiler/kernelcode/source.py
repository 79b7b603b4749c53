"""A kernel's source as a C syntax tree: preprocessed (pcpp), its OpenCL and CUDA qualifiers stripped, parsed
(pycparser), with what the stripping loses kept beside the tree: the local-memory arrays and pointer parameters,
and the vector width of every name declared with a vector type (``float4 *a``, ``int2 p``)."""

from __future__ import annotations

import ast as pyast
import io
import os
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pcpp
from pycparser import c_ast, c_parser
from pycparser.c_parser import ParseError

from gpuprofiler.errors import UserError
from gpuprofiler.textfile import confined, read_text


class CodeError(UserError):
    """A kernel whose code cannot be followed, naming the line and the construct."""


class TooLarge(CodeError):
    """A kernel whose execution passes the statement limit at this size (and, its loops running longer, at larger
    ones); ``loops``: the source lines of the loops it was in, outermost first."""

    loops: tuple[int, ...] = ()


ELEM_BYTES = {"float": 4, "double": 8, "half": 2, "int": 4, "uint": 4, "unsigned": 4, "long": 8, "ulong": 8,
              "short": 2, "ushort": 2, "char": 1, "uchar": 1, "size_t": 8, "bool": 1}
DTYPE = {"float": "float", "half": "float", "double": "double"}
SCALAR_TYPES = "float|double|half|int|uint|char|uchar|short|ushort|long|ulong"
PRELUDE = ("typedef int uint; typedef int ulong; typedef int ushort; typedef int uchar; typedef int size_t; "
           "typedef float half; typedef int bool;\n")
QUALIFIERS = re.compile(r'extern\s+"C"|\b(__kernel|kernel(?=\s+void)|__global__|__device__|__host__|__forceinline__|'
                        r'__global|global(?=\s+\w)|__constant|constant(?=\s+\w)|__local|local(?=\s+\w)|__shared__|'
                        r'__private|private(?=\s+\w)|__restrict__|__restrict|restrict|__read_only|__write_only|'
                        r'__launch_bounds__\s*\([^)]*\))\b')
ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")
LOCAL_DECL = re.compile(r"\b(?:__local|local|__shared__)\s+(?:volatile\s+)?(\w+)\s+(\w+)\s*((?:\[[^\]]+\])+)")
LOCAL_PARAM = re.compile(r"\b(?:__local|local)\s+(?:const\s+)?(?:volatile\s+)?(\w+)\s*\*\s*(\w+)")
VECTOR = re.compile(rf"\b({SCALAR_TYPES})(2|3|4|8|16)\b")
VECTOR_DECL = re.compile(rf"\b(?:{SCALAR_TYPES})(2|3|4|8|16)\b\s*(?:const\s+)?(\**)\s*(?:const\s+)?"
                         r"(?:__restrict__\s+|__restrict\s+|restrict\s+)?(\w+)")


@dataclass(frozen=True)
class Parsed:
    """A parsed kernel source: the syntax tree, local arrays (name -> element type and extents' text), local pointer
    parameters, and the vector width of names declared with a vector type."""

    ast: Any
    local_arrays: dict[str, tuple[str, tuple[str, ...]]]
    local_params: frozenset[str]
    widths: dict[str, int]


INCLUDED_BYTES = 16 << 20  # the files a source includes, all of them together (a spec's source limit)
INCLUDE_DEPTH = 64  # #include nesting (C asks compilers for 15 at least)


class _Confined(pcpp.Preprocessor):
    """pcpp whose ``#include`` reads only regular text files inside the including source's folder tree, the builtin
    kernels' or a folder named in ``$GPUPROFILER_SOURCE_DIRS`` (:func:`~gpuprofiler.textfile.confined`), nested at
    most :data:`INCLUDE_DEPTH` deep and :data:`INCLUDED_BYTES` in all: a spec is data that may come from anyone,
    and this runs before the kernel is compiled. A refused include is a UserError, not a kernel the models cannot
    follow."""

    def __init__(self, home: Path):
        super().__init__()
        self.home = home
        self.left = INCLUDED_BYTES

    def on_file_open(self, is_system_include, includepath):
        if not os.path.lexists(includepath):
            raise OSError(f"no {includepath}")  # pcpp tries its next search folder, then says it is not found
        if len(self.temp_path) > INCLUDE_DEPTH:
            raise UserError(f"#include {includepath}: included more than {INCLUDE_DEPTH} deep (a file that includes "
                            "itself?)")
        real = confined(includepath, self.home, f"#include {includepath}")
        text = read_text(real, "included file", self.left)
        self.left -= len(text.encode())
        return io.StringIO(text)


PREPROCESS_S = 10.0  # the preprocessor's time on one source: a macro that doubles 15 times takes about 1 s
PREPROCESS_BYTES = 2 << 30  # and the memory it may add


def _rss() -> int | None:
    """This process's resident memory in bytes (Linux), or None."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def _bounded(filename: str):
    """Stop what runs inside past :data:`PREPROCESS_S` seconds or :data:`PREPROCESS_BYTES` of added memory (a macro
    that expands without end), checked ten times a second from a timer signal: the main thread of a process, on a
    system with ``setitimer``; elsewhere unbounded (a worker process's own limits apply there)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    start, base = time.monotonic(), _rss()

    def check(signum, frame):
        if time.monotonic() - start > PREPROCESS_S:
            raise UserError(f"{filename}: the preprocessor ran past {PREPROCESS_S:g} s (a macro that expands "
                            "without end?)")
        now = _rss()
        if base is not None and now is not None and now - base > PREPROCESS_BYTES:
            raise UserError(f"{filename}: the preprocessor took more than {PREPROCESS_BYTES >> 30} GiB (a macro that "
                            "expands without end?)")

    previous = signal.signal(signal.SIGALRM, check)
    timer = signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if timer[0] > 0:  # a timer the process had set (a test runner's): given back, less the time spent here
            signal.setitimer(signal.ITIMER_REAL, max(timer[0] - (time.monotonic() - start), 1e-3), timer[1])


def preprocess(text: str, filename: str, defines: dict[str, Any]) -> str:
    """``text`` (the source ``filename``) through the C preprocessor with ``defines``; its includes confined
    (:class:`_Confined`), its time and memory bounded (:func:`_bounded`)."""
    pp = _Confined(Path(filename).parent)
    pp.line_directive = "#line"
    for k, v in defines.items():
        pp.define(f"{k} {v}")
    try:
        with _bounded(filename):
            pp.parse(text, filename)
            out = io.StringIO()
            pp.write(out)
    except RecursionError:
        raise UserError(f"{filename}: includes or macros nested too deep to follow") from None
    if pp.return_code:
        raise CodeError(f"{filename}: the preprocessor failed")
    return out.getvalue()


def parse(source: str, filename: str, defines: dict[str, Any] | None = None) -> Parsed:
    """Preprocess and parse a kernel source. Parsed once per source, file name and defines (a program's launches of
    one kernel share it; nothing mutates it)."""
    return _parse(source, filename, tuple(sorted((str(k), str(v)) for k, v in (defines or {}).items())))


@lru_cache(maxsize=64)
def _parse(source: str, filename: str, defines: tuple[tuple[str, str], ...]) -> Parsed:
    text = preprocess(source, filename, dict(defines))
    local_arrays = {}
    for elem, name, dims in LOCAL_DECL.findall(text):
        local_arrays[name] = (VECTOR.sub(r"\1", elem),
                              tuple(d.strip() for d in re.findall(r"\[([^\]]+)\]", dims)))
    local_params = frozenset(name for _, name in LOCAL_PARAM.findall(text))
    widths = {name: int(width) for width, _, name in VECTOR_DECL.findall(text)}
    clean = QUALIFIERS.sub(lambda m: " " * len(m.group(0)), ATTRIBUTE.sub(" ", text))
    clean = VECTOR.sub(r"\1", clean)
    try:
        tree = c_parser.CParser().parse(PRELUDE + clean, filename)
    except ParseError as exc:
        raise CodeError(f"cannot parse the kernel source: {exc}") from None
    return Parsed(tree, local_arrays, local_params, widths)


def functions(parsed: Parsed) -> dict[str, Any]:
    """The source's function definitions by name."""
    return {e.decl.name: e for e in parsed.ast.ext if isinstance(e, c_ast.FuncDef)}


def parameter_names(source: str, kernel_name: str, filename: str = "kernel",
                    defines: dict[str, Any] | None = None) -> list[str]:
    """The kernel's parameter names, in order (to bind a launch's positional arguments)."""
    fn = functions(parse(source, filename, defines)).get(kernel_name)
    if fn is None:
        raise CodeError(f"{filename}: no kernel named {kernel_name!r}")
    return [p.name for p in (fn.decl.type.args.params if fn.decl.type.args else [])]


_INT_OPS = {pyast.Add: lambda a, b: a + b, pyast.Sub: lambda a, b: a - b, pyast.Mult: lambda a, b: a * b,
            pyast.FloorDiv: lambda a, b: a // b, pyast.Mod: lambda a, b: a % b,
            pyast.LShift: lambda a, b: a << b, pyast.RShift: lambda a, b: a >> b,
            pyast.BitAnd: lambda a, b: a & b, pyast.BitOr: lambda a, b: a | b, pyast.BitXor: lambda a, b: a ^ b}


def extent(text: str, filename: str) -> int:
    """A local array's extent after preprocessing (``16 + 1``, ``(256 / 2)``): C integer arithmetic on constants."""
    expr = re.sub(r"(?<=\d)[uUlL]+\b", "", text).replace("/", "//")
    try:
        tree = pyast.parse(expr, mode="eval")

        def value(node) -> int:
            if isinstance(node, pyast.Expression):
                return value(node.body)
            if isinstance(node, pyast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
                return node.value
            if isinstance(node, pyast.UnaryOp) and isinstance(node.op, (pyast.USub, pyast.UAdd)):
                v = value(node.operand)
                return -v if isinstance(node.op, pyast.USub) else v
            if isinstance(node, pyast.BinOp) and type(node.op) in _INT_OPS:
                left, right = value(node.left), value(node.right)
                if isinstance(node.op, (pyast.LShift, pyast.Mult)) and abs(left) > 1 << 40:
                    raise ValueError("too large")
                return _INT_OPS[type(node.op)](left, right)
            raise ValueError("not an integer constant expression")

        n = value(tree)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, MemoryError):
        raise CodeError(f"{filename}: local array extent {text!r} is not an integer constant") from None
    if not 0 < n <= 1 << 30:
        raise CodeError(f"{filename}: local array extent {text!r} = {n} is not a positive size")
    return n
