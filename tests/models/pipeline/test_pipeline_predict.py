"""The whole model: occupancy, hardware and latency sources, the interval, extrapolated simulation."""


import pytest
from conftest import POCL_PROFILE, PTX_FIXTURES

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.cfg import build_cfg
from gpuprofiler.models.pipeline.occupancy import normalise_arch, occupancy
from gpuprofiler.models.pipeline.predict import Options, hardware, live_registers, predict
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
from gpuprofiler.models.pipeline.tasks import latency_table, unit_class
from gpuprofiler.models.pipeline.values import Launch
from gpuprofiler.profile.file import Profile, entry, load_profile

FIXTURES = PTX_FIXTURES
POCL = POCL_PROFILE


def module(name):
    return parse_ptx((FIXTURES / f"{name}.ptx").read_text(), name)


def cuda_profile(**instr):
    """A profile as `calibrate` writes it on a CUDA GPU (per-opcode PTX latencies), made up for the test."""
    data = {"schema": "gpuprofiler.profile", "schema_version": 1,
            "device": {"name": "Test H100", "vendor": "NVIDIA", "type": "gpu", "backend": "cuda",
                       "compute_capability": "9.0", "compute_units": 132},
            "clock": {"hz": 1.755e9, "source": "clock64 cycles / CUDA event seconds"},
            "launch": {"per_thread_s": entry(1e-12, "s/thread", "fit"), "fixed_s": entry(2.0e-6, "s", "fit")},
            "memory": {"dram_latency_s": entry(480 / 1.755e9, "s", "chase")},
            "bandwidth": {"read_Bps": entry(3.0e12, "B/s", "read"), "write_Bps": entry(2.8e12, "B/s", "write")},
            "instructions": {k: {"latency_cycles": entry(v, "cycles", "chain"), "status": "ok"}
                             for k, v in instr.items()}}
    return Profile(data)


@pytest.mark.parametrize("arch, threads, regs, smem, blocks, limit", [
    ("sm_90", 256, 32, 0, 8, "threads"),          # 2048 threads / 256
    ("sm_90", 256, 64, 0, 4, "registers"),        # 64 * 32 = 2048 per warp -> 32 warps -> 4 blocks
    ("sm_90", 128, 16, 48 * 1024, 4, "shared_memory"),   # (48 KiB + 1 KiB reserve) into 228 KiB
    ("sm_75", 256, 32, 0, 4, "threads"),          # Turing: 1024 threads per SM
    ("sm_86", 64, 16, 0, 16, "blocks"),           # 1536 / 64 = 24 blocks, but 16 block slots
    ("sm_90", 96, 255, 0, 2, "registers"),        # 255 -> 8192 per warp (256 units) -> 8 warps -> 2 blocks of 3
])
def test_occupancy_limits(arch, threads, regs, smem, blocks, limit):
    occ = occupancy(arch, threads, regs, smem)
    assert occ.blocks_per_sm == blocks and occ.limited_by == limit


def test_occupancy_refuses_impossible_blocks():
    with pytest.raises(UserError, match="shared memory per block"):
        occupancy("sm_75", 256, 32, 70 * 1024)
    with pytest.raises(UserError, match="unknown architecture"):
        normalise_arch("sm_42")
    assert normalise_arch("9.0") == "sm_90" and normalise_arch("86") == "sm_86"


def test_unit_classes():
    e = module("matmul_tiled").entry("matmul_tiled")
    by_op = {i.opcode: unit_class(i) for i in e.instructions}
    assert by_op["fma.rn.f32"] == "fp32" and by_op["ld.global.f32"] == "ldg" and by_op["st.global.f32"] == "stg"
    assert by_op["ld.shared.f32"] == "lds" and by_op["st.shared.f32"] == "sts" and by_op["bar.sync"] == "barrier"
    assert by_op["bra"] == "branch" and by_op["mad.lo.s32"] == "int" and by_op["ld.param.u64"] == "param"


def test_pocl_profile_uses_default_latencies_and_says_so():
    prof = load_profile(POCL)
    table, notes = latency_table("sm_90", prof, 4e9)
    assert table.by_opcode == {} and table.by_base == {}
    assert table.by_class == {**table.by_class, "fp32": 4.0, "lds": 29.0}
    assert any("not a GPU" in n for n in notes)
    hw = hardware(prof, "sm_90")
    assert hw.sms == 2 and hw.sources["sms"] == "profile device.compute_units"
    assert any("not an NVIDIA GPU" in n for n in hw.notes)
    assert hw.load_latency == pytest.approx(prof.get("memory.dram_latency_s") * prof.get("clock.hz"))


def test_cuda_profile_latencies_replace_the_defaults():
    prof = cuda_profile(**{"fma.rn.f32": 4.21, "add.f32": 4.02, "ld.shared.u32": 30.6, "bar.sync": 22.0,
                           "mul.lo.s32": 4.4})
    r = predict(module("matmul_tiled"), None, Launch((8, 8), (16, 16), {0: 128}), prof)
    used = {u["opcode"]: u for u in r["latencies"]["used"]}
    assert used["fma.rn.f32"]["cycles"] == 4.21 and "instructions.fma.rn.f32" in used["fma.rn.f32"]["source"]
    assert used["ld.shared.f32"]["cycles"] == 30.6 and "ld.shared.u32" in used["ld.shared.f32"]["source"]
    assert used["bar.sync"]["source"] == "profile instructions.bar.sync.latency_cycles"
    assert used["mul.lo.s32"]["cycles"] == 4.4
    assert used["mul.wide.s32"]["source"].startswith("default sm_90")
    assert "fma.rn.f32" in r["latencies"]["from_profile"] and "mul.wide.s32" in r["latencies"]["defaults"]
    assert r["hardware"]["sms"] == 132 and r["arch"] == "sm_90"
    assert r["launch_s"] == pytest.approx(2e-6) and r["dispatch_s"] == pytest.approx(1e-12 * 128 * 128)
    assert not any("not an NVIDIA GPU" in w for w in r["warnings"])
    # a profile without per-opcode data: every instruction latency is a default
    bare = cuda_profile()
    r2 = predict(module("vadd"), None, Launch((4,), (256,), {0: 1024}), bare)
    assert all(not u["source"].startswith("profile instructions") for u in r2["latencies"]["used"])
    assert any("no instruction latencies" in w for w in r2["warnings"])


def test_prediction_is_launch_plus_the_largest_bound_and_strided_stores_are_scattered():
    prof = cuda_profile()
    prof.data["memory"]["write_step_s"] = entry(60e-12, "s", "scattered writes")
    prof.data["bandwidth"]["streaming_llc_bytes"] = entry(4 << 16, "B", "a cache smaller than both buffers")
    r = predict(module("transpose_naive"), None, Launch((16, 16), (16, 16), {0: 256}, buffers={1: 4 << 16,
                                                                                                2: 4 << 16}), prof)
    assert r["predicted_s"] == pytest.approx(r["compute_s"] + r["launch_s"] + r["penalty_s"])
    bounds = {k: r[f"{k}_s"] for k in ("compute", "dispatch", "dram", "cache")}
    assert r["predicted_s"] == pytest.approx(r["launch_s"] + max(bounds.values()))
    assert r["limited_by"] == max(bounds, key=bounds.get)
    # the strided store (16 sectors per request where 4 would do) is written back sector by sector
    flow = r["traffic"]
    assert flow["dram_scattered_write_sectors"] == pytest.approx((4 << 16) / 32) and flow["dram_write_bytes"] == 0
    assert flow["dram_read_bytes"] == pytest.approx(4 << 16)  # the coalesced load: its buffer, once
    assert r["dram_s"] == pytest.approx((4 << 16) / flow["dram_bandwidth_Bps"] + (4 << 16) / 32 * 60e-12)
    assert r["uncoalesced"] == 1.0
    v = predict(module("vadd"), None, Launch((256,), (256,), {0: 65536}), prof)
    assert v["uncoalesced"] == 0.0 and v["traffic"]["dram_scattered_write_sectors"] == 0


def test_buffers_that_fit_the_cache_stay_there_between_launches():
    prof = cuda_profile()
    prof.data["bandwidth"]["streaming_llc_bytes"] = entry(3 << 16, "B", "streams up to 192 KiB stay cached")
    args = (module("transpose_naive"), None)
    fits = predict(*args, Launch((16, 16), (16, 16), {0: 256}, buffers={1: 4 << 14, 2: 4 << 14}), prof)
    assert fits["traffic"]["resident_in_cache"] and fits["dram_s"] == 0.0
    assert all(v == 0 for k, v in fits["traffic"].items() if k.startswith("dram_") and k.endswith(("bytes", "sectors")))
    assert fits["traffic"]["cache_bytes"] > 0
    # together past the capacity (each buffer alone would fit): every launch reads them from DRAM again
    big = predict(*args, Launch((16, 16), (16, 16), {0: 256}, buffers={1: 4 << 15, 2: 4 << 15}), prof)
    assert not big["traffic"]["resident_in_cache"] and big["dram_s"] > 0


def test_loads_shared_in_a_block_and_along_a_loop_hit_l1():
    # matmul_naive: A[i*n+k] is walked 4 bytes per pass (a new sector every 8th pass), B[k*n+j] is read by every
    # warp of the block at once; what reaches the cache is a fraction of what the warps request
    prof = cuda_profile()
    n = 256
    prof.data["bandwidth"]["streaming_llc_bytes"] = entry(2 * 4 * n * n, "B", "A and B fit, not with C too")
    r = predict(module("matmul_naive"), None, Launch((n // 16, n // 16), (16, 16), {0: n},
                                                     buffers={1: 4 * n * n, 2: 4 * n * n, 3: 4 * n * n}), prof)
    loads = [a for a in r["accesses"] if a["space"] == "global" and a["kind"] == "load"]
    assert loads and all(a["l1_miss"] < 0.5 for a in loads)
    flow = r["traffic"]
    assert flow["dram_read_bytes"] == pytest.approx(2 * 4 * n * n)   # A and B once each: they fit the cache
    assert flow["cache_bytes"] < 0.25 * sum(2 * a["transactions"] * 32 * a["executions_per_warp"] * n * n / 32
                                            for a in loads)


def test_extrapolated_simulation_is_close_to_the_exact_one():
    prof = cuda_profile()
    exact = predict(module("matmul_tiled"), None, Launch((16, 16), (16, 16), {0: 256}), prof, Options(budget=10**8))
    assert exact["simulation"]["method"] == "exact"
    small = predict(module("matmul_tiled"), None, Launch((16, 16), (16, 16), {0: 256}), prof, Options(budget=5_000))
    assert "linear in the trip count" in small["simulation"]["method"]
    assert small["simulation"]["warp_instructions_simulated"] < exact["simulation"]["warp_instructions_simulated"]
    assert small["cycles"] == pytest.approx(exact["cycles"], rel=0.05)
    pocl = load_profile(POCL)      # 2 "SMs": many waves, extrapolated in blocks
    ex = predict(module("vadd"), None, Launch((512,), (256,), {0: 131072}), pocl, Options(budget=10**8))
    wv = predict(module("vadd"), None, Launch((512,), (256,), {0: 131072}), pocl, Options(budget=20_000))
    assert "linear in blocks" in wv["simulation"]["method"]
    assert wv["cycles"] == pytest.approx(ex["cycles"], rel=0.05)


def test_live_register_estimate_is_in_the_range_ptxas_gives():
    # ptxas -v (sm_90): vadd 12, matmul_naive 32, matmul_tiled 32, transpose_naive 10
    for name, ptxas in [("vadd", 12), ("matmul_naive", 32), ("matmul_tiled", 32), ("transpose_naive", 10)]:
        e = module(name).entry(name)
        est = live_registers(e, build_cfg(e)) + 6
        assert ptxas / 2 <= est <= ptxas * 2, (name, est)


def test_task_lists_too_long_to_build_are_simulated_through_shortened_loops():
    m = module("matmul_naive")
    exact = {n: predict(m, None, Launch((1, 1), (16, 16), {0: n}), None, Options(arch="sm_90", registers=32, budget=2_000_000))
             for n in (4000, 8000)}
    assert all(r["simulation"]["method"] == "exact" for r in exact.values())
    big = predict(m, None, Launch((1, 1), (16, 16), {0: 10**7}), None, Options(arch="sm_90", registers=32, budget=2_000_000))
    assert big["task_list"]["length"] > 5_000_000 and "linear in the trip count" in big["simulation"]["method"]
    slope = (exact[8000]["cycles"] - exact[4000]["cycles"]) / 4000
    assert big["cycles"] == pytest.approx(exact[4000]["cycles"] + slope * (10**7 - 4000), rel=0.01)
