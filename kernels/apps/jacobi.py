"""Jacobi iteration for Laplace's equation on a square grid of n points, with a convergence check.

Phases: jacobi_step (the sweep), diff_partial (the convergence check every
CHECK_EVERY sweeps: per-group sums of squared updates, added on the host) and
the copies. It stops when the RMS update falls below TOLERANCE or after
MAX_SWEEPS sweeps; the hot top edge makes the interior change slowly, so at
the sizes used here the cap is what ends the run.
"""

import numpy as np

NAME = "jacobi"
SMALL = [33554432, 38543360, 44274688, 50858496, 58421248, 67108864]  # grid points; 256..512 MiB for two grids
TARGET = [268435456]
MAX_SWEEPS = 20
CHECK_EVERY = 10
TOLERANCE = 1e-7
LOCAL = 256
TILE = (16, 16)


def side(n):
    """Side of the square grid of (about) n points."""
    return max(3, int(np.sqrt(n)))


def working_set(n):
    return 2 * 4 * side(n) ** 2 + 4 * (-(-side(n) ** 2 // LOCAL))


def work_items(n):
    return side(n) ** 2


def initial(n):
    u = np.zeros((n, n), np.float32)
    u[0, :] = 1.0
    return u


def run(ctx, points):
    n = side(points)
    source = ctx.source("jacobi")
    step = ctx.compile(source, "jacobi_step", {"LOCAL": LOCAL})
    diff = ctx.compile(source, "diff_partial", {"LOCAL": LOCAL})
    u0 = initial(n)
    a, b = ctx.to_device(u0), ctx.to_device(u0)  # both hold the fixed boundary
    count = n * n
    groups = -(-count // LOCAL)
    d_partial = ctx.empty(groups, np.float32)
    partial = np.empty(groups, np.float32)
    nn = np.int32(n)
    sweeps, rms = 0, float("inf")
    while sweeps < MAX_SWEEPS:
        ctx.launch(step, (n, n), TILE, nn, a, b)
        sweeps += 1
        if sweeps % CHECK_EVERY == 0:
            ctx.launch(diff, (count,), (LOCAL,), np.int32(count), a, b, d_partial)
            rms = float(np.sqrt(ctx.from_device(d_partial, partial).sum(dtype=np.float64) / count))
        a, b = b, a
        if rms < TOLERANCE:
            break
    u = ctx.from_device(a, np.empty((n, n), np.float32))
    return {"u": u, "sweeps": sweeps, "rms": rms}


def check(points, result):
    """The same sweeps in numpy must give the same grid. A sweep moves the hot edge one row down, so after s sweeps
    only rows 0..s can differ from zero: numpy sweeps those rows (the next one held at zero, as the full grid holds
    it until sweep s + 1) and the device's other rows must be exactly zero (the reference at 2^28 points took 100 s
    over the whole grid)."""
    n, sweeps = side(points), result["sweeps"]
    rows = min(n, sweeps + 2)
    u = initial(n)[:rows].astype(np.float64)
    for _ in range(sweeps):
        v = u.copy()
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u = v
    err = float(np.max(np.abs(result["u"][:rows] - u)))
    assert err < 1e-5, f"grid differs from numpy by {err:.2e} after {sweeps} sweeps"
    below = result["u"][rows:]
    assert not below.any(), (f"rows {rows}.. should still be zero after {sweeps} sweeps; the largest is "
                             f"{float(np.max(np.abs(below))):.2e}")
