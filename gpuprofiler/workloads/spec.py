"""Kernel specs: a declarative TOML file that says how to build, launch, size and check one kernel.

The format is documented in the README ("Bring your own kernel"). Every
expression goes through :mod:`gpuprofiler.workloads.safe_eval`. Errors name the field.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.textfile import confined, read_text
from gpuprofiler.workloads import sparse
from gpuprofiler.workloads.safe_eval import MAX_INT, evaluate, evaluate_int, parse

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64")
INITS = ("random", "zeros", "range", "value", "matrix")
BACKEND_KINDS = ("opencl", "cuda")
_SUFFIX_KIND = {".cl": "opencl", ".cu": "cuda"}

_TOP_KEYS = {"name", "description", "kernel", "size", "small", "target", "source", "params", "defines",
             "args", "launch", "work", "check", "size_multiple", "matrix"}
_ARG_KEYS = {"name", "dtype", "shape", "init", "value", "low", "high", "start", "step", "output", "part"}
_MATRIX_KEYS = {"source", "rows", "slice", "waste"}
_LAUNCH_KEYS = {"global", "local"}
_CHECK_KEYS = {"got", "expect", "rtol", "atol"}
MAX_SPEC_BYTES = 1 << 20  # a spec file is a page of TOML: a larger file is refused before it is parsed
MAX_SOURCE_BYTES = 16 << 20  # a kernel's source file
# a C identifier: what a define's name, a kernel's name and an argument's name must be (ASCII only: the name
# reaches the compiler, and `-D` followed by anything else would be a compiler option)
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_c_identifier(name: Any) -> bool:
    return isinstance(name, str) and C_IDENTIFIER.fullmatch(name) is not None and len(name) <= 255


@dataclass
class ArgSpec:
    name: str
    dtype: np.dtype
    shape: list[Any] | None  # None: a scalar
    init: str = "random"
    value: Any = None
    low: Any = None
    high: Any = None
    start: Any = 0
    step: Any = 1
    output: bool = False
    where: str = ""
    part: str | None = None  # init = "matrix": which array of the spec's sparse matrix (sparse.PARTS)

    @property
    def is_scalar(self) -> bool:
        return self.shape is None


@dataclass
class CheckSpec:
    got: str
    expect: str
    rtol: float = 1e-5
    atol: float | None = None
    where: str = ""


@dataclass
class KernelSpec:
    """A parsed, validated spec file."""

    path: Path
    name: str
    kernel: str
    size: str
    sources: dict[str, Path]
    args: list[ArgSpec]
    global_size: list[Any]
    local_size: list[Any] | None
    description: str = ""
    small: list[int] = field(default_factory=list)
    target: list[int] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    defines: dict[str, Any] = field(default_factory=dict)
    flops: Any = None
    bytes: Any = None
    checks: list[CheckSpec] = field(default_factory=list)
    size_multiple: int = 1  # the size must be a multiple of this (a tiled kernel without bounds checks)
    # [matrix]: the sparse matrix the "matrix" arguments take: {"source": family or .mtx file, "rows": expression
    # (default: the size), "slice": the SELL slice height's expression, or None without SELL parts}
    matrix: dict[str, Any] | None = None

    def with_matrix(self, source: str) -> "KernelSpec":
        """The same spec on another matrix (a family's name or a Matrix Market file)."""
        if self.matrix is None:
            raise UserError(f"{self.path}: spec {self.name!r} has no [matrix] table: a matrix cannot be chosen")
        sparse.check_source(source, "--matrix")
        return replace(self, matrix={**self.matrix, "source": source})

    def source_for(self, kind: str) -> Path:
        if kind not in self.sources:
            have = ", ".join(self.sources) or "none"
            raise UserError(f"{self.path}: spec {self.name!r} has no {kind} source (it has: {have})")
        return self.sources[kind]

    def valid_size(self, n: float) -> int:
        """The size the kernel takes nearest below ``n`` (a multiple of ``size_multiple``, at least one)."""
        return max(self.size_multiple, self.size_multiple * (int(n) // self.size_multiple))

    def instantiate(self, size: int, overrides: dict[str, Any] | None = None) -> "SpecInstance":
        """Evaluate every expression at ``size`` and return the concrete launch."""
        if isinstance(size, float) and size.is_integer() and abs(size) <= MAX_INT:
            size = int(size)
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 0 < int(size) <= MAX_INT:
            raise UserError(f"{self.path}: {self.size}={size!r}: a size must be a whole number from 1 to 2^63")
        if int(size) % self.size_multiple:
            raise UserError(f"{self.path}: {self.size}={size} is not a multiple of size_multiple = {self.size_multiple}")
        names: dict[str, Any] = {self.size: int(size)}
        for key, value in (overrides or {}).items():
            names[key] = value
        for key, expr in self.params.items():
            if key not in (overrides or {}):
                names[key] = evaluate(expr, names, f"{self.path}: params.{key}")
        parts = self._matrix_parts(names, size)
        defines = {k: evaluate(v, names, f"{self.path}: defines.{k}") for k, v in self.defines.items()}
        names.update({k: v for k, v in defines.items() if k not in names})
        glob = [evaluate_int(g, names, f"{self.path}: launch.global[{i}]") for i, g in enumerate(self.global_size)]
        local = None
        if self.local_size is not None:
            local = [evaluate_int(g, names, f"{self.path}: launch.local[{i}]") for i, g in enumerate(self.local_size)]
        if any(g <= 0 for g in glob) or (local and any(v <= 0 for v in local)):
            raise UserError(f"{self.path}: launch sizes must be positive at {self.size}={size}: global {glob}, local {local}")
        if math.prod(glob) > MAX_INT:
            raise UserError(f"{self.path}: launch.global: {glob} is more than 2^63 work-items at {self.size}={size}")
        shapes = {}
        for arg in self.args:
            if arg.is_scalar:
                continue
            if arg.init == "matrix":
                shapes[arg.name] = tuple(parts[arg.part].shape)
                continue
            shape = tuple(evaluate_int(s, names, f"{arg.where}.shape") for s in arg.shape)
            if any(s < 0 for s in shape):
                raise UserError(f"{arg.where}.shape: negative extent {shape} at {self.size}={size}")
            # numpy multiplies the extents out (a zero among them included) and make_args draws in 8-byte elements
            # before casting: that product must fit numpy's sizes
            if math.prod(s for s in shape if s) * max(arg.dtype.itemsize, 8) >= MAX_INT:
                raise UserError(f"{arg.where}.shape: {shape} is more than 2^63 bytes at {self.size}={size}")
            shapes[arg.name] = shape
        scalars = {}
        for arg in self.args:
            for key in ("value", "low", "high", "start", "step"):
                expr = getattr(arg, key)
                if expr is not None and (key == "value" or arg.init in ("random", "range")):
                    value = evaluate(expr, names, f"{arg.where}.{key}")
                    if key == "value" and (arg.is_scalar or arg.init == "value"):
                        checked = _scalar(value, arg, f"{arg.where}.value")  # an array's every element must fit too
                        if arg.is_scalar:
                            scalars[arg.name] = checked
                    elif key in ("low", "high") and arg.init == "random" and arg.dtype.kind in "iu":
                        _fits_integers(value, arg, key)
        work = {}
        for key in ("flops", "bytes"):
            expr = getattr(self, key)
            work[key] = None if expr is None else evaluate(expr, names, f"{self.path}: work.{key}")
        return SpecInstance(self, int(size), names, defines, glob, local, shapes, work["flops"], work["bytes"], scalars,
                            parts)

    def _matrix_parts(self, names: dict[str, Any], size: int) -> dict[str, Any]:
        """The [matrix] table at this size: its figures added to ``names`` (``matrix_rows``, ``matrix_nnz``, ...),
        its arrays returned by part name (empty without a [matrix] table)."""
        if self.matrix is None:
            return {}
        where = f"{self.path}: matrix"
        rows = evaluate_int(self.matrix.get("rows", self.size), names, f"{where}.rows")
        S = None
        if self.matrix.get("slice") is not None:
            S = evaluate_int(self.matrix["slice"], names, f"{where}.slice")
            if S < 1:
                raise UserError(f"{where}.slice: the slice height must be at least 1, got {S}")
        waste = 0.0
        if self.matrix.get("waste") is not None:
            waste = float(evaluate(self.matrix["waste"], names, f"{where}.waste"))
            if not 0 <= waste <= 1:
                raise UserError(f"{where}.waste: the padding a slice may hold is a fraction from 0 to 1, got {waste}")
        wanted = tuple(a.part for a in self.args if a.init == "matrix")
        names.update(sparse.names(self.matrix["source"], rows, S, wanted, waste))
        return sparse.parts(self.matrix["source"], rows, S, wanted, waste)


@dataclass
class SpecInstance:
    """A spec evaluated at one size: concrete shapes, launch sizes and work counts."""

    spec: KernelSpec
    size: int
    names: dict[str, Any]
    defines: dict[str, Any]
    global_size: list[int]
    local_size: list[int] | None
    shapes: dict[str, tuple[int, ...]]
    flops: float | None
    bytes: float | None
    scalars: dict[str, Any]
    matrix_parts: dict[str, Any] = field(default_factory=dict)

    def make_args(self, rng: np.random.Generator) -> dict[str, Any]:
        """Host values of every argument: numpy scalars and initialised arrays."""
        values: dict[str, Any] = {}
        for arg in self.spec.args:
            if arg.is_scalar:
                values[arg.name] = self.scalars[arg.name]
                continue
            shape = self.shapes[arg.name]
            count = int(np.prod(shape))
            if arg.init == "matrix":
                data = np.array(self.matrix_parts[arg.part], dtype=arg.dtype)
            elif arg.init == "zeros":
                data = np.zeros(shape, arg.dtype)
            elif arg.init == "value":
                data = np.full(shape, evaluate(arg.value, self.names, f"{arg.where}.value"), dtype=arg.dtype)
            elif arg.init == "range":
                start = evaluate(arg.start, self.names, f"{arg.where}.start")
                step = evaluate(arg.step, self.names, f"{arg.where}.step")
                data = (start + step * np.arange(count, dtype=np.float64 if arg.dtype.kind == "f" else np.int64))
                data = data.astype(arg.dtype).reshape(shape)
            else:
                low = 0 if arg.low is None else evaluate(arg.low, self.names, f"{arg.where}.low")
                if arg.dtype.kind == "f":
                    high = 1 if arg.high is None else evaluate(arg.high, self.names, f"{arg.where}.high")
                    # drawn in the array's own precision (float32 draws for float16): no float64 temporary
                    draw = np.float64 if arg.dtype == np.float64 else np.float32
                    data = rng.random(size=shape, dtype=draw)
                    if (low, high) != (0, 1):
                        data *= draw(high - low)
                        data += draw(low)
                    data = data.astype(arg.dtype, copy=False)
                else:
                    if arg.high is None:
                        raise UserError(f"{arg.where}.high: random integers need `high` (exclusive upper bound)")
                    high = evaluate_int(arg.high, self.names, f"{arg.where}.high")
                    if high <= low:
                        raise UserError(f"{arg.where}: high ({high}) must exceed low ({low})")
                    info = np.iinfo(arg.dtype) if arg.dtype.kind in "iu" else None
                    if info is not None and info.min <= int(low) and high - 1 <= info.max:
                        # drawn in the array's own type: 268M int32 columns in 1.4 s, not 13.5 through int64
                        data = rng.integers(int(low), high, size=shape, dtype=arg.dtype)
                    else:
                        data = rng.integers(int(low), high, size=shape).astype(arg.dtype)
            values[arg.name] = data
        return values

    def elements(self, name: str):
        """The initial values of array ``name`` as a function of flat element indices, without building the
        array: exact for ``range``, ``value`` and ``zeros``; for ``random`` a deterministic draw from the same
        distribution (the same statistics, not the numbers ``make_args`` draws). Indices past the end give the
        last element's value."""
        arg = next(a for a in self.spec.args if a.name == name)
        count = int(np.prod(self.shapes[name]))
        integer = arg.dtype.kind in "iu"

        def clip(idx):
            return np.clip(np.asarray(idx, dtype=np.int64), 0, max(count - 1, 0))

        if arg.init == "matrix":
            data = np.asarray(self.matrix_parts[arg.part]).astype(arg.dtype, copy=False)
            return lambda idx: data[clip(idx)] if count else np.zeros(np.shape(idx), arg.dtype)
        if arg.init == "zeros":
            return lambda idx: np.zeros(np.shape(idx), arg.dtype)
        if arg.init == "value":
            v = evaluate(arg.value, self.names, f"{arg.where}.value")
            return lambda idx: np.full(np.shape(idx), v, dtype=arg.dtype)
        if arg.init == "range":
            start = evaluate(arg.start, self.names, f"{arg.where}.start")
            step = evaluate(arg.step, self.names, f"{arg.where}.step")
            return lambda idx: (start + step * clip(idx)).astype(arg.dtype)
        low = 0 if arg.low is None else evaluate(arg.low, self.names, f"{arg.where}.low")
        if integer:
            high = evaluate_int(arg.high, self.names, f"{arg.where}.high")
        else:
            high = 1 if arg.high is None else evaluate(arg.high, self.names, f"{arg.where}.high")
        salt = np.uint64(sum(ord(c) * 131 ** k for k, c in enumerate(name)) % (1 << 61))

        def draw(idx):
            u = _uniform(clip(idx).astype(np.uint64) ^ salt)
            if integer:
                return (low + np.floor(u * (high - low))).astype(arg.dtype)
            return (low + u * (high - low)).astype(arg.dtype)
        return draw

    @property
    def array_bytes(self) -> int:
        return sum(math.prod(s) * a.dtype.itemsize for a in self.spec.args if not a.is_scalar
                   for s in [self.shapes[a.name]])


def _uniform(x: np.ndarray) -> np.ndarray:
    """Uniform numbers in [0, 1) from 64-bit integers (SplitMix64's finaliser): a counter-based generator."""
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _scalar(value: Any, arg: ArgSpec, where: str) -> Any:
    """``value`` as the argument's numpy scalar type; it must fit (an int32 size of 2**31, or 1e39 as a float32,
    is refused)."""
    if arg.dtype.kind in "iu":
        info = np.iinfo(arg.dtype)
        if value != int(value) or not info.min <= value <= info.max:
            raise UserError(f"{where}: {value} does not fit in {arg.dtype.name}")
        value = int(value)
    elif abs(value) > float(np.finfo(arg.dtype).max):
        raise UserError(f"{where}: {value} does not fit in {arg.dtype.name} (its largest value is "
                        f"{float(np.finfo(arg.dtype).max):g})")
    return arg.dtype.type(value)


def _fits_integers(value: Any, arg: ArgSpec, key: str) -> None:
    """Bounds of random integers must lie in the dtype's range (``high`` is exclusive: up to max + 1)."""
    info = np.iinfo(arg.dtype)
    top = info.max + (1 if key == "high" else 0)
    if not info.min <= value <= top:
        raise UserError(f"{arg.where}.{key}: {value} is outside the range of {arg.dtype.name} ({info.min} .. {top})")


def _type_name(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _require(table: dict, key: str, where: str, types, what: str):
    if key not in table:
        raise UserError(f"{where}.{key}: missing ({what})")
    value = table[key]
    if not isinstance(value, types) or isinstance(value, bool):
        raise UserError(f"{where}.{key}: expected {what}, got {_type_name(value)} {_shown(value)}")
    return value


def _optional(table: dict, key: str, where: str, types, what: str, default: Any) -> Any:
    if key not in table:
        return default
    return _require(table, key, where, types, what)


def _expression(value: Any, where: str) -> Any:
    """An expression field's raw value (a number or a string), its syntax and size checked now."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserError(f"{where}: expected a number or an expression string, got {_type_name(value)} {_shown(value)}")
    parse(value, where)
    return value


def _expr_list(value: Any, where: str) -> list[Any]:
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > 3:
        raise UserError(f"{where}: expected 1 to 3 sizes, got {_shown(value)}")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, float, str)):
            raise UserError(f"{where}: expected a number or an expression, got {_type_name(item)} {_shown(item)}")
    out = []
    for item in items:
        if isinstance(item, str) and "," in item:
            out += [p.strip() for p in item.split(",")]
        else:
            out.append(item)
    if len(out) > 3:
        raise UserError(f"{where}: expected 1 to 3 sizes, got {_shown(value)}")
    for i, item in enumerate(out):
        parse(item, f"{where}[{i}]")
    return out


def _sizes(value: Any, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_INT
                                              for v in value):
        raise UserError(f"{where}: expected a list of positive integers up to 2^63, got {_shown(value)}")
    return list(value)


def _table(raw: dict, key: str, where: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"{where}.{key}: expected a table, got {_type_name(value)} {_shown(value)}")
    return value


def _parse_arg(raw: Any, index: int, where: str) -> ArgSpec:
    w = f"{where}: args[{index}]"
    if not isinstance(raw, dict):
        raise UserError(f"{w}: expected a table ([[args]]), got {_type_name(raw)} {_shown(raw)}")
    unknown = set(raw) - _ARG_KEYS
    if unknown:
        raise UserError(f"{w}: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                        f"(allowed: {', '.join(sorted(_ARG_KEYS))})")
    name = _require(raw, "name", w, str, "the argument's name")
    if not is_c_identifier(name):
        raise UserError(f"{w}.name: {_shown(name)} is not a valid name (letters, digits and _, not first a digit)")
    w = f"{where}: args[{index}] ({name})"
    dtype_name = _require(raw, "dtype", w, str, "a dtype name")
    if dtype_name not in DTYPES:
        raise UserError(f"{w}.dtype: unknown dtype {_shown(dtype_name)} (use one of: {', '.join(DTYPES)})")
    output = raw.get("output", False)
    if not isinstance(output, bool):
        raise UserError(f"{w}.output: expected true or false, got {_shown(output)}")
    exprs = {key: _expression(raw.get(key), f"{w}.{key}") for key in ("value", "low", "high", "start", "step")}
    if raw.get("init") == "matrix" or "part" in raw:
        return _matrix_arg(raw, name, dtype_name, output, w)
    if "shape" not in raw:
        if "value" not in raw:
            raise UserError(f"{w}: a scalar argument needs `value`; an array needs `shape`")
        if output:
            raise UserError(f"{w}.output: a scalar argument cannot be an output")
        return ArgSpec(name, np.dtype(dtype_name), None, init="value", value=exprs["value"], where=w)
    shape = _expr_list(raw["shape"], f"{w}.shape")
    init = raw.get("init", "zeros" if output else "random")
    if not isinstance(init, str) or init not in INITS:
        raise UserError(f"{w}.init: unknown init {_shown(init)} (use one of: {', '.join(INITS)})")
    if init == "value" and "value" not in raw:
        raise UserError(f"{w}.value: init = \"value\" needs `value`")
    return ArgSpec(name, np.dtype(dtype_name), shape, init, exprs["value"], exprs["low"], exprs["high"],
                   0 if exprs["start"] is None else exprs["start"], 1 if exprs["step"] is None else exprs["step"],
                   output, w)


def _matrix_arg(raw: dict, name: str, dtype_name: str, output: bool, w: str) -> ArgSpec:
    """An argument that takes one array of the spec's [matrix] (its shape is the array's own)."""
    if raw.get("init") != "matrix":
        raise UserError(f"{w}.part: only an argument with init = \"matrix\" takes a part of the matrix")
    part = raw.get("part")
    if part not in sparse.PARTS:
        raise UserError(f"{w}.part: expected one of {', '.join(sparse.PARTS)}, got {_shown(part)}")
    extra = set(raw) - {"name", "dtype", "init", "part"}
    if extra:
        raise UserError(f"{w}: {', '.join(sorted(extra))} not allowed with init = \"matrix\" (the matrix sets the "
                        "array's shape and values)")
    want = np.dtype(sparse.PART_DTYPES[part])
    if np.dtype(dtype_name) != want:
        raise UserError(f"{w}.dtype: the matrix's {part} is {want.name}, not {dtype_name}")
    return ArgSpec(name, want, ["0"], "matrix", output=output, where=w, part=part)


def _parse_matrix(raw: dict, where: str) -> dict[str, Any] | None:
    if "matrix" not in raw:
        return None
    table = _table(raw, "matrix", where)
    unknown = set(table) - _MATRIX_KEYS
    if unknown:
        raise UserError(f"{where}.matrix: unknown field(s) {', '.join(sorted(map(str, unknown)))} "
                        f"(allowed: {', '.join(sorted(_MATRIX_KEYS))})")
    source = _require(table, "source", f"{where}.matrix", str, "a matrix family or a Matrix Market file")
    if sparse.is_file_source(source):  # a Matrix Market file, relative to the spec's folder
        source = str(Path(where).parent / source)
    sparse.check_source(source, f"{where}.matrix.source")
    out: dict[str, Any] = {"source": source}
    for key in ("rows", "slice", "waste"):
        if key in table:
            out[key] = _expression(table[key], f"{where}.matrix.{key}")
    return out


def _parse_toml(path: Path) -> dict:
    """The spec file's TOML: every error tomllib can raise becomes a UserError with the line (and column)."""
    text = read_text(path, "spec", MAX_SPEC_BYTES, hint="" if path.suffix else " (a spec file ends in .toml)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    except (RecursionError, MemoryError):
        raise UserError(f"{path}: not valid TOML: tables or arrays nested too deeply") from None
    except ValueError as exc:  # raised by a value's own conversion (an integer of more than 4300 digits)
        raise UserError(f"{path}: not valid TOML: {exc}{_failing_line(text)}") from None


def _failing_line(text: str) -> str:
    """" (at line L)" for the line where tomllib's own conversion of a value fails (what it reports without a
    line): the shortest prefix of the file that fails the same way ends there (found by bisection, a few parses)."""
    lines = text.splitlines(keepends=True)

    def fails(i: int) -> bool:
        try:
            tomllib.loads("".join(lines[:i]))
        except tomllib.TOMLDecodeError:
            return False  # a prefix cut inside a value: not this error
        except (ValueError, RecursionError, MemoryError):
            return True
        return False

    if not lines or not fails(len(lines)):
        return ""
    lo, hi = 1, len(lines)
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return f" (at line {lo})"


def load_spec(path: str | Path) -> KernelSpec:
    """Read and validate a spec file; any problem raises UserError naming the file and field."""
    path = Path(path)
    raw = _parse_toml(path)
    where = str(path)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise UserError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(_TOP_KEYS))})")
    kernel = _require(raw, "kernel", where, str, "the kernel function's name")
    if not is_c_identifier(kernel):
        raise UserError(f"{where}.kernel: {_shown(kernel)} is not a kernel function's name (a C identifier)")
    name = _optional(raw, "name", where, str, "the spec's name", path.stem)
    description = _optional(raw, "description", where, str, "a description", "")
    size = raw.get("size", "n")
    if not is_c_identifier(size):
        raise UserError(f"{where}.size: expected the size parameter's name, got {_shown(size)}")

    source = _require(raw, "source", where, (str, dict), "a source path or a table {opencl = ..., cuda = ...}")
    sources: dict[str, Path] = {}
    if isinstance(source, str):
        kind = _SUFFIX_KIND.get(Path(source).suffix) if "\0" not in source else None
        if kind is None:
            raise UserError(f"{where}.source: {_shown(source)} must end in .cl (OpenCL) or .cu (CUDA)")
        sources[kind] = path.parent / source
    else:
        for kind, rel in source.items():
            if kind not in BACKEND_KINDS or not isinstance(rel, str) or "\0" in rel:
                raise UserError(f"{where}.source.{kind}: expected opencl = \"file.cl\" and/or cuda = \"file.cu\"")
            sources[kind] = path.parent / rel
    for kind, src in sources.items():
        try:
            found = src.is_file()
        except OSError as exc:  # a name too long for the file system
            raise UserError(f"{where}.source.{kind}: cannot read {_shown(str(src))}: {exc.strerror or exc}") from None
        if not found:
            raise UserError(f"{where}.source.{kind}: " + (f"{src} is not a regular file" if src.exists() else
                                                            f"file not found: {src}"))
        confined(src, path.parent, f"{where}.source.{kind}")  # the spec's folder, the builtin kernels' or the user's
        read_text(src, "kernel source", MAX_SOURCE_BYTES)  # text (UTF-8) of a sane size, or refused now, by line

    args_raw = _require(raw, "args", where, list, "a list of [[args]] tables")
    args = [_parse_arg(a, i, where) for i, a in enumerate(args_raw)]
    seen = set()
    for a in args:
        if a.name in seen:
            raise UserError(f"{a.where}.name: duplicate argument name {a.name!r}")
        seen.add(a.name)

    launch = _require(raw, "launch", where, dict, "a [launch] table with global and local")
    if set(launch) - _LAUNCH_KEYS:
        raise UserError(f"{where}.launch: unknown field(s) {', '.join(sorted(set(launch) - _LAUNCH_KEYS))} "
                        "(allowed: global, local)")
    glob = _expr_list(_require(launch, "global", f"{where}.launch", (list, str, int), "global sizes"), f"{where}.launch.global")
    local = None
    if "local" in launch:
        local = _expr_list(launch["local"], f"{where}.launch.local")
        if len(local) != len(glob):
            raise UserError(f"{where}.launch.local: {len(local)} dimensions but launch.global has {len(glob)}")

    params = _table(raw, "params", where)
    defines = _table(raw, "defines", where)
    work = _table(raw, "work", where)
    for key, value in params.items():
        if not is_c_identifier(key):
            raise UserError(f"{where}.params: {_shown(key)} is not a valid name (letters, digits and _)")
        _expression(value, f"{where}.params.{key}")
    for key, value in defines.items():
        if not is_c_identifier(key):
            raise UserError(f"{where}.defines: {_shown(key)} is not a C identifier (letters, digits and _, not first "
                            "a digit): a define becomes -DNAME=VALUE and nothing else may reach the compiler")
        _expression(value, f"{where}.defines.{key}")
    if set(work) - {"flops", "bytes"}:
        raise UserError(f"{where}.work: only flops and bytes are allowed")
    for key, value in work.items():
        _expression(value, f"{where}.work.{key}")

    checks = []
    check_raw = raw.get("check", [])
    if not isinstance(check_raw, list):
        raise UserError(f"{where}.check: expected a list of [[check]] tables, got {_type_name(check_raw)} {_shown(check_raw)}")
    for i, c in enumerate(check_raw):
        w = f"{where}: check[{i}]"
        if not isinstance(c, dict):
            raise UserError(f"{w}: expected a table ([[check]]), got {_type_name(c)} {_shown(c)}")
        if set(c) - _CHECK_KEYS:
            raise UserError(f"{w}: unknown field(s) {', '.join(sorted(set(c) - _CHECK_KEYS))} "
                            f"(allowed: {', '.join(sorted(_CHECK_KEYS))})")
        got = _require(c, "got", w, str, "an expression over the outputs")
        expect = _require(c, "expect", w, str, "an expression over the inputs")
        tolerances = {}
        for key, default in (("rtol", 1e-5), ("atol", None)):
            value = c.get(key, default)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise UserError(f"{w}.{key}: expected a finite number >= 0, got {_shown(value)}")
            tolerances[key] = None if value is None else float(value)
        for key, text in (("got", got), ("expect", expect)):
            parse(text, f"{w}.{key}")
        checks.append(CheckSpec(got, expect, tolerances["rtol"], tolerances["atol"], w))

    multiple = raw.get("size_multiple", 1)
    if isinstance(multiple, bool) or not isinstance(multiple, int) or not 1 <= multiple <= 2**20:
        raise UserError(f"{where}.size_multiple: expected a whole number from 1 to 2^20, got {_shown(multiple)}")
    spec = KernelSpec(path=path, name=name, kernel=kernel, size=size, sources=sources, args=args,
                      global_size=glob, local_size=local, description=description,
                      small=_sizes(raw.get("small", []), f"{where}.small"),
                      target=_sizes(raw.get("target", []), f"{where}.target"),
                      params=dict(params), defines=dict(defines), flops=work.get("flops"), bytes=work.get("bytes"),
                      checks=checks, size_multiple=multiple, matrix=_parse_matrix(raw, where))
    matrix_args = [a for a in args if a.init == "matrix"]
    if matrix_args and spec.matrix is None:
        raise UserError(f"{matrix_args[0].where}: init = \"matrix\" needs the spec's [matrix] table")
    sell_args = [a for a in matrix_args if a.part in sparse.SELL_PARTS + sparse.PAIR_PARTS + sparse.VAR_PARTS]
    if sell_args and spec.matrix.get("slice") is None:
        raise UserError(f"{sell_args[0].where}: the SELL part {sell_args[0].part} needs matrix.slice (the slice height)")
    for key in ("small", "target"):
        off = [n for n in getattr(spec, key) if n % multiple]
        if off:
            raise UserError(f"{where}.{key}: {_shown(off)} not multiples of size_multiple = {multiple}")
    # Evaluate once at a small size so that bad expressions are reported now, not mid-sweep.
    probe = (spec.small or spec.target or [16])[0]
    spec.instantiate(probe)
    return spec
