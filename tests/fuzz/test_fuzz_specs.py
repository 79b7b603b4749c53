"""Fuzzing the spec reader: the builtin specs mutated byte by byte and field by field (a value replaced by a
wrong type, a huge number, a nested table, an expression past the limits) load, or are refused with a UserError
naming the file; ``maxplus`` on them exits 0 or 2 with no traceback and creates no file."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import KERNELS, POCL_PROFILE
from fuzzing import mutate_bytes, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.spec import load_spec, tomllib

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPECS = ["vadd", "saxpy", "matmul_tiled", "spmv_csr", "stencil5", "nbody", "reduction", "conv2d"]


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_text(data: dict) -> str:
    """TOML for a spec-like table: scalars first, then tables and arrays of tables."""
    out, later = [], []
    for k, v in data.items():
        key = json.dumps(str(k))
        if isinstance(v, dict):
            later.append(f"[{key}]\n" + "".join(f"{json.dumps(str(a))} = {toml_value(b)}\n" for a, b in v.items()))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                later.append(f"[[{key}]]\n" + "".join(f"{json.dumps(str(a))} = {toml_value(b)}\n"
                                                      for a, b in item.items()))
        else:
            out.append(f"{key} = {toml_value(v)}\n")
    return "".join(out) + "\n".join(later)


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)  # TOML has no lone surrogates
PLAUSIBLE = st.sampled_from([1, 16, 256, 1024, 4096, "n", "n+1", "n-1", "2*n", "n//2", "n/2", "float64", "int8",
                             "uint32", "float16", "zeros", "range", "random", "value", "a * 2", "a + b", "c[1:]",
                             "c", True, False, 1e-3, [256], ["n"], ["n", 2], [64, 4]])
VALUES = st.recursive(
    st.one_of(PLAUSIBLE, PLAUSIBLE, st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**31, 2**63, 10**30, 256]),
              st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
              st.sampled_from(["n", "n**256", "9**9**9", "(-1)**0.5", "1+" * 1500 + "1", "(" * 40 + "n" + ")" * 40,
                               "__import__('os').system('touch pwned')", "n*n*n*n", "1e308*10", "n-1", "n//0",
                               "2**64", "-Xclang -load", "x", "", "int32", "random", "value", "a[0:n]", "sum(a)",
                               "reshape(a, n, n) @ reshape(a, n, n)", "ceil(n/0.0)", "n % 0", "float32"]),
              TEXT),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=3)),
    max_leaves=8)


def paths(node, prefix=()):
    """Every key path in the parsed spec."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def replaced(node, path, value):
    if not path:
        return value
    if isinstance(node, dict):
        return {k: (replaced(v, path[1:], value) if k == path[0] else v) for k, v in node.items()}
    return [replaced(v, path[1:], value) if i == path[0] else v for i, v in enumerate(node)]


def copy_spec(folder: Path, name: str) -> Path:
    for f in KERNELS.glob(f"{name}.*"):
        shutil.copy(f, folder / f.name)
    return folder / f"{name}.toml"


def check_load(folder: Path, name: str, data: bytes):
    path = copy_spec(folder, name)
    path.write_bytes(data)
    try:
        spec = load_spec(path)
    except UserError as exc:
        assert str(path) in str(exc) or "spec" in str(exc), exc
        return
    for size in (spec.small or [16])[:1] + [spec.size_multiple]:
        try:
            inst = spec.instantiate(size)
        except UserError:
            continue
        if inst.array_bytes < 1 << 20:
            try:
                inst.make_args(np.random.default_rng(0))
            except UserError:
                pass


@FAST
@given(st.sampled_from(SPECS), st.data())
def test_mutated_bytes(tmp_path_factory, name, data):
    text = (KERNELS / f"{name}.toml").read_bytes()
    check_load(tmp_path_factory.mktemp("s"), name, mutate_bytes(text, data.draw, st))


@FAST
@given(st.sampled_from(SPECS), st.data())
def test_mutated_fields(tmp_path_factory, name, data):
    raw = tomllib.loads((KERNELS / f"{name}.toml").read_text())
    path = data.draw(st.sampled_from(list(paths(raw))[1:]))
    mutated = replaced(raw, path, data.draw(VALUES))
    check_load(tmp_path_factory.mktemp("s"), name, toml_text(mutated).encode())


@pytest.mark.slow
@LONG
@given(st.sampled_from(SPECS), st.data())
def test_mutated_fields_long(tmp_path_factory, name, data):
    raw = tomllib.loads((KERNELS / f"{name}.toml").read_text())
    path = data.draw(st.sampled_from(list(paths(raw))[1:]))
    mutated = replaced(raw, path, data.draw(VALUES))
    check_load(tmp_path_factory.mktemp("s"), name, toml_text(mutated).encode())


def test_the_toml_writer_round_trips_every_builtin():
    for name in SPECS:
        raw = tomllib.loads((KERNELS / f"{name}.toml").read_text())
        assert tomllib.loads(toml_text(raw)) == raw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_maxplus_on_mutated_specs(data):
    raw = tomllib.loads((KERNELS / "vadd.toml").read_text())
    path = data.draw(st.sampled_from(list(paths(raw))[1:]))
    text = toml_text(replaced(raw, path, data.draw(VALUES))).encode()
    sources = {f.name: f.read_bytes() for f in KERNELS.glob("vadd.c*")}
    run_cli("maxplus", "{vadd.toml}", "--size", "4096", "--profile", POCL_PROFILE,
            inputs={"vadd.toml": text, **sources})
