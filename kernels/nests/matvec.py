"""y = A x for an n x n float32 matrix, as a loop nest for `gpuprofiler generate` (loopy).

Tunable: TI rows per work-group (a row per work-item, on local axis 0), and PREFETCH: the sum over j split into
steps of TJ with x's step staged in local memory, shared by the group's rows."""

import loopy as lp

NAME = "matvec_loopy"
SIZE = "n"
DOMAIN = "{[i,j]: 0<=i,j<n}"
INSTRUCTIONS = "y[i] = sum(j, A[i,j]*x[j])"
ARGS = {"A": ("float32", ("n", "n")), "x": ("float32", ("n",)), "y": ("float32", ("n",), "output")}
PARAMS = {"TI": [16, 64, 256], "TJ": [64, 256], "PREFETCH": [0, 1]}
DEFAULTS = {"TI": 64, "TJ": 64, "PREFETCH": 0}
GLOBAL = ["ceil(n / TI) * TI"]
LOCAL = ["TI"]
CHECKS = [("y", "matmul(A, x)", 1e-4)]
WORK = {"flops": "2*n*n", "bytes": "4*n*n + 8*n"}
SMALL = [1024, 1448, 2048]
TARGET = [4096]


def transform(knl, TI, TJ, PREFETCH):
    knl = lp.split_iname(knl, "i", TI, outer_tag="g.0", inner_tag="l.0")
    if PREFETCH:
        knl = lp.split_iname(knl, "j", TJ)
        knl = lp.add_prefetch(knl, "x", ["j_inner"], fetch_outer_inames="i_outer,j_outer", default_tag="l.auto")
    return knl
