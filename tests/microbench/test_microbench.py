"""Microbenchmarks on the real PoCL device: shapes and honesty rules, with generous physical bounds."""

import json

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import given
from hypothesis import strategies as st

from gpuprofiler.microbench import bandwidth, concurrency, instructions_cl, latency, launch, tlb, transfer
from gpuprofiler.microbench.common import page_grouped_cycle, random_cycle, written_buffer
from gpuprofiler.microbench.instructions_cl import latency_from_times
from gpuprofiler.profile.file import load_profile

pytestmark = pytest.mark.pocl



def test_latency_from_times_exact():
    r = latency_from_times(1.0e-3, 2.0e-3, iters=1000, k=10, clock_hz=1e9, method="m")
    assert r["latency_s"]["value"] == pytest.approx(1e-7)
    assert r["latency_cycles"]["value"] == pytest.approx(100.0)
    assert r["chain_ratio"] == 2.0


def test_latency_from_times_rejects_folded_and_subcycle():
    folded = latency_from_times(1.0e-3, 1.05e-3, 1000, 10, 1e9, "m")
    assert folded["latency_s"]["status"] == "failed" and "does not scale" in folded["latency_s"]["reason"]
    assert folded["latency_s"]["value"] is None
    fast = latency_from_times(1.0e-6, 2.0e-6, 1000, 10, 1e9, "m")  # 0.1 ns at 1 GHz
    assert fast["latency_s"]["status"] == "failed" and "below one clock cycle" in fast["latency_s"]["reason"]


@pytest.mark.parametrize("make", [random_cycle, page_grouped_cycle])
def test_cycles_visit_every_line_once(make):
    lines = 64 * 37
    nxt = make(lines, np.random.default_rng(1), 16)
    seen, j = set(), 0
    for _ in range(lines):
        assert j % 16 == 0 and j not in seen
        seen.add(j)
        j = int(nxt[j])
    assert j == 0 and len(seen) == lines


def test_fma_chain_doubles_and_no_subcycle(pocl):
    clock = instructions_cl.cpu_clock(pocl, quick=True)
    assert 0.5e9 < clock["hz"] < 7e9  # a CPU core clock
    res = instructions_cl.measure(pocl, quick=True, clock_hz=clock["hz"])
    fma = res["float_fma"]
    assert fma["status"] == "ok" and 1.6 <= fma["chain_ratio"] <= 2.4
    for name, r in res.items():
        cycles = (r.get("latency_cycles") or {}).get("value")
        assert cycles is None or cycles >= 1.0, name
        if r.get("status") == "failed":
            assert r["latency_s"]["value"] is None and r["latency_s"]["reason"]


def test_launch_metrics_are_named_and_ordered(pocl):
    r = launch.measure(pocl, quick=True)
    for key in ("fixed_s", "per_thread_s", "event_s", "round_trip_s", "back_to_back_s", "queue_to_start_s"):
        assert key in r
    assert r["event_s"]["value"] > 0
    # a host round trip contains the kernel it waits for
    assert r["round_trip_s"]["value"] > r["event_s"]["value"]
    assert max(p["threads"] for p in r["points"]) >= 2**24


def test_launch_figures_measure_launches_not_python(pocl):
    """Method version 2: back-to-back from device timestamps around launches queued behind a user event,
    round trip from a tight loop of prepared launches; both below the old figures' Python overhead."""
    r = launch.measure(pocl, quick=True)
    b2b, trip = r["back_to_back_s"], r["round_trip_s"]
    for e in (b2b, trip):
        assert e["status"] == "ok" and e["method_version"] == 2 and e["interval"][0] <= e["value"] <= e["interval"][1]
        assert e["n"] == 5 * launch.ROUNDS[True]
    assert "profiling START of the first launch to END of the last" in b2b["method"]
    assert "arguments marshalled once" in trip["method"] and "no hold kernel" in trip["method"]
    # the device runs launches back to back faster than the host waits for each one
    assert 0 < b2b["value"] < trip["value"] < 1e-3
    assert all("engine_host_s" in p and "round_trip_s" not in p for p in r["points"])


def test_round_trip_loop_is_not_the_engine(pocl):
    """The tight loop of prepared launch + finish pairs costs less per launch than the timing engine's
    timed launch (events, argument setting, bookkeeping) that method version 1 used."""
    from gpuprofiler.measure.engine import time_launch
    from gpuprofiler.measure.policy import fixed
    from gpuprofiler.microbench.source import build

    kernel = build(pocl, launch.EMPTY, "empty")
    arg = [np.int32(0)]
    # three alternating blocks, median of each: on a shared machine a single comparison of the two crossed in one
    # run of four (an engine launch's host time alone can dip to 17 us), so the bound is the blocks' medians, with
    # room for that noise
    loops, engines = [], []
    for _ in range(3):
        loops.append(np.median(launch.round_trip_samples(pocl, kernel, arg, launches=50, rounds=5)))
        engines.append(np.median(time_launch(pocl, kernel, (1,), (1,), arg, fixed(100, warmup=5)).host_s))
    assert 0 < np.median(loops) < 1.25 * np.median(engines)


def test_bandwidth_kernels_compile_for_both_apis(pocl, tmp_path):
    for kind in bandwidth.KINDS:
        for width in (1, 4, 16):
            src = bandwidth.kernel_source(kind, "opencl", width)
            assert f"bw_{kind}" in src
        assert "make_float4" in bandwidth.kernel_source("write", "cuda", 4)


def test_a_cpu_streams_its_bandwidth_kernels_contiguously(pocl):
    """On a CPU each work-item moves one vector, consecutive work-items consecutive vectors (what PoCL vectorises
    a kernel written per element into); a GPU keeps its sweeps. Each kernel moves its kind's bytes, checked on the
    device: the copy copies, the triad computes b + s * c, the write writes."""
    assert bandwidth.layout("cpu") == "contiguous" and bandwidth.layout("gpu") == "strided"
    assert "PER" not in bandwidth.kernel_source("copy", "opencl", 4, "contiguous")
    assert "float8 h8 = acc.lo + acc.hi" in bandwidth.kernel_source("read", "opencl", 16, "contiguous")
    n = 1 << 16
    rng = np.random.default_rng(4)
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    bufs = [pocl.to_device(x)[0] for x in (a, b, c)]

    def read(buf):
        got = np.empty_like(a)
        pocl.from_device(buf, got)
        pocl.finish()
        return got

    for width in (1, 4, 16):
        items = n // width
        pocl.launch(bandwidth._kernel(pocl, "copy", width), (items,), (64,), [bufs[0], bufs[1]])
        pocl.finish()
        assert np.array_equal(read(bufs[1]), a)
        pocl.launch(bandwidth._kernel(pocl, "triad", width), (items,), (64,), [bufs[1], bufs[2], bufs[0],
                                                                              np.float32(3.0)])
        pocl.finish()
        assert np.allclose(read(bufs[1]), c + 3.0 * a, rtol=1e-6)
        pocl.to_device(a, bufs[1])
        pocl.launch(bandwidth._kernel(pocl, "write", width), (items,), (64,), [bufs[1], np.float32(1.5)])
        pocl.finish()
        assert np.all(read(bufs[1]) == 1.5)
        pocl.to_device(b, bufs[1])


def test_a_cpu_reads_a_prefix_that_fits_its_caches_faster_than_memory(pocl):
    """The working-set curve sees the caches: repeated contiguous reads of a few MiB run faster than of the whole
    array (on any CPU whose last level holds a few MiB)."""
    count = 64 << 20
    buf = pocl.to_device(np.random.default_rng(1).random(count, dtype=np.float32))[0]
    out = pocl.alloc(4 << 10)
    got = bandwidth.working_set_curve(pocl, buf, out, count, True, None)
    curve = got["working_set_curve"]
    assert [p["bytes"] for p in curve] == [1 << (20 + k) for k in range(len(curve))]
    # generous: other tenants share this VM's last level (its in-cache reads ran 67-80 GB/s against 35-57 from
    # memory, and once 41 against 37)
    assert max(p["Bps"] for p in curve[:5]) > 1.1 * curve[-1]["Bps"]
    assert "contiguous" in got["streaming_llc_bytes"]["method"]


def test_the_streaming_knee_is_no_larger_than_a_cache_the_device_has():
    """Run S's curve (a Zen 4 VM whose driver reports 32 MiB): 64 MiB read 1.32x faster than 512 MiB, a burst of
    the memory's fast state, not a cache; with the reported size the knee is 32 MiB, without it 64 MiB."""
    gbps = [71.8, 77.2, 79.1, 76.0, 77.4, 59.2, 42.5, 33.7, 33.4, 32.2]
    curve = [{"bytes": 1 << (20 + k), "Bps": v * 1e9} for k, v in enumerate(gbps)]
    assert bandwidth.streaming_knee(curve) == 64 << 20
    assert bandwidth.streaming_knee(curve, reported=32 << 20) == 32 << 20
    assert bandwidth.streaming_knee(curve, reported=(32 << 20) * 1.25 + 1) == 32 << 20
    assert bandwidth.streaming_knee(curve, reported=1 << 19) is None  # nothing small enough is a candidate
    flat = [{"bytes": 1 << (20 + k), "Bps": 30e9} for k in range(5)]
    assert bandwidth.streaming_knee(flat, reported=32 << 20) is None


def test_a_gathered_read_costs_more_than_a_near_one(pocl):
    """Random reads over 64 MiB against the same reads over 16 KiB, in two blocks: a positive cost per read, below a
    microsecond (generous: a DRAM miss on any device), with its interval around it; the far reads were the slower,
    and the figure takes the fastest far run of either block."""
    count = 16 << 20
    buf = pocl.to_device(np.random.default_rng(1).random(count, dtype=np.float32))[0]
    out = pocl.alloc(4 << 20)
    cached = 1 << 20  # 4 MiB: past any core's private levels (a 256 KiB one assumed for the share)
    blocks = [bandwidth.gather_times(pocl, buf, out, count, True, cached=cached) for _ in range(2)]
    got = bandwidth.gather_cost(blocks, 0, None)["gather_s"]
    assert got["status"] == "ok", got
    lo, hi = got["interval"]
    assert 0 <= lo <= got["value"] <= hi and 0 < got["value"] < 1e-6
    assert got["far_s"] > got["near_s"] and got["span_bytes"] == 64 << 20
    assert got["far_s"] == min(got["far_blocks_s"]) and len(got["far_blocks_s"]) == 2
    assert got["value"] == pytest.approx((got["far_s"] - got["near_s"]) / blocks[0][2], rel=1e-12)
    # the same reads over 4 MiB, which a last-level cache serves: slower than near, faster than far
    llc = bandwidth.gather_llc_cost(blocks, cached, 256 << 10, None)["gather_llc_s"]
    assert llc["status"] == "ok", llc
    assert got["near_s"] < llc["cached_s"] < got["far_s"] and llc["span_bytes"] == 4 << 20
    assert llc["value"] == pytest.approx((llc["cached_s"] - llc["near_s"]) / blocks[0][2] / 0.9375, rel=1e-12)
    assert 0 <= llc["interval"][0] <= llc["value"] <= llc["interval"][1]


@given(st.floats(1e4, 1e8), st.floats(1.0, 1e3))
def test_the_cached_gather_span_lies_between_the_private_level_and_the_last(private, ratio):
    """A power of two of bytes from twice the private level to half the last level, else none; 4 MiB between a
    1 MiB L2 and a 14 MiB or 32 MiB L3 (the Zen 4 VM's)."""
    span = bandwidth.llc_span(private, private * ratio, 1 << 40)
    powers = [e for e in range(64) if 2 * private <= 2**e <= private * ratio / 2]
    if not powers:
        assert span is None
    else:
        assert span is not None and (4 * span) in [2**e for e in powers]


def test_the_cached_gather_span_of_a_zen4_vm():
    assert bandwidth.llc_span(1 << 20, 14195198, 1 << 28) == 1 << 20
    assert bandwidth.llc_span(1 << 20, 32 << 20, 1 << 28) == 1 << 20  # 2^22.5: the smaller of the two nearest
    assert bandwidth.llc_span(1 << 20, 3 << 20, 1 << 28) is None
    assert bandwidth.llc_span(None, 32 << 20, 1 << 28) is None
    assert bandwidth.llc_span(1 << 20, 32 << 20, 1 << 19) is None  # the array is smaller than the span


def test_overlap_curve_on_a_cpu(pocl):
    """A core overlaps several short chains of consecutive work-items and about one long chain: the time per
    operation falls as chains shorten; the longest chains are the reference (1 work-item at once)."""
    kernel = concurrency.build(pocl, concurrency.SOURCE, "busy")
    points, method = concurrency.overlap_curve(pocl, kernel, quick=True)
    ops = [p["ops"] for p in points]
    assert ops == sorted(ops) and ops[0] == 8 and ops[-1] == 4096 and "overlap(L)" in method
    assert sorted(p["overlap"] for p in points[-3:])[1] == pytest.approx(1.0, rel=1e-12)
    assert all(p["seconds"] > 0 and p["op_s"] > 0 for p in points)
    # the same physics on any CPU: short chains overlap (a window of tens of operations), long ones do not
    assert points[0]["overlap"] > 2.0 and all(0.75 < p["overlap"] < 1.3 for p in points[-3:])
    # an operation of the longest chain takes at least a cycle of the dependent FMA chain, and not ten
    assert 1e-10 < points[-1]["op_s"] < 1e-8


def test_a_cpu_core_follows_a_limited_number_of_streams(pocl):
    """Reading K rows at once per work-group against one row with as many work-items: the curve has every count,
    each ratio positive; where the capacity is found, every count up to it costs at most STREAM_RATIO times one
    row, and the next one more (a capacity, not a count that happened to pass)."""
    count = 64 << 20
    buf = pocl.to_device(np.random.default_rng(2).random(count, dtype=np.float32))[0]
    out = pocl.alloc(4 << 10)
    got = bandwidth.stream_capacity(pocl, buf, out, count, True, None)
    curve = got["stream_curve"]
    assert [p["streams"] for p in curve] == list(bandwidth.STREAM_COUNTS)
    assert all(p["tile_s"] > 0 and p["row_s"] > 0 and p["ratio"] > 0 for p in curve)
    assert curve[0]["ratio"] == pytest.approx(1.0, rel=1e-12)  # the fewest streams are the reference
    k = got["streams"]["value"]
    assert got["streams"]["status"] == "ok" and k >= bandwidth.STREAM_COUNTS[0]
    assert all(p["ratio"] <= bandwidth.STREAM_RATIO for p in curve if p["streams"] <= k)
    beyond = [p for p in curve if p["streams"] > k]
    assert not beyond or beyond[0]["ratio"] > bandwidth.STREAM_RATIO


def test_loop_free_chains_run_in_vector_lanes_on_a_cpu(pocl):
    """Straight-line chains are vectorised across work-items: past the shortest, more of them at once than the
    looped chains of the overlap curve ever are (8 operations: 6-7 looped on the VMs here)."""
    kernel = concurrency.build(pocl, concurrency.SOURCE, "busy")
    looped, _ = concurrency.overlap_curve(pocl, kernel, quick=True)
    points, method = concurrency.loopfree_curve(pocl, kernel, quick=True)
    assert [p["ops"] for p in points] == list(concurrency.LOOPFREE_OPS) and "without a loop" in method
    assert "same rounds" in method
    assert all(p["seconds"] > 0 and p["overlap"] > 0 for p in points)
    assert max(p["overlap"] for p in points) > 1.5 * looped[0]["overlap"]


def test_the_guarded_stream_is_timed_beside_the_unguarded_one_on_a_cpu(pocl):
    """The figures max-plus prices a guarded region with, on buffers a last-level cache holds and past it. Whether
    the guard costs the lanes depends on the compiler (PoCL 3.0 on AVX2: 3-4x; masked AVX-512 lanes: about 1x);
    either way the guarded stream, which does the plain one's work and a compare, is not much faster than it."""
    got = concurrency.guarded_items(pocl, quick=True)
    assert set(got) == {"unguarded_item_s", "guarded_item_s", "guard_skip_item_s", "unguarded_far_item_s",
                        "guarded_far_item_s"}
    assert all(e["status"] == "ok" and e["n"] >= 3 and "alternation" in e["method"] for e in got.values())
    assert got["guarded_item_s"]["value"] > 0.8 * got["unguarded_item_s"]["value"]
    assert got["guarded_far_item_s"]["value"] > 0.8 * got["unguarded_far_item_s"]["value"]
    assert "128 MiB a buffer" in got["guarded_far_item_s"]["method"]


@pytest.mark.parametrize("dtype", [np.uint32, np.float32])
def test_a_written_buffer_holds_ones_on_every_page(pocl, dtype):
    """The streams' buffers hold data, as a kernel's do: a never-written buffer's reads may all come from one
    zero page."""
    nbytes = 3 * 4096 + 8
    back = np.zeros(nbytes // 4, dtype)
    pocl.from_device(written_buffer(pocl, nbytes, dtype), back)
    assert back.dtype == dtype and np.array_equal(back, np.ones(nbytes // 4, dtype))


def test_a_region_updated_in_place_costs_a_cpu_no_less_than_one_it_may_run_in_lanes(pocl):
    """The barrier before a region a CPU runs a work-item at a time (an in-place update at another work-item's
    element) costs no less than before the region the vectorisers can take: 3.4x more on the Zen 4 VM's AVX-512
    PoCL 3.1 (69 against 20 ns), the same on the Zen 3 VM's AVX2 PoCL 3.0 (37.8 against 38.8), which runs that
    region, a read at ``(l + 1) % LSIZE``, a work-item at a time too."""
    out = pocl.alloc(4 * 1024)
    policy = instructions_cl.bench(True, 0.3, 0.1)

    def measured(*step):
        """A block whose chain scaled: on a shared VM a slow spell inside one block fails its k / 2k check (a
        failed measurement, not a figure), as calibrate's spread blocks allow for; up to three tries."""
        for _ in range(3):
            got = instructions_cl._barrier(pocl, policy, 3e9, out, True, *step)
            if got["status"] == "ok":
                return got
        return got

    vector, scalar = measured(), measured(instructions_cl.SCALAR_STEP)
    assert vector["status"] == scalar["status"] == "ok", (vector, scalar)
    assert scalar["latency_s"]["value"] > 0.7 * vector["latency_s"]["value"]
    assert "in place" in scalar["latency_s"]["method"]


def test_the_barrier_figure_is_its_fastest_block():
    """Blocks spread over the section: a slow spell that held one block (its fastest runs too) is not the figure;
    blocks that measured nothing are listed as such."""
    def block(ns, ok=True):
        if not ok:
            return {"status": "failed", "latency_s": {"status": "failed", "reason": "chain does not scale"}}
        return {"status": "ok", "latency_s": {"value": ns * 1e-9, "unit": "s"}, "chain_ratio": 2.0}

    got = instructions_cl.fastest_block([block(108.3), block(69.2), block(0, ok=False)])
    assert got["latency_s"]["value"] == pytest.approx(69.2e-9) and got["status"] == "ok"
    assert got["blocks_s"] == [pytest.approx(108.3e-9), pytest.approx(69.2e-9), None]
    failed = instructions_cl.fastest_block([block(0, ok=False), block(0, ok=False)])
    assert failed["status"] == "failed" and failed["blocks_s"] == [None, None]


def test_transfer_quick(pocl):
    r = transfer.measure(pocl, quick=True)
    assert r["htod_Bps"]["value"] > 1e8 and r["dtoh_Bps"]["value"] > 1e8
    assert r["latency_s"]["value"] > 0


@pytest.mark.slow
def test_calibrate_quick_writes_the_profile(tmp_path):
    out = tmp_path / "profile.json"
    done = run_cli("calibrate", "--quick", "-o", out, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    p = load_profile(out)
    # the paper's launch fit (intercept over 1..2^24 threads) can come out negative on a loaded CPU: then it is
    # stored as a failed measurement with its reason, never as a value
    fixed = p.data["launch"]["fixed_s"]
    assert (fixed.get("status", "ok") == "ok" and fixed["value"] > 0) or (
        fixed["status"] == "failed" and "intercept" in fixed["reason"]), fixed
    for key in ("launch.event_s", "launch.per_thread_s", "memory.read_s", "memory.write_s", "memory.read_step_s",
                "memory.write_step_s", "memory.cached_read_s", "bandwidth.read_Bps", "bandwidth.write_Bps",
                "bandwidth.copy_Bps", "bandwidth.gather_s", "concurrency.work_items"):
        assert p.get(key) > 0, key
    assert len(p.data["concurrency"]["overlap_curve"]) == len(concurrency.OVERLAP_ITERS)
    assert len(p.data["concurrency"]["loopfree_curve"]) == len(concurrency.LOOPFREE_OPS)
    assert p.get("instructions.barrier_scalar.latency_s") > 0 and p.data["bandwidth"]["layout"] == "contiguous"
    for key in ("barrier", "barrier_scalar"):  # the fastest of the blocks spread over the section
        got = p.data["instructions"][key]
        assert len(got["blocks_s"]) == instructions_cl.BARRIER_BLOCKS
        assert got["latency_s"]["value"] == min(v for v in got["blocks_s"] if v is not None)
        assert p.data["method_versions"][f"instructions.{key}"] == 2
    assert len(p.data["bandwidth"]["stream_curve"]) == len(bandwidth.STREAM_COUNTS)
    assert p.data["method_versions"]["bandwidth.by_width"] == 2
    assert p.data["caches"] and all(c["size_bytes"] > 0 and c["latency_s"] > 0 for c in p.data["caches"])
    assert p.get("instructions.float_fma.latency_cycles") >= 1
    assert p.data["device"]["id"] and p.data["clock"]["hz"] > 0
    assert (tmp_path / "profile_latency.png").stat().st_size > 1000
    shown = run_cli("profile", "show", out, cwd=tmp_path)
    assert shown.returncode == 0 and "bandwidth" in shown.stdout and "L1:" in shown.stdout


@pytest.mark.slow
def test_calibrate_only_and_bad_section(tmp_path):
    out = tmp_path / "p.json"
    done = run_cli("calibrate", "--quick", "--only", "launch,transfer", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert "launch" in data and "transfer" in data and "bandwidth" not in data
    bad = run_cli("calibrate", "--only", "launch,nonsense", cwd=tmp_path)
    assert bad.returncode == 2 and "nonsense" in bad.stderr


@pytest.mark.pocl
def test_each_sections_kernels_compile_as_one_program():
    """A fresh machine compiles every kernel once, a program per benchmark (a PoCL build costs ~0.15 s there
    whatever its size): the bandwidth kernels with the gather and the streams' rows, every op's chains and
    throughput kernel, the barrier chains, the concurrency kernels."""
    from conftest import pocl_id

    from gpuprofiler.device import open_backend
    from gpuprofiler.microbench import bandwidth, concurrency, instructions_cl, source

    with open_backend(pocl_id()) as pocl:
        _compile_each_once(pocl, bandwidth, instructions_cl)
        before = len(pocl._programs)
        bandwidth.build(pocl, bandwidth._program(pocl), "rows", {"PER": bandwidth.PER})
        assert len(pocl._programs) == before
        for kind in ("vector", "scalar"):
            for k in (instructions_cl.BARRIER_STEPS[kind], 2 * instructions_cl.BARRIER_STEPS[kind]):
                pocl.compile(instructions_cl.barrier_source(), f"bar_{kind}_{k}", {"LSIZE": 64})
        assert len(pocl._programs) == before + 1
        names = ["busy", "plain", "guarded", *(f"chain{ops}" for ops in concurrency.LOOPFREE_OPS)]
        assert len({source.build(pocl, concurrency.program(), n).name for n in names}) == len(names)
        assert len(pocl._programs) == before + 2


def test_every_opencl_op_records_its_method_version():
    """The throughput kernels' unrolling changed with method version 2 of every op's entry: the profile's list
    of ops, which cannot import the benchmarks, names each of them."""
    from gpuprofiler.profile.file import method_version_of

    assert {op: method_version_of(f"instructions.{op}") for op in instructions_cl.OPS} == {
        op: 2 for op in instructions_cl.OPS}


def _compile_each_once(pocl, bandwidth, instructions_cl):
    before = len(pocl._programs)
    kernels = [bandwidth._kernel(pocl, kind, width) for kind in bandwidth.KINDS
               for width in bandwidth.VECTOR_WIDTHS["opencl"]]
    assert len({k.name for k in kernels}) == 20 and len(pocl._programs) == before + 1
    ops = [n for n, op in instructions_cl.OPS.items() if op.ctype != "double" or pocl.info.extra.get("double")]
    k = instructions_cl.LATENCY_UNROLL
    got = [instructions_cl.compile_op(pocl, n, "lat", k, kk) for n in ops for kk in (k, 2 * k)]
    got += [instructions_cl.compile_op(pocl, n, "thr", k) for n in ops]
    assert len({k.name for k in got}) == 3 * len(ops) and len(pocl._programs) == before + 2


def test_chase_steps_cover_the_whole_cycle():
    """A chase shorter than its cycle finds part of it cold, the short chase more than the long one: the
    difference then undercounts (the old curve's latencies below zero at 8-16 MiB)."""
    for lines in (2, 100, 1 << 12, 1 << 17, 1 << 20, 1 << 22):
        for quick in (True, False):
            assert latency.chase_steps(lines, quick) >= lines
    assert latency.chase_steps(1 << 10, True) == 1 << 14 and latency.chase_steps(1 << 13, False) == 1 << 15


def test_latency_curve_on_a_cpu(pocl):
    """The chase's per-access latency rises with the working set, never below zero; the sizes near the (given)
    last-level cache are measured in several passes whose samples are pooled."""
    llc = 4 << 20
    r = latency.measure(pocl, quick=True, llc_bytes=llc, clock_hz=1e9)
    curve = r["latency_curve"]
    assert [p["bytes"] for p in curve] == sorted(p["bytes"] for p in curve) and curve[-1]["bytes"] == 2 * llc
    assert all(p["latency_s"] > 0 and p["steps"] * 64 >= p["bytes"] for p in curve)
    assert {p["bytes"] for p in curve if p["passes"] == latency.KNEE_PASSES} == {1 << k for k in range(18, 22)}
    assert all(p["passes"] == 1 for p in curve if not llc // latency.KNEE_LOW <= p["bytes"] < llc)
    # a line from past the private caches takes longer than one from the first level, by a wide margin
    assert curve[-1]["latency_s"] > 1.5 * curve[0]["latency_s"]


def test_tlb_reach_and_cost_from_the_curve():
    """The cost is the spread loads' extra at the largest count; the reach where the extra first reaches half of it,
    log-interpolated between the counts around that crossing."""
    pts = [{"pages": p, "packed_s": 0.3e-9, "spread_s": 0.3e-9 + x} for p, x in
           [(64, 0.0), (128, 0.05e-9), (256, 0.05e-9), (512, 1.05e-9), (1024, 2.0e-9)]]
    reach, cost = tlb.reach_and_cost(pts)
    assert cost == pytest.approx(2.0e-9)
    assert reach == pytest.approx(256 * 2 ** 0.95, rel=1e-9)  # half (1e-9) at 0.95 of the way from 256 to 512
    never = [{"pages": p, "packed_s": 0.3e-9, "spread_s": 0.3e-9 + x} for p, x in [(64, 0.0), (128, 0.0), (256, 1e-9)]]
    assert tlb.reach_and_cost(never) == (None, pytest.approx(1e-9))  # the knee is past the last count but one
    flat = [{"pages": p, "packed_s": 0.3e-9, "spread_s": 0.29e-9} for p in (64, 128)]
    assert tlb.reach_and_cost(flat) == (None, None)


def test_tlb_layouts_keep_the_line_count_and_spread_one_line_per_page():
    words = tlb.layouts(256, np.random.default_rng(0))
    packed, spread = words["packed"], words["spread"]
    assert len(packed) == len(spread) == 256 and len(set(packed)) == len(set(spread)) == 256
    assert sorted(packed // 16) == list(range(256))  # 256 consecutive lines: 4 pages
    assert sorted(spread // 1024) == list(range(256)) and all(w % 16 == 0 for w in spread)


def test_tlb_on_a_cpu(pocl, monkeypatch):
    """Past the TLB's reach every load walks the page table: spread loads cost more than packed ones there, and a
    few pages cost a small part of that. 64 pages nearly fill a Zen 4 core's 72-entry L1 DTLB, so some of their
    loads find their page in the L2 TLB instead (0.43-0.54 ns spread against 0.38-0.43 packed over six runs, once
    0.79 against 0.39 in CI): a fraction of a walk, not a walk. The pages read were written first (a buffer only
    ever read may map one zero page: half the walks' cost on a Zen 4 VM)."""
    written = []
    to_device = pocl.to_device
    monkeypatch.setattr(pocl, "to_device", lambda array, *a, **k: (written.append(array.nbytes), to_device(array, *a, **k))[1])
    r = tlb.measure(pocl, quick=True)
    assert tlb.PAGES[-1] * tlb.PAGE_BYTES in written
    curve = r["curve"]
    assert [p["pages"] for p in curve] == list(tlb.PAGES)
    few = curve[0]["spread_s"] - curve[0]["packed_s"]
    assert few < 0.5 * (curve[-1]["spread_s"] - curve[-1]["packed_s"])
    assert curve[-1]["spread_s"] > 1.5 * curve[-1]["packed_s"]  # 16384 pages (64 MiB) outreach any x86 TLB
    assert r["reach_pages"]["status"] == "ok" and 64 <= r["reach_pages"]["value"] < tlb.PAGES[-1]
    assert r["miss_s"]["status"] == "ok" and 1e-10 < r["miss_s"]["value"] < 1e-7
