"""Sparse matrices for SpMV specs: generated families, Matrix Market files, CSR and Sliced ELLPACK layouts.

Sliced ELLPACK (Monakov, Lokhmotov & Avetisyan): the rows are cut into slices of S consecutive rows, each slice
stored as an ELLPACK block as wide as its longest row, column by column (element k of row r of slice s at
``sliceptr[s] + k*S + r``), short rows padded with zeros at column 0. S = 1 is CSR without the row lengths'
variance penalty; S = rows is ELLPACK. A spec names a family (or a file) in its ``[matrix]`` table; its arguments
take the parts (``rowptr``, ``cols``, ``vals`` of CSR; ``sliceptr``, ``sell_cols``, ``sell_vals`` of SELL).
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuprofiler.errors import UserError

FAMILIES = ("poisson2d", "poisson3d", "banded", "powerlaw", "block")
CSR_PARTS = ("rowptr", "cols", "vals")
SELL_PARTS = ("sliceptr", "sell_cols", "sell_vals")
PAIR_PARTS = ("pair_sliceptr", "pair_cols", "pair_vals")  # SELL of 1x2 blocks
VAR_PARTS = ("var_sliceptr", "var_slicerow", "var_rowslice", "var_cols", "var_vals")  # variable slice heights
PARTS = CSR_PARTS + SELL_PARTS + PAIR_PARTS + VAR_PARTS
PART_DTYPES = {"rowptr": np.int32, "cols": np.int32, "vals": np.float32,
               "sliceptr": np.int32, "sell_cols": np.int32, "sell_vals": np.float32,
               "pair_sliceptr": np.int32, "pair_cols": np.int32, "pair_vals": np.float32,
               "var_sliceptr": np.int32, "var_slicerow": np.int32, "var_rowslice": np.int32, "var_cols": np.int32,
               "var_vals": np.float32}
MAX_MATRIX_BYTES = 4 << 30  # a Matrix Market file larger than this is refused before it is read
BANDED_HALF_WIDTH = 8       # banded: 17 nonzeros per row
POWERLAW_MEAN = 8           # powerlaw: mean row length, lengths ~ Pareto(alpha = 2) from 4
BLOCK = 4                   # block: dense 4 x 4 blocks, 4 block columns per block row


@dataclass(frozen=True)
class Csr:
    """A square sparse matrix in CSR form (int32 indices, float32 values), rows sorted by column."""

    rowptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.rowptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.rowptr[-1])

    def row_lengths(self) -> np.ndarray:
        return np.diff(self.rowptr)

    def scipy(self):
        import scipy.sparse as sp

        return sp.csr_matrix((self.vals, self.cols, self.rowptr), shape=(self.rows, self.rows))


@dataclass(frozen=True)
class Sell:
    """Sliced ELLPACK of a :class:`Csr`: slice height ``S``, ``sliceptr`` (slices + 1 offsets), padded columns and
    values."""

    S: int
    rows: int
    sliceptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    @property
    def slices(self) -> int:
        return len(self.sliceptr) - 1

    @property
    def stored(self) -> int:
        return int(self.sliceptr[-1])


def _from_scipy(m) -> Csr:
    m = m.tocsr()
    m.sum_duplicates()
    m.sort_indices()
    if m.shape[0] != m.shape[1]:
        raise UserError(f"a matrix for SpMV must be square, got {m.shape[0]} x {m.shape[1]}")
    if m.nnz >= 2**31 or m.shape[0] >= 2**31:
        raise UserError(f"a matrix of {m.shape[0]} rows and {m.nnz} nonzeros does not fit 32-bit indices")
    return Csr(m.indptr.astype(np.int32), m.indices.astype(np.int32), m.data.astype(np.float32))


def _rng(family: str, n: int) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(f"{family}:{n}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed)


def _stencil(n: int, offsets: list[int], neighbours: list[np.ndarray]) -> Csr:
    """The n x n leading block of a Laplacian stencil: 2 * len(offsets) on the diagonal, -1 at each offset where
    ``neighbours`` (per offset, a mask over rows) allows."""
    import scipy.sparse as sp

    diags, where = [np.full(n, 2.0 * len(offsets))], [0]
    for off, ok in zip(offsets, neighbours):
        for sign in (1, -1):
            k = sign * off
            length = n - off
            if length <= 0:
                continue
            rows = np.arange(length) if k > 0 else np.arange(off, n)
            d = np.where(ok(rows, k), -1.0, 0.0)
            diags.append(d)
            where.append(k)
    return _from_scipy(sp.diags(diags, where, shape=(n, n), format="csr"))


def poisson2d(n: int) -> Csr:
    """5-point Laplacian on a g x g grid (g = ceil(sqrt(n))), its leading n rows and columns."""
    g = max(2, math.isqrt(n - 1) + 1)
    return _stencil(n, [1, g], [lambda r, k: (r % g != g - 1) if k > 0 else (r % g != 0), lambda r, k: True])


def poisson3d(n: int) -> Csr:
    """7-point Laplacian on a g^3 grid (g = ceil(cbrt(n))), its leading n rows and columns."""
    g = 2
    while g ** 3 < n:
        g += 1
    x_ok = lambda r, k: (r % g != g - 1) if k > 0 else (r % g != 0)  # noqa: E731
    y_ok = lambda r, k: ((r // g) % g != g - 1) if k > 0 else ((r // g) % g != 0)  # noqa: E731
    return _stencil(n, [1, g, g * g], [x_ok, y_ok, lambda r, k: True])


def banded(n: int) -> Csr:
    """Every entry within BANDED_HALF_WIDTH of the diagonal, random values in [0.5, 1.5)."""
    import scipy.sparse as sp

    rng = _rng("banded", n)
    offsets = list(range(-BANDED_HALF_WIDTH, BANDED_HALF_WIDTH + 1))
    diags = [rng.uniform(0.5, 1.5, n - abs(k)) for k in offsets if n - abs(k) > 0]
    return _from_scipy(sp.diags(diags, [k for k in offsets if n - abs(k) > 0], shape=(n, n), format="csr"))


def powerlaw(n: int) -> Csr:
    """Row lengths from a Pareto law (alpha 2, at least 4, mean POWERLAW_MEAN, at most min(n, 4096)), columns
    uniform at random: the long-tailed rows of web and social graphs."""
    import scipy.sparse as sp

    rng = _rng("powerlaw", n)
    lengths = np.minimum((4 * (1 + rng.pareto(2.0, n))).astype(np.int64), min(n, 4096))
    rows = np.repeat(np.arange(n), lengths)
    cols = rng.integers(0, n, len(rows))
    m = sp.coo_matrix((rng.uniform(0.5, 1.5, len(rows)), (rows, cols)), shape=(n, n))
    return _from_scipy(m)


def block(n: int) -> Csr:
    """Dense BLOCK x BLOCK blocks: the diagonal block and 3 random block columns per block row (a discretisation
    with BLOCK unknowns per cell)."""
    import scipy.sparse as sp

    rng = _rng("block", n)
    nb = -(-n // BLOCK)
    brow = np.repeat(np.arange(nb), 4)
    bcol = np.concatenate([np.arange(nb)[:, None], rng.integers(0, nb, (nb, 3))], axis=1).ravel()
    i, j = np.meshgrid(np.arange(BLOCK), np.arange(BLOCK), indexing="ij")
    rows = (brow[:, None] * BLOCK + i.ravel()[None, :]).ravel()
    cols = (bcol[:, None] * BLOCK + j.ravel()[None, :]).ravel()
    keep = (rows < n) & (cols < n)
    m = sp.coo_matrix((rng.uniform(0.5, 1.5, int(keep.sum())), (rows[keep], cols[keep])), shape=(n, n))
    return _from_scipy(m)


GENERATORS = {"poisson2d": poisson2d, "poisson3d": poisson3d, "banded": banded, "powerlaw": powerlaw, "block": block}


def is_file_source(source: str) -> bool:
    return source not in GENERATORS


def check_source(source: str, where: str) -> None:
    """A family's name or a readable Matrix Market file; anything else is a UserError naming ``where``."""
    if source in GENERATORS:
        return
    path = Path(source)
    if path.suffix.lower() not in (".mtx", ".mm") and not path.name.lower().endswith((".mtx.gz", ".mm.gz")):
        raise UserError(f"{where}: {source!r} is neither a matrix family ({', '.join(FAMILIES)}) nor a Matrix Market "
                        "file (.mtx)")
    if not path.is_file():
        raise UserError(f"{where}: matrix file not found: {source}")


@functools.lru_cache(maxsize=8)
def _file(path: str) -> Csr:
    import scipy.io

    p = Path(path)
    if p.stat().st_size > MAX_MATRIX_BYTES:
        raise UserError(f"{path}: a Matrix Market file of {p.stat().st_size} bytes is more than this tool reads "
                        f"({MAX_MATRIX_BYTES} bytes)")
    try:
        m = scipy.io.mmread(path)
    except (ValueError, OSError, IndexError, TypeError) as exc:
        raise UserError(f"{path}: not a Matrix Market matrix: {exc}") from None
    if not hasattr(m, "tocsr"):
        import scipy.sparse as sp

        m = sp.csr_matrix(m)
    if np.iscomplexobj(m.data):
        raise UserError(f"{path}: a complex matrix; SpMV specs here are float32")
    return _from_scipy(m)


@functools.lru_cache(maxsize=16)
def matrix(source: str, n: int) -> Csr:
    """The matrix of ``source`` (a family generated at n rows, or a Matrix Market file, whose own rows are the
    size: ``n`` must equal them)."""
    if source in GENERATORS:
        if n < 1:
            raise UserError(f"matrix {source}: needs at least one row, got {n}")
        return GENERATORS[source](int(n))
    m = _file(str(Path(source).resolve()))
    if m.rows != n:
        raise UserError(f"{source}: the file's matrix has {m.rows} rows; the size must be {m.rows}, not {n}")
    return m


def _place(m: Csr, sliceptr: np.ndarray, first_row: np.ndarray, heights: np.ndarray,
           slice_of_row: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``m``'s columns and values laid out slice by slice, column by column (element k of row r of slice s at
    ``sliceptr[s] + k * heights[s] + r - first_row[s]``), padding zeros at column 0. ``m.vals`` may hold several
    values per entry (a block's), which stay together."""
    if sliceptr[-1] >= 2**31:
        raise UserError(f"{what}: {sliceptr[-1]} stored elements do not fit 32-bit offsets")
    lengths = m.row_lengths()
    row = np.repeat(np.arange(m.rows), lengths)
    pos = np.arange(len(m.cols)) - np.repeat(m.rowptr[:-1].astype(np.int64), lengths)
    s = slice_of_row[row]
    dest = sliceptr[s] + pos * heights[s] + row - first_row[s]
    per = len(m.vals) // len(m.cols) if len(m.cols) else 1
    cols = np.zeros(sliceptr[-1], np.int32)
    vals = np.zeros((sliceptr[-1], per), np.float32)
    cols[dest] = m.cols
    vals[dest] = m.vals.reshape(-1, per)
    return cols, vals.ravel()


def to_sell(m: Csr, S: int) -> Sell:
    """``m`` in Sliced ELLPACK with slice height ``S`` (rows past the last full slice are empty padding)."""
    if S < 1:
        raise UserError(f"slice height S must be at least 1, got {S}")
    n = m.rows
    slices = -(-n // S)
    lengths = np.zeros(slices * S, np.int64)
    lengths[:n] = m.row_lengths()
    widths = lengths.reshape(slices, S).max(axis=1)
    sliceptr = np.zeros(slices + 1, np.int64)
    np.cumsum(widths * S, out=sliceptr[1:])
    cols, vals = _place(m, sliceptr, np.arange(slices) * S, np.full(slices, S), np.arange(n) // S,
                        f"SELL with S = {S}")
    return Sell(S, n, sliceptr.astype(np.int32), cols, vals)


@functools.lru_cache(maxsize=16)
def sell(source: str, n: int, S: int) -> Sell:
    return to_sell(matrix(source, n), int(S))


def to_pairs(m: Csr) -> Csr:
    """``m`` as a matrix of 1x2 blocks (Monakov et al.'s small-block variant): each row's nonzeros at consecutive
    columns (c, c+1) become one block, read with one index; a nonzero without a neighbour becomes a block padded
    with a zero (at c+1, or at c-1 in the last column). Returned as CSR over blocks: ``cols`` the blocks' first
    columns, ``vals`` two values per block."""
    n = m.rows
    if n < 2:
        raise UserError("1x2 blocks need a matrix of at least 2 columns")
    lengths = m.row_lengths()
    row = np.repeat(np.arange(n), lengths)
    cols = m.cols.astype(np.int64)
    # runs of consecutive columns within a row; a run of length L gives L // 2 pairs and a single if L is odd
    starts = np.ones(m.nnz, bool)
    if m.nnz:
        starts[1:] = (np.diff(cols) != 1) | (row[1:] != row[:-1])
    run_id = np.cumsum(starts) - 1
    run_start = np.flatnonzero(starts)
    offset = np.arange(m.nnz) - run_start[run_id]
    run_len = np.diff(np.append(run_start, m.nnz))[run_id]
    first = offset % 2 == 0  # each block begins at an even offset of its run
    paired = first & (offset + 1 < run_len)
    block_row = row[first]
    bcols = cols[first].copy()
    bvals = np.zeros((int(first.sum()), 2), np.float32)
    idx = np.flatnonzero(first)
    bvals[:, 0] = m.vals[idx]
    bvals[paired[first], 1] = m.vals[idx[paired[first]] + 1]
    last = ~paired[first] & (bcols == n - 1)  # a single in the last column: the block is (c-1, c)
    bvals[last] = bvals[last][:, ::-1]
    bcols[last] -= 1
    rowptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(block_row, minlength=n), out=rowptr[1:])
    return Csr(rowptr.astype(np.int32), bcols.astype(np.int32), bvals.ravel())


@functools.lru_cache(maxsize=16)
def pair_sell(source: str, n: int, S: int) -> Sell:
    """Sliced ELLPACK of the 1x2 blocks of ``source``: ``vals`` holds two values per stored block."""
    return to_sell(to_pairs(matrix(source, n)), int(S))


def _slice_sums(sliceptr, products: np.ndarray, S: int, rows: int) -> np.ndarray:
    """Row sums of the stored elements' products, fixed slice height ``S``: every slice holds a whole number of
    S-element lines (column steps), so the products form a (lines, S) array whose column r is row r of its slice,
    and one ``reduceat`` sums each slice's lines."""
    sliceptr = np.asarray(sliceptr, dtype=np.int64)
    sums = np.zeros((len(sliceptr) - 1, S))
    full = np.diff(sliceptr) > 0
    if full.any():
        sums[full] = np.add.reduceat(products.reshape(-1, S), sliceptr[:-1][full] // S, axis=0)
    return sums.ravel()[:rows]


def sell_matvec(sliceptr, cols, vals, x, S, rows):
    """y = A @ x from A's Sliced ELLPACK arrays (float64 sums)."""
    products = np.multiply(np.asarray(vals), np.asarray(x, dtype=np.float64)[np.asarray(cols)], dtype=np.float64)
    return _slice_sums(sliceptr, products, int(S), int(rows))


@dataclass(frozen=True)
class VarSell:
    """Sliced ELLPACK with a height per slice: slice s holds rows ``slicerow[s]`` to ``slicerow[s+1] - 1``, stored as
    its ELLPACK block at ``sliceptr[s]`` (element k of its row r at ``sliceptr[s] + k*h + r``, h its height);
    ``rowslice`` gives each row's slice."""

    sliceptr: np.ndarray
    slicerow: np.ndarray
    rowslice: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    @property
    def stored(self) -> int:
        return int(self.sliceptr[-1])

    @property
    def slices(self) -> int:
        return len(self.sliceptr) - 1


def var_heights(lengths: np.ndarray, S: int, waste: float) -> np.ndarray:
    """Slice heights, greedily from the first row: a slice takes the next row while it has fewer than ``S`` rows and
    its padding (stored minus nonzeros, over stored) stays at most ``waste`` (Monakov et al.'s variable slice
    height: a row much longer than its neighbours starts a slice of its own instead of padding them all)."""
    heights = []
    n, r = len(lengths), 0
    lengths = lengths.tolist()
    while r < n:
        h, width, total = 1, lengths[r], lengths[r]
        while h < S and r + h < n:
            nxt = lengths[r + h]
            w = max(width, nxt)
            if w and (w * (h + 1) - (total + nxt)) > waste * w * (h + 1):
                break
            h, width, total = h + 1, w, total + nxt
        heights.append(h)
        r += h
    return np.asarray(heights, dtype=np.int64)


def to_var_sell(m: Csr, S: int, waste: float) -> VarSell:
    """``m`` in Sliced ELLPACK with slice heights of at most ``S`` chosen per slice (:func:`var_heights`)."""
    if S < 1 or not 0 <= waste <= 1:
        raise UserError(f"variable slice heights need S >= 1 and a waste fraction in [0, 1], got {S}, {waste}")
    lengths = m.row_lengths().astype(np.int64)
    heights = var_heights(lengths, int(S), float(waste))
    slicerow = np.zeros(len(heights) + 1, np.int64)
    np.cumsum(heights, out=slicerow[1:])
    rowslice = np.repeat(np.arange(len(heights)), heights)
    widths = np.maximum.reduceat(lengths, slicerow[:-1]) if len(lengths) else np.zeros(0, np.int64)
    sliceptr = np.zeros(len(heights) + 1, np.int64)
    np.cumsum(widths * heights, out=sliceptr[1:])
    cols, vals = _place(m, sliceptr, slicerow, heights, rowslice, "variable-height SELL")
    return VarSell(sliceptr.astype(np.int32), slicerow.astype(np.int32), rowslice.astype(np.int32), cols, vals)


@functools.lru_cache(maxsize=8)
def var_sell(source: str, n: int, S: int, waste: float) -> VarSell:
    return to_var_sell(matrix(source, n), int(S), float(waste))


def var_sell_matvec(sliceptr, slicerow, cols, vals, x, rows):
    """y = A @ x from a variable-height Sliced ELLPACK (float64 sums)."""
    sliceptr = np.asarray(sliceptr, dtype=np.int64)
    slicerow = np.asarray(slicerow, dtype=np.int64)
    counts = np.diff(sliceptr)
    heights = np.diff(slicerow)
    s = np.repeat(np.arange(len(counts)), counts)
    offset = np.arange(int(sliceptr[-1]), dtype=np.int64) - sliceptr[s]
    row = slicerow[s] + offset % np.maximum(heights[s], 1)
    products = np.multiply(np.asarray(vals), np.asarray(x, dtype=np.float64)[np.asarray(cols)], dtype=np.float64)
    return np.bincount(row, weights=products, minlength=max(int(rows), 1))[:int(rows)]


def pair_sell_matvec(sliceptr, cols, vals, x, S, rows):
    """y = A @ x from the Sliced ELLPACK of A's 1x2 blocks (two values per stored block, at cols and cols + 1)."""
    pairs = np.asarray(vals, dtype=np.float64).reshape(-1, 2)
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(cols, dtype=np.int64)
    x_next = x[np.minimum(c + 1, len(x) - 1)]  # a padded block's second value is 0 where c + 1 is past the end
    return _slice_sums(sliceptr, pairs[:, 0] * x[c] + pairs[:, 1] * x_next, int(S), int(rows))


def parts(source: str, n: int, S: int | None, wanted: tuple[str, ...] = PARTS,
          waste: float = 0.0) -> dict[str, np.ndarray]:
    """The parts a spec's arguments take (the SELL ones only with a slice height; the variable-height ones with
    ``waste``, the padding a slice may hold)."""
    m = matrix(source, n)
    out = {"rowptr": m.rowptr, "cols": m.cols, "vals": m.vals}
    if S is not None and any(p in SELL_PARTS for p in wanted):
        s = sell(source, n, int(S))
        out.update({"sliceptr": s.sliceptr, "sell_cols": s.cols, "sell_vals": s.vals})
    if S is not None and any(p in PAIR_PARTS for p in wanted):
        s = pair_sell(source, n, int(S))
        out.update({"pair_sliceptr": s.sliceptr, "pair_cols": s.cols, "pair_vals": s.vals})
    if S is not None and any(p in VAR_PARTS for p in wanted):
        v = var_sell(source, n, int(S), float(waste))
        out.update({"var_sliceptr": v.sliceptr, "var_slicerow": v.slicerow, "var_rowslice": v.rowslice,
                    "var_cols": v.cols, "var_vals": v.vals})
    return out


def names(source: str, n: int, S: int | None, wanted: tuple[str, ...] = PARTS, waste: float = 0.0) -> dict[str, int]:
    """Figures of the matrix a spec's expressions may use: ``matrix_rows``, ``matrix_nnz``, ``matrix_max_row``,
    and with a slice height ``matrix_slices`` and ``matrix_stored`` (elements SELL stores, padding included;
    with 1x2 blocks, ``matrix_stored_pairs``, the blocks stored; with variable heights, their slices and stored
    elements)."""
    m = matrix(source, n)
    out = {"matrix_rows": m.rows, "matrix_nnz": m.nnz,
           "matrix_max_row": int(m.row_lengths().max()) if m.rows else 0}
    if S is not None:
        out["matrix_slices"] = -(-m.rows // int(S))
        if any(p in SELL_PARTS for p in wanted):
            out["matrix_stored"] = sell(source, n, int(S)).stored
        if any(p in PAIR_PARTS for p in wanted):
            out["matrix_stored_pairs"] = pair_sell(source, n, int(S)).stored
        if any(p in VAR_PARTS for p in wanted):
            v = var_sell(source, n, int(S), float(waste))
            out.update({"matrix_stored": v.stored, "matrix_slices": v.slices})
    return out


def describe(m: Csr) -> dict[str, float]:
    """Rows, nonzeros and the row lengths' mean, max and coefficient of variation."""
    lengths = m.row_lengths()
    mean = float(lengths.mean()) if len(lengths) else 0.0
    return {"rows": m.rows, "nnz": m.nnz, "mean_row": mean, "max_row": int(lengths.max()) if len(lengths) else 0,
            "row_cv": float(lengths.std() / mean) if mean else 0.0}
