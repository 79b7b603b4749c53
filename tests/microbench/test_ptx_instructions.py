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
        assert spec.name == name and spec.sass and spec.body.split()[0] == spec.opcode
        assert spec.opcode == name or spec.note, name   # a chain written with another opcode says why


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
            assert "clock64()" in lat and "sentinel" in lat
            opcode = "bar.sync 0" if op == "bar.sync" else spec.opcode + " "
            assert _timed_source(lat).count(opcode) == u   # one chain of u links between the clock reads


def _timed_source(kernel: str) -> str:
    """The CUDA source between the two clock64() reads of a kernel."""
    return kernel.split("long long t0 = clock64();")[1].split("long long t1 = clock64();")[0]


def _asm_lines(text: str) -> list[str]:
    """The PTX lines of the asm statements in ``text`` (CUDA source), guards stripped."""
    body = "".join(re.findall(r'asm volatile\("(.*?)"\s*:', text, flags=re.S))
    lines = [line.strip() for line in body.replace("\\n", "\n").replace("\\t", "").splitlines()]
    return [re.sub(r"^@!?\w+\s+", "", line) for line in lines if line and line not in "{}" and not line.startswith(".")]


@pytest.mark.parametrize("op", ["add.s32", "add.u32", "sub.s32", "sub.u32"])
def test_integer_add_chain_is_one_instruction_per_link(op):
    """The timed chain of an integer add/sub is u links of x = b - x and nothing else (no conversion, no
    second opcode): ptxas can encode a negated chain input only as IADD3, so no link goes to VIADD."""
    spec = ptx.OPS[op]
    t = op.split(".")[1]
    assert spec.opcode == f"sub.{t}" and spec.single_sass and spec.sass == r"\bIADD3\b"
    for u in (spec.unroll, 2 * spec.unroll):
        lat = ptx.kernel_source(op, u).split("void tp_")[0]
        lines = _asm_lines(_timed_source(lat))
        chain = [line for line in lines if not line.startswith("setp.")]
        assert chain == [f"sub.{t} %0, %1, %0;"] * u                      # x = b - x, u times
        assert [line.split()[0] for line in lines if line.startswith("setp.")] == ["setp.ne.s32", "setp.gt.s32"]
        assert "cvt" not in _timed_source(lat)


def test_method_names_the_chain_opcode():
    runner = SimpleNamespace(tp_blocks=264)
    text = ptx._method(ptx.OPS["add.s32"], 64, 16, runner)
    assert text.startswith("dependent chain of 16 and 32 inline-PTX 'sub.s32' (for 'add.s32') per loop iteration")
    assert "x = b - x: every link is one IADD3" in text
    assert "inline-PTX 'fma.rn.f32' per loop" in ptx._method(ptx.OPS["fma.rn.f32"], 64, 16, runner)
    assert "walked once with the same load before the clock starts" in ptx._method(
        ptx.OPS["ld.global.ca.u64"], 64, 8, runner)


def test_global_load_chains_walk_the_ring_before_the_clock():
    """A cold L1 costs one L2 trip per sector in the timed chain (it broke ld.global.ca's ratio check on
    the H100): every global-load kernel walks its ring once, GLOBAL_WORDS links, before clock64()."""
    for op, spec in ptx.OPS.items():
        for u in (spec.unroll, 2 * spec.unroll):
            for kind, chains in (("lat", 1), ("tp", spec.chains)):
                src = ptx.kernel_source(op, u).split(f"void {ptx.kernel_names(op, u)[kind]}(")[1]
                src = src.split('extern "C"')[0]
                before = src.split("long long t0 = clock64();")[0]
                if spec.kind != "global":
                    assert "warm-up" not in before, op
                    continue
                loops = re.findall(r"for \(int w = 0; w < (\d+); \+\+w\)", before)
                assert [int(n) * u for n in loops] == [ptx.GLOBAL_WORDS], (op, u, kind)   # exactly one lap
                assert before.count(spec.opcode + " ") == u * chains


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
    opcode = "bar.sync 0" if op == "bar.sync" else spec.opcode + " "
    for u in (spec.unroll, 2 * spec.unroll):
        names = ptx.kernel_names(op, u)
        assert funcs[names["lat"]].count(opcode) >= u
        assert funcs[names["tp"]].count(opcode) >= u * spec.chains


def _ptx_timed_loop(function: str) -> list[str]:
    """Opcodes of the loop between the two %clock64 reads of a PTX function (guards stripped)."""
    timed = re.split(r"mov\.u64\s+%rd\d+, %clock64;", function)[1]
    label = re.search(r"^(\$L__BB\w+):", timed, flags=re.M).group(1)
    body = timed.split(label + ":", 1)[1]
    body = body[:re.search(rf"^.*\bbra\s+{re.escape(label)};", body, flags=re.M).start()]
    ops = []
    for line in body.splitlines():
        line = re.sub(r"^@!?%?\w+\s+", "", line.strip())
        if line and not line.startswith(("//", "{", "}", ".", "$")):
            ops.append(line.split()[0])
    return ops + ["bra"]


@pytest.mark.nvcc
def test_ptx_timed_loops_have_no_conversion(built):
    """No timed loop of any op converts a value (a cvt in a chain would be timed with it)."""
    funcs = _ptx_functions(built.ptx)
    for op, spec in ptx.OPS.items():
        for u in (spec.unroll, 2 * spec.unroll):
            loop = _ptx_timed_loop(funcs[ptx.kernel_names(op, u)["lat"]])
            assert not [o for o in loop if o.startswith("cvt")], (op, loop)


@pytest.mark.parametrize("op", ["add.s32", "add.u32", "sub.s32", "sub.u32"])
@pytest.mark.nvcc
def test_ptx_integer_add_loop_is_the_chain_and_the_loop_control(built, op):
    """nvcc leaves the add chain as written: u chain instructions, the two guard predicates, and the loop's
    counter add, compare and branch; nothing else in the timed loop."""
    funcs = _ptx_functions(built.ptx)
    spec = ptx.OPS[op]
    for u in (spec.unroll, 2 * spec.unroll):
        loop = _ptx_timed_loop(funcs[ptx.kernel_names(op, u)["lat"]])
        assert sorted(loop) == sorted([spec.opcode] * u + ["setp.ne.s32", "setp.gt.s32", "add.s32", "setp.lt.s32",
                                                           "bra"]), loop


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


def _sass_loop(function: str) -> list[str]:
    """SASS instructions of the timed loop: from the loop label after the first clock read to its branch back."""
    timed = re.split(r"SR_CLOCKLO", function)[1]
    label = re.search(r"^(\.L_x_\d+):", timed, flags=re.M).group(1)
    body = timed.split(label + ":", 1)[1].split(f"`({label})")[0]
    return [m.group(1) for m in re.finditer(r"^\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", body, flags=re.M)]


@pytest.mark.parametrize("op", sorted(op for op, spec in ptx.OPS.items() if spec.single_sass))
@pytest.mark.nvcc
def test_sass_integer_add_chain_is_one_pipe(sass, op):
    """Every link of the timed loop is the same IADD3 (no VIADD on the FMA pipe, no IMAD.IADD): only the loop
    counter (UIADD3, on the uniform datapath), its compare and the branch besides."""
    spec = ptx.OPS[op]
    for u in (spec.unroll, 2 * spec.unroll):
        loop = _sass_loop(sass[ptx.kernel_names(op, u)["lat"]])
        chain = [i for i in loop if i not in ("UIADD3", "ISETP.LE.AND", "ISETP.GE.AND", "BRA", "NOP")]
        assert chain == ["IADD3"] * u, loop


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
