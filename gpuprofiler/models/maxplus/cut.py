"""Loops too long to unroll into one graph: the graph built with the innermost of them cut to a few passes, twice,
and every bound of the time taken linear in the loop's passes through the two (bilinear when two nested loops must
be cut). A max-plus system settles into a periodic regime, each pass adding the same time to its critical path and
the same requests to each resource, so two cuts past the first passes give the slope."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Callable

from gpuprofiler.kernelcode.source import TooLarge
from gpuprofiler.models.base import Prediction
from gpuprofiler.models.maxplus.graph import Kernel

CUT_PASSES = (8, 16)  # the passes a cut loop runs in the two graphs


def _blend(values: dict[tuple[int, ...], float], fractions: list[float]) -> float:
    """The multilinear extension through the corners ``values`` (keys: indices 0/1 per cut loop) at ``fractions``
    (0 at the first cut, 1 at the second)."""
    total = 0.0
    for corner, v in values.items():
        weight = math.prod(f if c else 1.0 - f for c, f in zip(corner, fractions))
        total += weight * v
    return total


def predict_cut(build_at: Callable[[dict[int, int]], Kernel], predict_at: Callable[[Kernel], Prediction],
                exc: TooLarge) -> tuple[Kernel, Prediction]:
    """The prediction of a kernel whose graph passed the statement limit (``exc``, naming the loops it was in):
    ``build_at(caps)`` builds it with loops cut (source line -> passes), ``predict_at`` times a graph. The innermost
    loop is cut first, then the one around it too; TooLarge where neither is enough or a loop cannot be counted."""
    loops = list(getattr(exc, "loops", ()) or ())
    last: TooLarge = exc
    for depth in (1, 2):
        if len(loops) < depth:
            break
        lines = loops[-depth:]
        try:
            corners, kernel = {}, None
            for corner in itertools.product((0, 1), repeat=depth):
                kernel = build_at({line: CUT_PASSES[c] for line, c in zip(lines, corner)})
                corners[corner] = predict_at(kernel)
        except TooLarge as again:
            last = again
            continue
        assert kernel is not None
        missing = [line for line in lines if line not in kernel.capped]
        if missing:  # the loop the limit fell in is not one the cut reaches (a while loop, an uncounted one)
            break
        real = [kernel.capped[line] for line in lines]
        fractions = [(r - CUT_PASSES[0]) / (CUT_PASSES[1] - CUT_PASSES[0]) for r in real]
        pred, note = _combine(corners, fractions, lines, real)
        kernel.notes.append(note)
        return kernel, pred
    raise last


def _combine(corners: dict[tuple[int, ...], Prediction], fractions: list[float], lines: list[int],
             real: list[float]) -> tuple[Prediction, str]:
    """The corners' predictions carried to the loops' full passes (each bound, the work, the interval), and a note
    saying so."""
    base = corners[(0,) * len(lines)]
    d = dict(base.details)

    def at(get: Callable[[Prediction], float]) -> float:
        return max(0.0, _blend({c: get(p) for c, p in corners.items()}, fractions))

    if isinstance(d.get("bounds_s"), dict):
        bounds = {name: at(lambda p, n=name: p.details["bounds_s"][n]) for name in d["bounds_s"]}
        work = max(bounds.values())
        d.update(bounds_s=bounds, limited_by=max(bounds, key=bounds.get))
    else:
        work = at(lambda p: p.details["work_s"])
    total = d["launch_fixed_s"] + max(d["dispatch_s"], work)
    low, high = min(at(lambda p: p.low), total), max(at(lambda p: p.high), total)
    d.pop("features", None)  # the learned correction's features describe the cut graph, not the kernel
    d.update(work_s=work, predicted_s=total, interval_s=[low, high],
             cut_loops={str(line): {"passes": r, "graphs_at": list(CUT_PASSES)} for line, r in zip(lines, real)})
    what = ", ".join(f"line {line} ({r:.4g} passes per entry)" for line, r in zip(lines, real))
    note = (f"loop{'s' if len(lines) > 1 else ''} at {what} too long to unroll: the graph built at "
            f"{' and '.join(map(str, CUT_PASSES))} passes, each bound linear in the passes through them")
    return replace(base, seconds=total, low=low, high=high, details=d), note
