"""Kernel identity for leave-one-kernel-out: the same code under other names is the same kernel."""

import re

import pytest
from conftest import KERNELS
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.identity import kernel_code

SAXPY = """
extern "C" __global__ void saxpy(int n, float alpha, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = alpha * x[i] + y[i];
}
"""


def kernels(ext):
    out = {}
    for path in sorted(KERNELS.glob(f"*.{ext}")) + sorted((KERNELS / "apps").glob(f"*.{ext}")):
        text = path.read_text()
        for name in re.findall(r"(?:__global__|__kernel)\s+void\s+(\w+)", text):
            out[f"{path.stem}:{name}"] = kernel_code(text, name)
    return out


@pytest.mark.parametrize("ext", ["cu", "cl"])
def test_the_apps_copies_of_builtin_kernels_and_nothing_else_share_a_code(ext):
    codes = kernels(ext)
    groups = {}
    for name, code in codes.items():
        groups.setdefault(code, []).append(name)
    shared = sorted(sorted(g) for g in groups.values() if len(g) > 1)
    assert shared == [["cg:axpy", "saxpy:saxpy"], ["cg:spmv", "spmv_csr:spmv_csr"],
                      ["jacobi:jacobi_step", "stencil5:stencil5"]]


def test_compound_assignment_and_operand_order_do_not_matter_but_the_operation_does():
    base = kernel_code(SAXPY, "saxpy")
    assert kernel_code(SAXPY.replace("y[i] = alpha * x[i] + y[i]", "y[i] += x[i] * alpha"), "saxpy") == base
    assert kernel_code(SAXPY.replace("alpha * x[i] + y[i]", "alpha * x[i] - y[i]"), "saxpy") != base
    assert kernel_code(SAXPY.replace("alpha * x[i] + y[i]", "alpha * y[i] + x[i]"), "saxpy") != base
    # a parameter named like a thread index field does not change threadIdx.x
    assert kernel_code(SAXPY.replace("float *x", "float *z").replace("x[i]", "z[i]"), "saxpy") == base


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["a", "b2", "row", "tmp_1", "alpha_"]), st.sampled_from(["q", "vec", "y_out"]),
       st.sampled_from([" ", "  ", "\n", "\t"]))
def test_names_and_layout_do_not_matter(local, param, space):
    text = SAXPY.replace("int i ", f"int {local} ").replace("[i]", f"[{local}]").replace("(i < n)", f"({local} < n)")
    text = text.replace("float *y", f"float *{param}").replace("y[", f"{param}[").replace(" = ", f"{space}={space}")
    assert kernel_code(text, "saxpy") == kernel_code(SAXPY, "saxpy")


def test_unparsable_source_falls_back_to_its_text():
    a = kernel_code("__global__ void k( { broken", "k")
    assert a == kernel_code("__global__   void k( {\n broken", "k") != kernel_code("__global__ void k( { other", "k")
