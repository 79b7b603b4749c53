"""Max-plus algebra on numpy arrays: epsilon = -inf, a (+) b = max(a, b), a (.) b = a + b.

Every entry is finite or -inf; +inf and NaN are rejected on the way in, so -inf + inf is never
formed and no NaN can appear. Dense products are chunked so their memory stays bounded; the sparse
path (:class:`SparseMaxPlus`) keeps a kernel matrix as its arcs and never forms a dense power.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = -np.inf
CHUNK_ELEMENTS = 1 << 22  # entries of the temporary block in a dense product (32 MiB of float64)


def check(a, name: str = "matrix") -> np.ndarray:
    """``a`` as a float array, refusing +inf and NaN (the only values that could make a NaN)."""
    arr = np.asarray(a, dtype=float)
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError(f"{name} holds NaN or +inf; max-plus entries are finite times or -inf (epsilon)")
    return arr


def add(a, b) -> np.ndarray:
    """(A (+) B)_ij = max(a_ij, b_ij)."""
    return np.maximum(check(a), check(b))


def matmul(a, b, chunk: int = CHUNK_ELEMENTS) -> np.ndarray:
    """(A (.) B)_ij = max_k (a_ik + b_kj), for matrices or matrix-vector, in row blocks of bounded size."""
    a, b = check(a, "left operand"), check(b, "right operand")
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"shapes {a.shape} and {b.shape} do not chain")
    m, k = a.shape
    j = b.shape[1]
    out = np.full((m, j), EPS)
    if m and j and k:
        bt = np.ascontiguousarray(b.T)
        rows = max(1, chunk // max(1, k * j))
        for s in range(0, m, rows):
            out[s:s + rows] = (a[s:s + rows, None, :] + bt[None, :, :]).max(axis=2)
    return out[:, 0] if vector else out


def identity(n: int) -> np.ndarray:
    """I_n: 0 on the diagonal, epsilon elsewhere."""
    out = np.full((n, n), EPS)
    np.fill_diagonal(out, 0.0)
    return out


def power(a, k: int, chunk: int = CHUNK_ELEMENTS) -> np.ndarray:
    """A^(.)k by repeated squaring (A^0 = I)."""
    a = check(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"power needs a square matrix, got shape {a.shape}")
    if k < 0:
        raise ValueError("max-plus powers are defined for k >= 0")
    result, base = None, a
    while k:
        if k & 1:
            result = base.copy() if result is None else matmul(result, base, chunk)
        k >>= 1
        if k:
            base = matmul(base, base, chunk)
    return identity(a.shape[0]) if result is None else result


def kron(a, b) -> np.ndarray:
    """Max-plus Kronecker product: (A (x) B)[i*p + r, j*q + s] = a_ij + b_rs."""
    a, b = check(a), check(b)
    (m, n), (p, q) = a.shape, b.shape
    return (a[:, None, :, None] + b[None, :, None, :]).reshape(m * p, n * q)


def inner(u, v) -> float:
    """<u, v> = max_j (u_j + v_j); epsilon when the vectors share no finite position."""
    u, v = check(u, "u"), check(v, "v")
    return float(np.max(u + v)) if u.size else EPS


def unit(n: int, positions) -> np.ndarray:
    """The vector with 0 at ``positions`` and epsilon elsewhere (1_i, 1_o)."""
    out = np.full(n, EPS)
    out[list(positions)] = 0.0
    return out


@dataclass
class SparseMaxPlus:
    """A kernel matrix kept as its arcs: z[dst, src] = weight; absent arcs are epsilon.

    Duplicate arcs combine with (+) (the larger weight wins), as parallel arcs do.
    """

    n: int
    dst: np.ndarray
    src: np.ndarray
    weight: np.ndarray

    @classmethod
    def from_arcs(cls, n: int, dst, src, weight) -> SparseMaxPlus:
        dst, src = np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64)
        weight = check(weight, "arc weights")
        if not (dst.shape == src.shape == weight.shape):
            raise ValueError("dst, src and weight must have one entry per arc")
        if dst.size and (min(dst.min(), src.min()) < 0 or max(dst.max(), src.max()) >= n):
            raise ValueError(f"arc endpoints must be node numbers 0..{n - 1}")
        keep = np.isfinite(weight)
        return cls(n, dst[keep], src[keep], weight[keep])

    def to_dense(self) -> np.ndarray:
        out = np.full((self.n, self.n), EPS)
        np.maximum.at(out, (self.dst, self.src), self.weight)
        return out

    def matvec(self, x) -> np.ndarray:
        """Z (.) x without forming Z: y_i = max over arcs j -> i of (z_ij + x_j)."""
        x = check(x, "vector")
        y = np.full(self.n, EPS)
        np.maximum.at(y, self.dst, self.weight + x[self.src])
        return y
