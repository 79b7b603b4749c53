"""A 2-D 5-point Jacobi step, out = average of u's four neighbours on the interior of an n x n grid, as a loop nest
for `gpuprofiler generate` (loopy).

Tunable: the work-group tile TI x TJ and PREFETCH: stage u's tile with its halo in local memory (loopy finds the
footprint of the four reads and stages its bounding box)."""

import loopy as lp

NAME = "stencil2d_loopy"
SIZE = "n"
DOMAIN = "{[i,j]: 0<=i,j<n-2}"  # interior point (i+1, j+1)
INSTRUCTIONS = "out[i+1,j+1] = 0.25*(u[i,j+1] + u[i+2,j+1] + u[i+1,j] + u[i+1,j+2])"
ARGS = {"u": ("float32", ("n", "n")), "out": ("float32", ("n", "n"), "output")}
PARAMS = {"TI": [1, 4, 16], "TJ": [16, 64, 256], "PREFETCH": [0, 1]}
DEFAULTS = {"TI": 4, "TJ": 64, "PREFETCH": 0}
GLOBAL = ["ceil((n - 2) / TJ) * TJ", "ceil((n - 2) / TI) * TI"]
LOCAL = ["TJ", "TI"]
CHECKS = [("out[1:-1, 1:-1]", "0.25*(u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])", 1e-5)]
WORK = {"flops": "4*(n-2)**2", "bytes": "8*n*n"}
SMALL = [1024, 1448, 2048]
TARGET = [4096]


def transform(knl, TI, TJ, PREFETCH):
    knl = lp.split_iname(knl, "i", TI, outer_tag="g.1", inner_tag="l.1")
    knl = lp.split_iname(knl, "j", TJ, outer_tag="g.0", inner_tag="l.0")
    if PREFETCH:
        knl = lp.add_prefetch(knl, "u", ["i_inner", "j_inner"], fetch_outer_inames="i_outer,j_outer",
                              fetch_bounding_box=True, default_tag="l.auto")
        knl = lp.add_inames_for_unused_hw_axes(knl)  # a fetch loop that fills the tile along one axis only
    return knl
