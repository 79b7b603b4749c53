"""Reuse distances and LRU stack distances of an address stream (cache-line ids in execution order), vectorised.

* :func:`next_use` / :func:`previous_use` -- for each access, the position of the next (previous) access to the
  same line, by one stable sort;
* :func:`reuse_distances` -- accesses between an access and the next one to its line (``-1``: none follows, a
  line never touched again in the stream);
* :func:`stack_distances` -- the exact LRU stack distance of every access: the distinct other lines touched since
  the previous access to its line (``-1``: its first access, a cold miss). An LRU cache of L lines hits exactly the
  accesses whose stack distance is below L. Counted offline as a 2-D dominance count over a merge-sort tree whose
  levels are one numpy sort each: O(N log^2 N), a million accesses in about a second.
"""

from __future__ import annotations

import numpy as np


def _pairs(lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of consecutive accesses to the same line: (earlier, later) arrays."""
    lines = np.asarray(lines)
    order = np.argsort(lines, kind="stable")
    same = lines[order[1:]] == lines[order[:-1]]
    return order[:-1][same], order[1:][same]


def next_use(lines: np.ndarray) -> np.ndarray:
    """Position of the next access to each access's line (``len(lines)``: none)."""
    out = np.full(len(lines), len(lines), dtype=np.int64)
    earlier, later = _pairs(lines)
    out[earlier] = later
    return out


def next_and_first_use(lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per access, the position of the next access to its line (``len(lines)``: none) and of its line's first
    access, from one sort."""
    lines = np.asarray(lines)
    n = len(lines)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    low, span = int(lines.min()), int(lines.max()) - int(lines.min()) + 1
    bits = max(n - 1, 1).bit_length()
    if span.bit_length() + bits <= 62:  # (line, position) as one integer: its unstable sort is the stable sort
        key = ((lines.astype(np.int64) - low) << bits) | np.arange(n, dtype=np.int64)
        key.sort()
        order, ordered = key & ((1 << bits) - 1), key >> bits
    else:
        order = np.argsort(lines, kind="stable")
        ordered = lines[order]
    same = ordered[1:] == ordered[:-1]
    nxt = np.full(n, n, dtype=np.int64)
    nxt[order[:-1][same]] = order[1:][same]
    start = np.ones(n, dtype=bool)
    start[1:] = ~same
    first = np.empty(n, dtype=np.int64)
    first[order] = order[start][np.cumsum(start) - 1]
    return nxt, first


def previous_from_next(nxt: np.ndarray) -> np.ndarray:
    """Per access, the position of the previous access to its line (-1: none), from each access's next use
    (``len(nxt)``: none), as :func:`next_and_first_use` gives it: no second sort."""
    out = np.full(len(nxt), -1, dtype=np.int64)
    again = nxt < len(nxt)
    out[nxt[again]] = np.flatnonzero(again)
    return out


def previous_use(lines: np.ndarray) -> np.ndarray:
    """Position of the previous access to each access's line (``-1``: none, the line's first access)."""
    out = np.full(len(lines), -1, dtype=np.int64)
    earlier, later = _pairs(lines)
    out[later] = earlier
    return out


def reuse_distances(lines: np.ndarray) -> np.ndarray:
    """Forward reuse distance of every access: the accesses strictly between it and the next access to its line
    (``-1`` where no access to the line follows)."""
    n = len(lines)
    nxt = next_use(lines)
    return np.where(nxt < n, nxt - np.arange(n) - 1, -1)


def stack_distances(lines: np.ndarray) -> np.ndarray:
    """Exact LRU stack distance of every access (``-1`` for a line's first access).

    The stack distance of access i with previous access p is the number of distinct lines touched in (p, i): the
    positions j in (p, i) that are the last access to their line before i, i.e. whose next use is at or after i.
    Each query range is split into the aligned power-of-two blocks of a segment tree; at level k the blocks' next
    uses are sorted once (keys ``block * (N + 1) + next``), and a block's count of next uses >= i is a searchsorted.
    """
    lines = np.asarray(lines)
    n = len(lines)
    prev = previous_use(lines)
    nxt = next_use(lines)
    out = np.full(n, -1, dtype=np.int64)
    q = np.flatnonzero(prev >= 0)
    if not len(q):
        return out
    lo = prev[q] + 1
    hi = q.copy()  # half-open [lo, hi)
    thr = q  # next use at or after the query position
    count = np.zeros(len(q), dtype=np.int64)
    pos = np.arange(n, dtype=np.int64)
    k = 0
    while (lo < hi).any():
        width = 1 << k
        block = pos >> k
        keys = np.sort(block * (n + 1) + nxt)
        for side in ("lo", "hi"):
            if side == "lo":  # lo's block at this level, whole inside the range: count it, move lo past it
                take = ((lo >> k) & 1).astype(bool) & (lo + width <= hi)
                b = lo >> k
            else:  # the block just below hi
                take = ((hi >> k) & 1).astype(bool) & (hi - width >= lo)
                b = (hi >> k) - 1
            if take.any():
                bt = b[take]
                end = np.searchsorted(keys, (bt + 1) * (n + 1), side="left")
                first = np.searchsorted(keys, bt * (n + 1) + thr[take], side="left")
                count[take] += end - first
                if side == "lo":
                    lo[take] += width
                else:
                    hi[take] -= width
        k += 1
        if width > n:
            break
    out[q] = count
    return out


def lru_miss_ratio(lines: np.ndarray, cache_lines: int | np.ndarray) -> np.ndarray:
    """Exact miss ratio of a fully associative LRU cache of each size (in lines) on the stream, cold misses
    included."""
    sd = stack_distances(lines)
    sizes = np.atleast_1d(np.asarray(cache_lines))
    return np.array([float(np.mean((sd < 0) | (sd >= s))) for s in sizes])
