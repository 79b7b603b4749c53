"""Kernels generated from loop nests with loopy (Klöckner's code generator on the isl polyhedral library).

A nest file (Python, like an app) describes the untransformed nest in loopy's own terms and the transformations
to search:

    NAME = "gemm"                                  # the kernel's name
    SIZE = "n"                                     # the size parameter (a loopy value argument)
    DOMAIN = "{[i,j,k]: 0<=i,j,k<n}"               # the iteration domain (isl)
    INSTRUCTIONS = "c[i,j] = sum(k, a[i,k]*b[k,j])"
    ARGS = {"a": ("float32", ("n", "n")), "b": ("float32", ("n", "n")),
            "c": ("float32", ("n", "n"), "output")}
    PARAMS = {"TI": [8, 16], "TJ": [8, 16], "PREFETCH": [0, 1]}   # the tunable transformation parameters
    DEFAULTS = {"TI": 16, "TJ": 16, "PREFETCH": 1}
    GLOBAL = ["ceil(n / TJ) * TJ", "ceil(n / TI) * TI"]   # the launch, as spec expressions of the parameters
    LOCAL = ["TJ", "TI"]
    CHECKS = [("c", "matmul(a, b)")]               # the spec's numpy reference (its check language)
    SMALL = [...]; TARGET = [...]; WORK = {"flops": "2*n**3", "bytes": "12*n*n"}

    def transform(knl, TI, TJ, PREFETCH):          # loopy calls: split_iname, add_prefetch, tag_inames, ...
        ...
        return knl

``generate`` makes one OpenCL kernel per configuration of PARAMS (loopy's code), writes them into one source file
under ``#if VARIANT == k`` and a spec whose ``[params]`` are PARAMS (``VARIANT`` derived from them), so that
``gpuprofiler tune`` searches the transformations like any parameters; it checks that loopy's launch grid for each
configuration is the spec's, and runs every configuration on the device against the untransformed nest, which
loopy itself runs on the same device (one work-item through the whole nest), on the same inputs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gpuprofiler.errors import GpuProfilerError, UserError
from gpuprofiler.workloads.apps import line_in, load_module
from gpuprofiler.workloads.safe_eval import evaluate_int
from gpuprofiler.workloads.spec import DTYPES, is_c_identifier, load_spec

REQUIRED = ("NAME", "DOMAIN", "INSTRUCTIONS", "ARGS", "PARAMS", "GLOBAL", "LOCAL", "transform")
MAX_VARIANTS = 256
INSTALL = "pip install 'gpuprofiler[generate]' (loopy and islpy)"


def loopy():
    """loopy, imported when a nest is generated (an optional dependency)."""
    try:
        import loopy as lp
    except ImportError as exc:
        raise UserError(f"generate needs loopy: {INSTALL} ({exc})") from None
    return lp


@dataclass
class Nest:
    """A loaded nest file."""

    path: Path
    module: ModuleType
    name: str
    size: str
    params: dict[str, list[int]]
    defaults: dict[str, int]
    small: list[int] = field(default_factory=list)
    target: list[int] = field(default_factory=list)

    def configs(self) -> list[dict[str, int]]:
        return [dict(zip(self.params, v)) for v in itertools.product(*self.params.values())]

    def call(self, what: str, fn, *args, **kwargs):
        """Call into the nest file; its own errors become a UserError naming the file and line."""
        try:
            return fn(*args, **kwargs)
        except GpuProfilerError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code (and loopy on it) can raise anything
            raise UserError(f"{self.path}: {what}{line_in(exc, self.path)}: {type(exc).__name__}: "
                            f"{str(exc)[:400]}") from None


def load_nest(path: str | Path) -> Nest:
    path, module = load_module(path, "nest")
    missing = [k for k in REQUIRED if not hasattr(module, k)]
    if missing:
        raise UserError(f"{path}: a nest file must define {', '.join(missing)} (see `gpuprofiler generate --help`)")
    name, size = getattr(module, "NAME"), getattr(module, "SIZE", "n")
    if not (is_c_identifier(name) and is_c_identifier(size)):
        raise UserError(f"{path}: NAME and SIZE must be C identifiers, got {name!r}, {size!r}")
    params = getattr(module, "PARAMS")
    if not isinstance(params, dict) or not params or not all(
            is_c_identifier(k) and isinstance(v, (list, tuple)) and v
            and all(isinstance(x, int) and not isinstance(x, bool) for x in v) for k, v in params.items()):
        raise UserError(f"{path}: PARAMS must map parameter names to non-empty lists of integers")
    params = {k: list(v) for k, v in params.items()}
    if "VARIANT" in params or size in params:
        raise UserError(f"{path}: PARAMS may not be named VARIANT or {size}")
    count = math.prod(len(v) for v in params.values())
    if count > MAX_VARIANTS:
        raise UserError(f"{path}: PARAMS make {count} configurations; generate makes at most {MAX_VARIANTS}")
    defaults = dict(getattr(module, "DEFAULTS", {k: v[0] for k, v in params.items()}))
    if set(defaults) != set(params) or any(defaults[k] not in params[k] for k in params):
        raise UserError(f"{path}: DEFAULTS must give every parameter one of its PARAMS values, got {defaults!r}")
    return Nest(path, module, name, size, params, defaults, list(getattr(module, "SMALL", [])),
                list(getattr(module, "TARGET", [])))


def _args(nest: Nest, lp) -> list:
    """loopy's argument list from ARGS (arrays: (dtype, shape[, "output"])), the size as an int32 value."""
    out = []
    args = getattr(nest.module, "ARGS")
    if not isinstance(args, dict) or not args:
        raise UserError(f"{nest.path}: ARGS must map array names to (dtype, shape[, \"output\"])")
    for name, desc in args.items():
        if not is_c_identifier(name) or not isinstance(desc, (tuple, list)) or len(desc) not in (2, 3) \
                or desc[0] not in DTYPES or (len(desc) == 3 and desc[2] != "output"):
            raise UserError(f"{nest.path}: ARGS[{name!r}]: expected (dtype, shape) or (dtype, shape, \"output\"), "
                            f"dtype one of {', '.join(DTYPES)}; got {desc!r}")
        shape = tuple(str(s) for s in (desc[1] if isinstance(desc[1], (tuple, list)) else (desc[1],)))
        out.append(lp.GlobalArg(name, np.dtype(desc[0]), shape=shape, is_output=len(desc) == 3,
                                is_input=len(desc) != 3 or name in getattr(nest.module, "INOUT", ())))
    out.append(lp.ValueArg(nest.size, np.int32))
    return out


def untransformed(nest: Nest, target=None):
    """The nest as loopy reads it, before any transformation."""
    lp = loopy()
    return nest.call("the nest", lp.make_kernel, getattr(nest.module, "DOMAIN"), getattr(nest.module, "INSTRUCTIONS"),
                     _args(nest, lp), target=target or lp.OpenCLTarget(), name=nest.name, lang_version=(2018, 2))


@dataclass
class Variant:
    config: dict[str, int]
    code: str = ""
    groups: tuple = ()
    local: tuple = ()
    error: str = ""


def variants(nest: Nest) -> list[Variant]:
    """Every configuration's OpenCL code and launch grid from loopy (a configuration loopy refuses keeps its
    reason)."""
    lp = loopy()
    base = untransformed(nest)
    out = []
    for config in nest.configs():
        v = Variant(config)
        try:
            knl = nest.call(f"transform({config})", getattr(nest.module, "transform"), base, **config)
            knl = knl.copy(target=lp.OpenCLTarget())
            v.code = nest.call(f"loopy's code for {config}", lambda: lp.generate_code_v2(knl).device_code())
            entry = knl.default_entrypoint
            groups, local = entry.get_grid_size_upper_bounds_as_exprs(knl.callables_table)
            v.groups, v.local = tuple(str(g) for g in groups), tuple(str(x) for x in local)
        except UserError as exc:
            v.error = str(exc)
        out.append(v)
    return out


def _variant_expression(nest: Nest) -> str:
    """VARIANT from the parameters: the configuration's index in the product of PARAMS, -1 outside it."""
    valid, index, radix = [], [], 1
    for name in reversed(list(nest.params)):
        values = nest.params[name]
        hits = [f"({name} == {v})" for v in values]
        valid.append("(" + " + ".join(hits) + ")")
        position = " + ".join(f"{k} * ({name} == {v})" for k, v in enumerate(values) if k)
        if position:
            index.append(f"{radix} * ({position})")
        radix *= len(values)
    return f"{' * '.join(valid)} * ({' + '.join(index) or '0'} + 1) - 1"


def _check_grid(nest: Nest, v: Variant, sizes: list[int]) -> str:
    """'' where loopy's launch for the configuration equals the spec's GLOBAL/LOCAL at these sizes, else why not."""
    glob, local = getattr(nest.module, "GLOBAL"), getattr(nest.module, "LOCAL")
    for n in sizes:
        names = {nest.size: n, **v.config}
        want_local = [evaluate_int(x, names, "LOCAL") for x in local]
        want_global = [evaluate_int(x, names, "GLOBAL") for x in glob]
        got_local = [evaluate_int(x.replace(" ", ""), {nest.size: n}, "loopy's local size") for x in v.local]
        got_groups = [evaluate_int(x, {nest.size: n}, "loopy's group count") for x in v.groups]
        got_global = [g * lo for g, lo in zip(got_groups, got_local)]
        if (want_local, want_global) != (got_local, got_global):
            return (f"at {nest.size}={n} loopy launches global {got_global}, local {got_local}; GLOBAL/LOCAL give "
                    f"{want_global}, {want_local}")
    return ""


def write_untransformed(nest: Nest, outdir: Path) -> Path:
    """``NAME_untransformed.cl`` / ``.toml``: the nest as loopy generates it before any transformation (one
    work-item runs the whole nest), the baseline the transformed variants are measured against."""
    lp = loopy()
    knl = untransformed(nest)
    code = nest.call("loopy's code for the untransformed nest", lambda: lp.generate_code_v2(knl).device_code())
    base = f"{nest.name}_untransformed"
    (outdir / f"{base}.cl").write_text(f"// {nest.name} untransformed: generated by `gpuprofiler generate "
                                       f"{nest.path.name}` with loopy, no transformation (one work-item)\n{code}\n")
    text = _spec_text(nest, base, f"{base}.cl", {}, ["1"], ["1"],
                      f"the untransformed nest of {nest.path.name} as loopy generates it (one work-item)")
    path = outdir / f"{base}.toml"
    path.write_text(text.replace(f'kernel = "{base}"', f'kernel = "{nest.name}"'))
    load_spec(path)
    return path


def _spec_text(nest: Nest, name: str, source: str, params: dict[str, str], glob: list[str], local: list[str],
               description: str) -> str:
    m = nest.module
    lines = [f'name = "{name}"', f'description = "{description}"', f'kernel = "{name}"', f'size = "{nest.size}"']
    if nest.small:
        lines.append(f"small = {list(map(int, nest.small))}")
    if nest.target:
        lines.append(f"target = {list(map(int, nest.target))}")
    lines += ["", f'source = "{source}"', ""]
    if params:
        lines += ["[params]"] + [f'{k} = "{v}"' for k, v in params.items()]
        lines += ["", "[defines]", 'VARIANT = "VARIANT"', ""]
    for a in _args(nest, loopy()):
        lines.append("[[args]]")
        lines.append(f'name = "{a.name}"')
        lines.append(f'dtype = "{np.dtype(a.dtype.numpy_dtype).name}"')
        if a.name == nest.size:
            lines.append(f'value = "{nest.size}"')
        else:
            lines.append("shape = [" + ", ".join(f'"{s}"' for s in a.shape) + "]")
            lines.append('init = "zeros"\noutput = true' if a.is_output else 'init = "random"')
        lines.append("")
    lines += ["[launch]", "global = [" + ", ".join(f'"{g}"' for g in glob) + "]",
              "local = [" + ", ".join(f'"{g}"' for g in local) + "]", ""]
    work = getattr(m, "WORK", {})
    if work:
        lines.append("[work]")
        lines += [f'{k} = "{v}"' for k, v in work.items()]
        lines.append("")
    for got, expect, *tol in getattr(m, "CHECKS", []):
        lines += ["[[check]]", f'got = "{got}"', f'expect = "{expect}"']
        if tol:
            lines.append(f"rtol = {float(tol[0])!r}")
        lines.append("")
    return "\n".join(lines)


def write(nest: Nest, made: list[Variant], outdir: Path) -> tuple[Path, Path]:
    """``NAME.cl`` (every configuration under ``#if VARIANT == k``) and ``NAME.toml`` (the spec) in ``outdir``."""
    outdir.mkdir(parents=True, exist_ok=True)
    cl = [f"// {nest.name}: generated by `gpuprofiler generate {nest.path.name}` with loopy, one variant per "
          f"configuration of {', '.join(nest.params)}"]
    for k, v in enumerate(made):
        cl.append(f"{'#if' if k == 0 else '#elif'} VARIANT == {k}  /* {v.config} */")
        cl.append(v.code if not v.error else f'#error "loopy refused {v.config}: {v.error[:200]}"'.replace("\n", " "))
    cl += ['#else', '#error "no generated variant for this configuration"', '#endif', '']
    cl_path = outdir / f"{nest.name}.cl"
    cl_path.write_text("\n".join(cl))
    params = {k: str(nest.defaults[k]) for k in nest.params}
    params["VARIANT"] = _variant_expression(nest)
    text = _spec_text(nest, nest.name, cl_path.name, params, list(getattr(nest.module, "GLOBAL")),
                      list(getattr(nest.module, "LOCAL")),
                      f"generated by gpuprofiler generate from {nest.path.name} (loopy); parameters "
                      f"{', '.join(nest.params)} select the transformed variant")
    toml_path = outdir / f"{nest.name}.toml"
    toml_path.write_text(text)
    load_spec(toml_path)  # what was written must read back (expressions, args, launch)
    return cl_path, toml_path


def verify(nest: Nest, spec_path: Path, backend, made: list[Variant], size: int) -> list[dict[str, Any]]:
    """Each configuration at ``size`` on ``backend``'s device against the untransformed nest, which loopy runs on
    the same OpenCL device (through pyopencl, one work-item through the whole nest) on the same inputs: one row per
    configuration with the largest difference relative to the nest's largest value; then the spec's own check."""
    import pyopencl as cl

    from gpuprofiler.workloads.kernel import launch, prepare, run_checked

    lp = loopy()
    spec = load_spec(spec_path)
    ctx = backend.context
    queue = cl.CommandQueue(ctx)
    reference = untransformed(nest, lp.PyOpenCLTarget()).executor(ctx)
    host = spec.instantiate(size).make_args(np.random.default_rng(0))  # what prepare(seed=0) uploads
    outputs = [a.name for a in spec.args if a.output]
    given = {k: (np.array(v) if k in outputs else v) for k, v in host.items()}
    _, outs = nest.call("running the untransformed nest", reference, queue, **given)
    expect = {name: np.asarray(o.get() if hasattr(o, "get") else o) for name, o in zip(outputs, outs)}
    rows = []
    for k, v in enumerate(made):
        row = {"variant": k, **v.config, "status": "ok", "max_rel_error": math.nan, "reason": ""}
        if v.error:
            row.update(status="refused by loopy", reason=v.error)
            rows.append(row)
            continue
        grid = _check_grid(nest, v, sorted({size, *nest.small[:2]}))
        if grid:
            row.update(status="launch differs", reason=grid)
            rows.append(row)
            continue
        try:
            # loopy guards every access by the nest's domain; the declared shapes' rule (one element per work-item
            # of a padded 1-D launch) would refuse a size that is no multiple of the tile
            p = prepare(backend, spec, size, overrides=dict(v.config), bounds_checked=True)
            launch(backend, p)
            backend.finish()
            errs = []
            for name in outputs:
                got = np.empty_like(host[name])
                backend.from_device(p.buffers[name], got)
                ref = expect[name]
                scale = float(np.max(np.abs(ref))) or 1.0
                errs.append(float(np.max(np.abs(got.astype(np.float64) - ref))) / scale)
            row["max_rel_error"] = max(errs)
            if spec.checks:
                run_checked(backend, p)
        except GpuProfilerError as exc:
            row.update(status="failed", reason=str(exc)[:300])
        rows.append(row)
    return rows
