"""gemm, C = A B for n x n float32 matrices, as a loop nest for `gpuprofiler generate` (loopy).

Tunable: the work-group tile TI x TJ (rows i on local axis 1, columns j on local axis 0) and PREFETCH: stage A's
and B's tiles in local memory, k split into steps of TI (loopy's add_prefetch; the tiles' loads spread over the
work-group by loopy's automatic tagging)."""

import loopy as lp

NAME = "gemm_loopy"
SIZE = "n"
DOMAIN = "{[i,j,k]: 0<=i,j,k<n}"
INSTRUCTIONS = "c[i,j] = sum(k, a[i,k]*b[k,j])"
ARGS = {"a": ("float32", ("n", "n")), "b": ("float32", ("n", "n")), "c": ("float32", ("n", "n"), "output")}
PARAMS = {"TI": [1, 4, 8, 16], "TJ": [16, 32, 64], "PREFETCH": [0, 1]}
DEFAULTS = {"TI": 8, "TJ": 32, "PREFETCH": 0}
GLOBAL = ["ceil(n / TJ) * TJ", "ceil(n / TI) * TI"]
LOCAL = ["TJ", "TI"]
CHECKS = [("c", "matmul(a, b)", 1e-4)]
WORK = {"flops": "2*n**3", "bytes": "12*n*n"}
SMALL = [128, 192, 256]
TARGET = [512]


def transform(knl, TI, TJ, PREFETCH):
    knl = lp.split_iname(knl, "i", TI, outer_tag="g.1", inner_tag="l.1")
    knl = lp.split_iname(knl, "j", TJ, outer_tag="g.0", inner_tag="l.0")
    if PREFETCH:
        knl = lp.split_iname(knl, "k", max(TI, 4))
        knl = lp.add_prefetch(knl, "a", ["i_inner", "k_inner"], fetch_outer_inames="i_outer,j_outer,k_outer",
                              default_tag="l.auto")
        knl = lp.add_prefetch(knl, "b", ["k_inner", "j_inner"], fetch_outer_inames="i_outer,j_outer,k_outer",
                              default_tag="l.auto")
        knl = lp.add_inames_for_unused_hw_axes(knl)  # a one-row tile's fetch uses one local axis only
    return knl
