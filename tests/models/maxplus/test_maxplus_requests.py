"""What each access asks of the memory system (:mod:`gpuprofiler.models.maxplus.requests`): the sample of whole
work-groups, lines and sectors per warp request, bank-conflict passes, and the L1 miss share, on hand-made
addresses and tiny built kernels with exactly known answers."""

import numpy as np
import pytest

from gpuprofiler.kernelcode.sample import make_sample
from gpuprofiler.models.maxplus.builder import build
from gpuprofiler.models.maxplus.requests import annotate, bank_passes, global_requests

# ---- the sample -------------------------------------------------------------------------------------


def test_sample_of_a_partial_last_group_pads_to_warps_and_marks_validity():
    s = make_sample([100], [48], limit=1024)  # 3 groups of 48 (the last has 4 work-items), padded to 64
    assert s.size == 3 * 64 and s.warps == 6
    assert s.ids["bx"].tolist() == [0] * 64 + [1] * 64 + [2] * 64
    assert s.group.tolist() == [0] * 64 + [1] * 64 + [2] * 64
    valid = s.valid.reshape(3, 64)
    assert valid.sum(axis=1).tolist() == [48, 48, 4]
    assert valid[:, :48].sum() == 100 and not valid[:, 48:].any()  # the padding lanes are never real
    assert s.ids["lx"][:48].tolist() == list(range(48))
    gid = s.ids["bx"] * 48 + s.ids["lx"]
    assert sorted(gid[s.valid].tolist()) == list(range(100))  # every work-item of the grid, once


def test_sample_spreads_whole_groups_evenly_over_the_grid():
    s = make_sample([64 * 100], [64], limit=1024)  # 100 groups, room for 16
    assert s.warps == 32
    picks = s.ids["bx"][::64].tolist()
    assert picks == [0, 7, 13, 20, 26, 33, 40, 46, 53, 59, 66, 73, 79, 86, 92, 99]
    assert np.array_equal(s.ids["lx"], np.tile(np.arange(64), 16)) and s.valid.all()


def test_sample_of_a_2d_grid_orders_groups_x_first():
    s = make_sample([32, 32], [16, 16])
    assert s.size == 4 * 256 and s.valid.all()
    assert list(zip(s.ids["bx"][::256].tolist(), s.ids["by"][::256].tolist())) == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert s.ids["lx"][:32].tolist() == list(range(16)) * 2 and s.ids["ly"][:32].tolist() == [0] * 16 + [1] * 16


def test_sample_keeps_at_least_one_group_and_needs_no_grid():
    s = make_sample([4096], [256], limit=100)
    assert s.size == 256 and (s.ids["bx"] == 0).all()
    s = make_sample(None, [40])  # no global size: the first work-group only
    assert s.size == 64 and s.valid.sum() == 40 and s.warps == 2


# ---- global requests ----------------------------------------------------------------------------------

SAMPLE = make_sample([64], [64])  # one group, two warps
LX = SAMPLE.ids["lx"]
ALL = np.ones(SAMPLE.size, dtype=bool)


def requests(addrs, elem=4, active=None):
    addr = np.stack(addrs).astype(np.int64)
    act = np.stack([ALL if active is None else active] * len(addrs))
    return global_requests(addr, act, np.full(len(addrs), elem, dtype=np.int64), SAMPLE)


@pytest.mark.parametrize("addr,elem,lines,sectors", [
    (LX, 4, 1, 4),                    # unit stride, 4 bytes: one 128-byte line, 4 sectors
    (LX * 32, 4, 32, 32),             # 32 elements apart: a line per lane
    (LX * 2, 4, 2, 8),                # every other element
    (LX + 1, 4, 2, 5),                # misaligned by one element: crosses a line
    (LX + 8, 4, 2, 4),                # misaligned by one sector: still 4 sectors, in 2 lines
    (np.zeros_like(LX), 4, 1, 1),     # uniform: one sector
    (LX // 8, 4, 1, 1),               # 4 distinct words in one sector
    (LX, 8, 2, 8),                    # unit stride, 8 bytes
    (LX, 1, 1, 1),                    # unit stride, 1 byte
])
def test_lines_and_sectors_per_warp_request(addr, elem, lines, sectors):
    r = requests([addr], elem)
    assert r["lines"].tolist() == [lines] and r["sectors"].tolist() == [sectors] and r["warps"].tolist() == [1.0]


def test_masked_lanes_are_excluded_and_warps_share():
    half = LX < 16  # lanes 0..15 of the first warp only
    r = requests([LX, LX * 32], active=half)
    assert r["warps"].tolist() == [0.5, 0.5]  # one of the two warps executes it
    assert r["lines"].tolist() == [1, 16] and r["sectors"].tolist() == [2, 16]  # mean over executing warps
    even = LX % 2 == 0
    r = requests([LX * 32], active=even)
    assert r["lines"].tolist() == [16] and r["warps"].tolist() == [1.0]


def test_share_of_warps_counts_only_warps_with_real_work_items():
    s = make_sample([32], [64])  # one group of 64 over a grid of 32: the second warp is past the grid
    assert s.valid.sum() == 32
    addr = s.ids["lx"][None, :]
    r = global_requests(addr, s.valid[None, :], np.array([4]), s)
    assert r["warps"].tolist() == [1.0] and r["sectors"].tolist() == [4]


# ---- local memory bank conflicts ---------------------------------------------------------------------


@pytest.mark.parametrize("addr,elem,passes", [
    (LX, 4, 1),                       # conflict-free
    (LX * 2, 4, 2),                   # 2-way
    (LX * 32, 4, 32),                 # 32-way: every lane in bank 0
    (LX * 33, 4, 1),                  # padded rows: conflict-free
    (np.zeros_like(LX), 4, 1),        # broadcast: one word
    (LX // 2, 4, 1),                  # pairs of lanes on one word: broadcast within the pair
    (LX * 16 % 64, 4, 2),             # words 0, 16, 32, 48: banks 0 and 16 hold two words each
    (LX, 8, 2),                       # 8-byte elements: 64 words, two per bank
])
def test_bank_passes(addr, elem, passes):
    r = bank_passes(addr[None, :].astype(np.int64), ALL[None, :], np.array([elem]), SAMPLE)
    assert r["wavefronts"].tolist() == [passes] and r["warps"].tolist() == [1.0]


def test_bank_passes_ignore_masked_lanes():
    active = (LX < 4) | (LX >= 32)  # 4 lanes of the first warp, all of the second
    r = bank_passes((LX * 32)[None, :], active[None, :], np.array([4]), SAMPLE)
    assert r["wavefronts"].tolist() == [(4 + 32) / 2]


# ---- annotate on built kernels ---------------------------------------------------------------------

NEIGHBOURS = """
__kernel void pair(__global const float *a, __global float *b) {
    int i = get_global_id(0);
    b[i] = a[i] + a[i + OFFSET];
}"""


@pytest.mark.parametrize("offset,sectors,miss", [
    # per group of 64 (two warps, 8 aligned sectors): a[i] asks 4 + 4 sectors, a[i+1] 5 + 5, and together
    # they touch sectors 0..8 once: 9 / 18
    (1, 5, 9 / 18),
    (8, 4, 9 / 16),     # one sector on: 4 + 4 sectors each, 9 distinct
    (64, 4, 16 / 16),   # the next group's data: nothing in common
    (0, 4, 8 / 16),     # the same address twice
])
def test_l1_miss_share_of_neighbouring_reads(offset, sectors, miss):
    k = build(NEIGHBOURS.replace("OFFSET", str(offset)), "pair", {}, [64], "pair.cl", global_size=[64 * 100])
    reads = [a for g in k.fragments for a in g.arcs if a.kind == "read"]
    assert [a.info["sectors"] for a in reads] == [4, sectors]
    assert all("_addr" not in a.info and "_mask" not in a.info for g in k.fragments for a in g.arcs)
    assert set(k.l1_miss) == {"a"}  # reads only
    assert k.l1_miss["a"] == pytest.approx(miss, rel=1e-12)


def test_l1_miss_share_of_a_row_walked_by_each_lane():
    src = """
    __kernel void rowsum(__global const float *m, __global float *out) {
        int i = get_global_id(0);
        float acc = 0.0f;
        for (int j = 0; j < 8; j++)
            acc += m[i * 8 + j];
        out[i] = acc;
    }"""
    k = build(src, "rowsum", {}, [32], "rowsum.cl", global_size=[32 * 64])
    reads = [a for g in k.fragments for a in g.arcs if a.kind == "read"]
    # each request: 32 lanes 32 bytes apart, a sector each; the group's 8 requests cover the same 32 sectors
    assert len(reads) == 8 and all(a.info["sectors"] == 32 and a.info["lines"] == 8 for a in reads)
    assert k.l1_miss["m"] == pytest.approx(32 / (8 * 32), rel=1e-12)


def test_branch_on_the_thread_index_counts_only_warps_that_take_it():
    src = """
    __kernel void edge(__global const float *a, __global float *b) {
        int i = get_global_id(0);
        if (get_local_id(0) < 32)
            b[i] = a[i];
    }"""
    k = build(src, "edge", {}, [128], "edge.cl", global_size=[128 * 8])
    (read,) = [a for g in k.fragments for a in g.arcs if a.kind == "read"]
    assert read.info["warps"] == pytest.approx(1 / 4) and read.info["sectors"] == 4


def test_local_memory_accesses_get_their_bank_passes():
    src = """
    __kernel void banks(__global const float *a, __global float *b) {
        __local float t[64 * 32];
        int l = get_local_id(0);
        int i = get_global_id(0);
        t[l] = a[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        b[i] = t[l * 32] + t[l * 2];
    }"""
    k = build(src, "banks", {}, [64], "banks.cl", global_size=[64 * 16])
    (write,) = [a for g in k.fragments for a in g.arcs if a.kind == "local_write"]
    reads = [a for g in k.fragments for a in g.arcs if a.kind == "local_read"]
    assert write.info["wavefronts"] == 1
    assert sorted(a.info["wavefronts"] for a in reads) == [2, 32]
    assert k.local_bytes == 4 * 64 * 32


def test_gather_without_data_counts_a_sector_per_lane():
    src = """
    __kernel void gather(__global const int *idx, __global const float *x, __global float *y) {
        int i = get_global_id(0);
        y[i] = x[idx[i]];
    }"""
    k = build(src, "gather", {}, [64], "gather.cl", global_size=[64 * 4])
    x = next(a for g in k.fragments for a in g.arcs if a.kind == "read" and a.info["array"] == "x")
    assert x.info["lines"] == 32 and x.info["sectors"] == 32 and x.info["warps"] == 1
    assert "x" not in k.l1_miss  # no addresses: no L1 figure, every sector a miss


def test_annotate_drops_sampled_addresses_and_returns_miss_shares():
    from gpuprofiler.models.maxplus.graph import Arc

    s = make_sample([64], [64])
    lx = s.ids["lx"]
    arcs = [Arc(0, 1, "read", {"array": "a", "elem_bytes": 4, "_addr": lx, "_mask": np.ones(64, bool)}),
            Arc(0, 1, "read", {"array": "a", "elem_bytes": 4, "_addr": lx + 32, "_mask": np.ones(64, bool)}),
            Arc(1, 2, "write", {"array": "b", "elem_bytes": 4, "_addr": lx * 2, "_mask": lx < 32}),
            Arc(0, 2, "move", {})]
    miss = annotate(arcs, s)
    assert miss == {"a": pytest.approx(12 / 16)}  # sectors 0..7 and 4..11: 12 distinct of 16 requested
    assert [a.info.get("sectors") for a in arcs] == [4, 4, 8, None]
    assert arcs[2].info["warps"] == 0.5 and arcs[2].info["lines"] == 2
    assert all("_addr" not in a.info and "_mask" not in a.info for a in arcs)
