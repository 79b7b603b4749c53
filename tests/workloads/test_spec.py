import shutil

import numpy as np
import pytest
from conftest import KERNELS

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.builtin import builtin_apps, builtin_specs, resolve
from gpuprofiler.workloads.spec import load_spec

EXPECTED = {"vadd", "saxpy", "copy", "scale", "triad", "reduction", "matmul_naive", "matmul_tiled",
            "transpose_naive", "transpose_tiled", "stencil5", "spmv_csr", "gemm", "syrk", "syr2k", "gesummv",
            "conv2d", "conv3d", "hotspot", "nbody", "mvt", "covariance", "kmeans", "bitonic"}


def test_every_builtin_spec_loads_with_both_sources():
    specs = {p.stem: load_spec(p) for p in builtin_specs()}
    assert EXPECTED <= set(specs)
    for spec in specs.values():
        assert set(spec.sources) == {"opencl", "cuda"}
        assert spec.checks and spec.small and spec.target
        assert max(spec.target) > max(spec.small)
    assert {p.stem for p in builtin_apps()} >= {"cg", "jacobi"}


def test_resolve_builtin_names():
    assert resolve("vadd").name == "vadd.toml"
    assert resolve("cg").name == "cg.py"
    with pytest.raises(UserError, match="no spec or app"):
        resolve("nonexistent_kernel")


def edited(tmp_path, old, new, name="vadd"):
    for f in KERNELS.glob(f"{name}.*"):
        shutil.copy(f, tmp_path / f.name)
    p = tmp_path / f"{name}.toml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    return p


def test_unknown_dtype_names_the_field(tmp_path):
    with pytest.raises(UserError, match=r"args\[1\] \(a\)\.dtype: unknown dtype 'flaot32'"):
        load_spec(edited(tmp_path, 'dtype = "float32"', 'dtype = "flaot32"'))


def test_import_in_size_expression_refused(tmp_path):
    with pytest.raises(UserError, match=r"shape.*'__import__' is not allowed"):
        load_spec(edited(tmp_path, 'shape = "n"', "shape = \"__import__('os')\""))


def test_unknown_field_and_missing_source(tmp_path):
    with pytest.raises(UserError, match="unknown field"):
        load_spec(edited(tmp_path, 'kernel = "vadd"', 'kernel = "vadd"\nkernal = "x"'))
    with pytest.raises(UserError, match="file not found"):
        load_spec(edited(tmp_path, 'opencl = "vadd.cl"', 'opencl = "missing.cl"'))
    with pytest.raises(UserError, match="not valid TOML"):
        load_spec(edited(tmp_path, 'kernel = "vadd"', 'kernel = '))


def test_instantiate_and_args():
    spec = load_spec(KERNELS / "spmv_csr.toml")
    inst = spec.instantiate(1000)
    args = inst.make_args(np.random.default_rng(0))
    k = inst.names["k"]
    assert args["rowptr"][-1] == 1000 * k and np.all(np.diff(args["rowptr"]) == k)
    assert args["cols"].min() >= 0 and args["cols"].max() < 1000
    assert inst.global_size == [1000]
