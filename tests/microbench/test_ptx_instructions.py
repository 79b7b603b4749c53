"""PTX instruction microbenchmarks: the cycle arithmetic and pass/fail rules (pure), the generated
sources (compiled with nvcc and ptxas where the CUDA toolkit is installed; SASS checked where
nvdisasm or cuobjdump is), and a quick run on a real CUDA GPU where pycuda and one exist.
"""

import importlib.util
import math
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuprofiler.microbench import ptx_instructions as ptx

REQUIRED = [
    "add.f32", "add.f64", "add.s32", "add.u32", "sub.f32", "sub.f64", "sub.s32", "sub.u32",
    "mul.f32", "mul.f64", "mul.lo.s32", "mul.lo.u32", "fma.rn.f32", "fma.rn.f64",
    "mad.lo.s32", "mad.lo.u32", "mad.rn.f32",
    "div.rn.f32", "div.rn.f64", "div.s32", "div.u32",
    "rcp.approx.ftz.f32", "sqrt.approx.f32", "sin.approx.f32", "ex2.approx.f32", "lg2.approx.f32",
    "setp.lt.f32", "selp.b32", "shl.b32", "shr.b32", "shr.u32", "and.b32", "or.b32", "xor.b32",
    "shfl.sync.idx.b32", "ld.shared.u32", "ld.global.ca.u64", "ld.global.cg.u64", "ld.global.cv.u64",
    "atom.global.add.u32", "bar.sync",
]


# --------------------------------------------------------------------------------------------
# pure rules
# --------------------------------------------------------------------------------------------

def test_latency_exact_on_hand_made_cycles():
    iters, k, overhead = 256, 16, 137
    c_k = iters * (k * 4) + overhead          # 4 cycles per instance plus a fixed cost
    c_2k = iters * (2 * k * 4) + overhead
    e = ptx.latency_from_cycles(c_k, c_2k, iters, k)
    assert e["status"] == "ok" and e["unit"] == "cycles"
    assert e["value"] == 4.0
    assert e["interval"] == [4.0, 4.0]
    assert e["chain_ratio"] == pytest.approx(c_2k / c_k)


def test_latency_uses_fastest_runs_and_spread():
    iters, k = 100, 10
    e = ptx.latency_from_cycles([4100, 4000, 4050], [8200, 8000, 8400], iters, k)
    assert e["value"] == pytest.approx((8000 - 4000) / 1000)       # 4.0 from the minima
    assert e["interval"] == pytest.approx([4.0, 4.35])              # per-run (4.1, 4.0, 4.35)
    assert e["n"] == 3


@pytest.mark.parametrize("c_k, c_2k, shown", [(1000, 1100, "1.1"), (1000, 3000, "3"), (1000, 1000, "1")])
def test_chain_that_does_not_scale_fails(c_k, c_2k, shown):
    e = ptx.latency_from_cycles(c_k, c_2k, 64, 16)
    assert e["status"] == "failed" and e["value"] is None
    assert e["reason"] == f"chain does not scale (ratio {shown}): dead code or loop overhead"


def test_zero_cycles_fails_without_infinities():
    e = ptx.latency_from_cycles(0, 0, 64, 16)
    assert e["status"] == "failed" and e["value"] is None and e["chain_ratio"] is None
    assert "chain does not scale (ratio undefined)" in e["reason"]


def test_sub_cycle_latency_fails():
    iters, k = 256, 16
    c_k, c_2k = 2000, 3600                                          # ratio 1.8 but 1600/4096 cycles
    e = ptx.latency_from_cycles(c_k, c_2k, iters, k)
    assert e["status"] == "failed" and e["value"] is None
    assert e["reason"] == "latency below one cycle is impossible (0.391 cycles)"


def test_ratio_bounds_are_inclusive():
    assert ptx.latency_from_cycles(1000, 1600, 10, 10)["status"] == "ok"     # 6 cycles, ratio 1.6
    assert ptx.latency_from_cycles(1000, 2400, 10, 10)["status"] == "ok"     # ratio 2.4
    assert ptx.latency_from_cycles(1000, 2401, 10, 10)["status"] == "failed"


def test_latency_seconds_uses_measured_clock():
    cyc = ptx.latency_from_cycles([4000, 4100], [8000, 8100], 100, 10)
    s = ptx.latency_seconds(cyc, 2e9)
    assert s["status"] == "ok" and s["unit"] == "s" and s["value"] == pytest.approx(2e-9)
    assert s["interval"] == pytest.approx([2e-9, 2e-9])
    assert ptx.latency_seconds(cyc, None)["status"] == "failed"
    bad = ptx.latency_from_cycles(1000, 1000, 10, 10)
    assert ptx.latency_seconds(bad, 2e9)["reason"] == bad["reason"]


def test_throughput_from_times():
    e = ptx.throughput_from_times(0.0011, 0.0021, 1e9, 2e9, clock_hz=1e9, sms=10)
    assert e["status"] == "ok" and e["unit"] == "ops/s"
    assert e["value"] == pytest.approx(1e12)
    assert e["ops_per_cycle_per_sm"] == pytest.approx(100.0)
    assert ptx.throughput_from_times(0.001, 0.0011, 1e9, 2e9)["status"] == "failed"     # does not scale
    over = ptx.throughput_from_times(0.0011, 0.0021, 1e9, 2e9, clock_hz=1e9, sms=1)   # 1000 ops/cycle/SM
    assert over["status"] == "failed" and "issue rate" in over["reason"]


def test_clock_from_two_runs():
    assert ptx.clock_hz_from(1.0e6, 0.001, 3.0e6, 0.002) == pytest.approx(2e9)
    assert ptx.clock_hz_from(1.0e6, 0.002, 3.0e6, 0.001) is None      # time went backwards
    assert ptx.clock_hz_from(1.0, 0.001, 2.0, 0.002) is None          # 1 kHz is no SM clock


# --------------------------------------------------------------------------------------------
# the op table and the generated sources
# --------------------------------------------------------------------------------------------

def test_every_required_op_is_in_ops():
    assert not [op for op in REQUIRED if op not in ptx.OPS]
    for name, spec in ptx.OPS.items():
        assert spec.name == name and spec.sass and spec.body.split()[0] == name


def test_sources_have_distinct_kernels_and_full_chains():
    sources = ptx.all_sources()
    assert len(sources) == 1 + 2 * len(ptx.OPS)
    names = re.findall(r'extern "C" __global__ void (\w+)\(', ptx.combined_source())
    assert len(names) == len(set(names))
    for op, spec in ptx.OPS.items():
        for u in (spec.unroll, 2 * spec.unroll):
            src = sources[f"{op}@{u}"]
            for kernel in ptx.kernel_names(op, u).values():
                assert f"void {kernel}(" in src
            lat = src.split("void tp_")[0]
            assert lat.count(op + " " if op != "bar.sync" else "bar.sync 0") == u   # one chain of u links
            assert "clock64()" in lat and "sentinel" in lat


def test_measure_needs_cuda():
    out = ptx.measure(SimpleNamespace(kind="opencl"), quick=True, ops=["fma.rn.f32", "bar.sync"])
    assert out["clock"]["hz"] is None
    for res in out["instructions"].values():
        assert res["latency_cycles"]["status"] == "failed" and res["latency_cycles"]["value"] is None
        assert res["latency_cycles"]["reason"] == "inline PTX needs the CUDA backend"


# --------------------------------------------------------------------------------------------
# compile with nvcc (PTX) and ptxas (inline asm is only parsed there); SASS where a disassembler is
# --------------------------------------------------------------------------------------------

def _ptxas() -> str | None:
    nvcc = shutil.which("nvcc")
    found = shutil.which("ptxas")
    if found:
        return found
    if nvcc:
        for cand in (Path(nvcc).resolve().parent / "ptxas",):
            if cand.exists():
                return str(cand)
    return None


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """All sources as one translation unit: PTX from nvcc, a cubin from ptxas (one run each)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    tmp = tmp_path_factory.mktemp("ptx")
    cu, ptx_file, cubin = tmp / "all.cu", tmp / "all.ptx", tmp / "all.cubin"
    cu.write_text(ptx.combined_source())
    res = subprocess.run(["nvcc", "--ptx", "-arch=sm_90", "-o", str(ptx_file), str(cu)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    ptxas = _ptxas()
    cubin_ok = None
    if ptxas:
        res = subprocess.run([ptxas, "-arch=sm_90", "-o", str(cubin), str(ptx_file)],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr                  # inline-asm syntax is checked here
        cubin_ok = cubin
    return SimpleNamespace(ptx=ptx_file.read_text(), cubin=cubin_ok)


def _ptx_functions(text: str) -> dict[str, str]:
    parts = re.split(r"\.visible \.entry (\w+)\(", text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.nvcc
def test_every_source_compiles(built):
    funcs = _ptx_functions(built.ptx)
    for op in ptx.OPS:
        for u in (ptx.OPS[op].unroll, 2 * ptx.OPS[op].unroll):
            for kernel in ptx.kernel_names(op, u).values():
                assert kernel in funcs, kernel
    assert "clock_probe" in funcs


@pytest.mark.parametrize("op", sorted(ptx.OPS))
@pytest.mark.nvcc
def test_ptx_keeps_the_chain(built, op):
    """The opcode appears at least unroll times in the latency kernel and unroll x chains in the
    throughput kernel (nothing folded away before ptxas)."""
    funcs = _ptx_functions(built.ptx)
    spec = ptx.OPS[op]
    opcode = "bar.sync 0" if op == "bar.sync" else op + " "
    for u in (spec.unroll, 2 * spec.unroll):
        names = ptx.kernel_names(op, u)
        assert funcs[names["lat"]].count(opcode) >= u
        assert funcs[names["tp"]].count(opcode) >= u * spec.chains


def _disassemble(cubin: Path) -> dict[str, str] | None:
    if shutil.which("nvdisasm"):
        out = subprocess.run(["nvdisasm", "-c", str(cubin)], capture_output=True, text=True, timeout=300).stdout
        parts = re.split(r"^\.text\.(\w+):\s*$", out, flags=re.M)
    elif shutil.which("cuobjdump"):
        out = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, timeout=300).stdout
        parts = re.split(r"^\s*Function : (\w+)\s*$", out, flags=re.M)
    else:
        return None
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.fixture(scope="module")
def sass(built):
    if built.cubin is None:
        pytest.skip("ptxas is not installed")
    funcs = _disassemble(built.cubin)
    if funcs is None:
        pytest.skip("neither nvdisasm nor cuobjdump is installed")
    return funcs


@pytest.mark.parametrize("op", sorted(ptx.OPS))
@pytest.mark.nvcc
def test_sass_keeps_the_chain(sass, op):
    """ptxas did not fold the chain: the 2k kernel has at least k more of the op's SASS instruction
    (the difference is what the latency uses; ptxas may merge one link per chain into the loop's
    register copy, as it does for selp, so the k kernel needs only k - 1 per chain)."""
    spec = ptx.OPS[op]
    k = spec.unroll
    for kind, per in (("lat", 1), ("tp", spec.chains)):
        n_k = len(re.findall(spec.sass, sass[ptx.kernel_names(op, k)[kind]]))
        n_2k = len(re.findall(spec.sass, sass[ptx.kernel_names(op, 2 * k)[kind]]))
        assert n_k >= (k - 1) * per and n_2k - n_k >= k * per, (kind, n_k, n_2k)


# --------------------------------------------------------------------------------------------
# a real CUDA GPU
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cuda_backend():
    if importlib.util.find_spec("pycuda") is None:
        pytest.skip("pycuda is not installed")
    from gpuprofiler.device import list_devices, open_backend

    ids = [d.id for d in list_devices() if d.backend == "cuda"]
    if not ids:
        pytest.skip("no CUDA device")
    with open_backend(ids[0]) as backend:
        yield backend


@pytest.mark.cuda
def test_measure_on_gpu(cuda_backend):
    out = ptx.measure(cuda_backend, quick=True)
    assert out["clock"]["hz"] and 1e8 < out["clock"]["hz"] < 1e10
    assert set(out["instructions"]) == set(ptx.OPS)
    for op, res in out["instructions"].items():
        lat = res["latency_cycles"]
        if lat["status"] == "ok":
            assert lat["value"] >= 1, op
            assert res["latency_s"]["value"] == pytest.approx(lat["value"] / out["clock"]["hz"])
        else:
            assert lat["value"] is None and lat["reason"], op
        tp = res["throughput_ops_per_s"]
        assert (tp["status"] == "ok" and tp["value"] > 0) or (tp["value"] is None and tp["reason"]), op
    fma = out["instructions"]["fma.rn.f32"]
    assert fma["latency_cycles"]["status"] == "ok", fma["latency_cycles"].get("reason")
    assert 2 <= fma["latency_cycles"]["value"] <= 8
    assert math.isfinite(fma["chain_ratio"]) and 1.6 <= fma["chain_ratio"] <= 2.4
