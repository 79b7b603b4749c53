"""Memory divergence: coalesced, strided (with the stride) and uncoalesced accesses, sectors and bank conflicts."""

import numpy as np
import pytest
from conftest import PTX_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.models.pipeline import divergence
from gpuprofiler.models.pipeline.cfg import build_cfg, find_path
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
from gpuprofiler.models.pipeline.values import Evaluator, Launch, ThreadSample

FIXTURES = PTX_FIXTURES


def accesses(name, grid, block, args, kernel=None):
    e = parse_ptx((FIXTURES / f"{name}.ptx").read_text(), name).entry(kernel or name)
    ev = Evaluator(e, Launch(grid, block, args))
    path = find_path(build_cfg(e), ev)
    return list(divergence.analyse(e.instructions, path.accesses, ev.sample).values())


def test_vadd_is_coalesced():
    acc = accesses("vadd", (64,), (256,), {0: 64 * 256})
    assert [(a.kind, a.space, a.pattern) for a in acc] == [("load", "global", "coalesced")] * 2 + [
        ("store", "global", "coalesced")]
    for a in acc:
        assert a.affine == {"tid.x": 4, "tid.y": 0, "tid.z": 0}
        assert a.transactions == 4.0 and a.ideal == 4.0 and not a.uncoalesced


@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_naive_transpose_column_access_is_strided_by_the_row(n):
    load, store = accesses("transpose_naive", (n // 16, n // 16), (16, 16), {0: n})
    assert load.pattern == "coalesced" and load.affine == {"tid.x": 4, "tid.y": 4 * n, "tid.z": 0}
    assert store.pattern == "strided" and store.stride_bytes == 4 * n and store.to_dict()["stride_elements"] == n
    # a 16 x 16 block puts two rows of 16 lanes in a warp: 16 distinct columns, the 2 rows share a sector
    assert store.transactions == 16.0 and store.uncoalesced


def test_gather_through_an_index_array_is_uncoalesced():
    idx, x, out = accesses("gather", (32,), (256,), {0: 8192})
    assert idx.pattern == "coalesced" and out.pattern == "coalesced"
    assert x.pattern == "uncoalesced" and x.uncoalesced and x.affine is None
    assert "loaded from global memory" in x.why and x.transactions == 32.0   # worst case: a sector per lane


def test_spmv_row_loads_coalesced_and_value_loads_not():
    acc = accesses("spmv_csr", (16,), (256,), {0: 4096})
    assert acc[0].pattern == "coalesced"                     # rowptr[row]
    assert acc[1].pattern == "coalesced" and acc[1].transactions == 5.0   # rowptr[row + 1]: shifted by 4 bytes
    assert all(a.pattern == "uncoalesced" for a in acc[2:-1])   # cols[p], x[cols[p]], vals[p]
    assert acc[-1].pattern == "coalesced"


def test_matmul_naive_broadcast_row_and_shared_bank_conflicts_of_the_tiles():
    acc = accesses("matmul_naive", (8, 8), (16, 16), {0: 128})
    pats = {a.line: a.pattern for a in acc}
    assert list(pats.values()).count("uniform") == 4 and list(pats.values()).count("coalesced") == 5
    tiled = accesses("transpose_tiled", (8, 8), (16, 16), {0: 128})
    shared = [a for a in tiled if a.space == "shared"]
    # tile[ty][tx] with 17 words a row: the warp's two rows meet in one bank only (words 0 and 32 of bank 0)
    assert [a.conflict for a in shared] == [2.0, 2.0]
    tiles = accesses("matmul_tiled", (4, 4), (16, 16), {0: 64})
    assert all(a.conflict == 1.0 for a in tiles if a.space == "shared")


@settings(max_examples=60, deadline=None)
@given(st.integers(-64, 64), st.integers(0, 4096), st.sampled_from([1, 2, 4, 8, 16]),
       st.sampled_from([(32, 1), (16, 2), (8, 4), (64, 1)]))
def test_affine_addresses_are_recovered_and_sectors_counted_exactly(sx, sy, size, block):
    launch = Launch((2,), block)
    sample = ThreadSample(launch)
    base = 1 << 20
    addr = base + sx * sample.tid[0] + sy * sample.tid[1]
    assert divergence._affine(addr, sample) == {"tid.x": sx, "tid.y": sy if block[1] > 1 else 0, "tid.z": 0}
    mask = np.ones(sample.size, bool)
    tr, ideal = divergence._sectors(addr, size, mask, sample.warp, sample.n_warps)
    # brute force: distinct 32-byte sectors of each warp's lanes
    per = []
    for w in range(sample.n_warps):
        a = addr[sample.warp == w]
        sec = {int(x) // 32 for x in a} | {(int(x) + size - 1) // 32 for x in a}
        per.append(len(sec))
    assert tr == pytest.approx(np.mean(per))
    assert ideal == pytest.approx(np.ceil(32 * size / 32))
