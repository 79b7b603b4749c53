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
PARTS = CSR_PARTS + SELL_PARTS
PART_DTYPES = {"rowptr": np.int32, "cols": np.int32, "vals": np.float32,
               "sliceptr": np.int32, "sell_cols": np.int32, "sell_vals": np.float32}
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
    if sliceptr[-1] >= 2**31:
        raise UserError(f"SELL with S = {S}: {sliceptr[-1]} stored elements do not fit 32-bit offsets")
    row = np.repeat(np.arange(n), m.row_lengths())
    pos = np.arange(m.nnz) - np.repeat(m.rowptr[:-1].astype(np.int64), m.row_lengths())
    dest = sliceptr[row // S] + pos * S + row % S
    cols = np.zeros(sliceptr[-1], np.int32)
    vals = np.zeros(sliceptr[-1], np.float32)
    cols[dest] = m.cols
    vals[dest] = m.vals
    return Sell(S, n, sliceptr.astype(np.int32), cols, vals)


@functools.lru_cache(maxsize=16)
def sell(source: str, n: int, S: int) -> Sell:
    return to_sell(matrix(source, n), int(S))


def sell_matvec(sliceptr, cols, vals, x, S, rows):
    """y = A @ x from A's Sliced ELLPACK arrays (float64 sums). Every slice holds a whole number of S-element
    lines (column steps), so the products form a (lines, S) array whose column r is row r of its slice; the lines
    of each slice are summed with one ``reduceat``."""
    sliceptr = np.asarray(sliceptr, dtype=np.int64)
    S, rows = int(S), int(rows)
    slices = len(sliceptr) - 1
    products = np.multiply(np.asarray(vals), np.asarray(x, dtype=np.float64)[np.asarray(cols)], dtype=np.float64)
    lines = products.reshape(-1, S)
    sums = np.zeros((slices, S))
    full = np.diff(sliceptr) > 0
    if full.any():
        sums[full] = np.add.reduceat(lines, sliceptr[:-1][full] // S, axis=0)
    return sums.ravel()[:rows]


def parts(source: str, n: int, S: int | None) -> dict[str, np.ndarray]:
    """Every part a spec's arguments may take (the SELL ones only with a slice height)."""
    m = matrix(source, n)
    out = {"rowptr": m.rowptr, "cols": m.cols, "vals": m.vals}
    if S is not None:
        s = sell(source, n, int(S))
        out.update({"sliceptr": s.sliceptr, "sell_cols": s.cols, "sell_vals": s.vals})
    return out


def names(source: str, n: int, S: int | None) -> dict[str, int]:
    """Figures of the matrix a spec's expressions may use: ``matrix_rows``, ``matrix_nnz``, ``matrix_max_row``,
    and with a slice height ``matrix_slices`` and ``matrix_stored`` (elements SELL stores, padding included)."""
    m = matrix(source, n)
    out = {"matrix_rows": m.rows, "matrix_nnz": m.nnz,
           "matrix_max_row": int(m.row_lengths().max()) if m.rows else 0}
    if S is not None:
        s = sell(source, n, int(S))
        out.update({"matrix_slices": s.slices, "matrix_stored": s.stored})
    return out


def describe(m: Csr) -> dict[str, float]:
    """Rows, nonzeros and the row lengths' mean, max and coefficient of variation."""
    lengths = m.row_lengths()
    mean = float(lengths.mean()) if len(lengths) else 0.0
    return {"rows": m.rows, "nnz": m.nnz, "mean_row": mean, "max_row": int(lengths.max()) if len(lengths) else 0,
            "row_cv": float(lengths.std() / mean) if mean else 0.0}
