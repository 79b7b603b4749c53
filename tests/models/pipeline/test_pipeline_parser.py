"""PTX parser on the committed nvcc fixtures of every builtin kernel, and its error messages."""

import re
import shutil

import pytest
from conftest import KERNELS, PTX_FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.ptx_parser import (
    parse_number,
    parse_ptx,
    strip_comments,
    tokenize,
)
from gpuprofiler.models.pipeline.ptx_source import (
    find_fixture,
    fixture_header,
    load_ptx,
    make_fixture,
)

FIXTURES = PTX_FIXTURES
BUILTIN_CU = sorted(KERNELS.glob("*.cu"))
APP_CU = sorted((KERNELS / "apps").glob("*.cu"))


def fixture_text(name):
    return (FIXTURES / f"{name}.ptx").read_text()


def test_every_builtin_kernel_has_a_fixture_that_parses():
    assert len(BUILTIN_CU) == 24
    for cu in BUILTIN_CU:
        text = fixture_text(cu.stem)
        mod = parse_ptx(text, cu.stem)
        # the kernel of the same name, with the .cu's parameter count
        entry = mod.entry(cu.stem)
        params = re.search(r"void\s+" + cu.stem + r"\s*\(([^)]*)\)", cu.read_text()).group(1).split(",")
        assert len(entry.params) == len(params)
        assert entry.instructions and entry.instructions[-1].base == "ret"
        assert mod.arch == "sm_90" and mod.address_size == 64
        # every instruction statement of the file is parsed (count the lines that hold one)
        body = [ln.strip() for ln in strip_comments(text).splitlines()]
        n_statements = sum(1 for ln in body if ln.endswith(";") and not ln.startswith(".") and ln not in ("",))
        assert len(entry.instructions) == n_statements


def test_app_fixtures_hold_every_app_kernel():
    cg = parse_ptx(fixture_text("apps_cg"))
    assert set(cg.entries) == {"spmv", "dot_partial", "axpy", "xpay"}
    jac = parse_ptx(fixture_text("apps_jacobi"))
    assert set(jac.entries) == {"jacobi_step", "diff_partial"}
    assert cg.entries["dot_partial"].shared_bytes == 256 * 4


def test_instruction_fields_of_matmul_tiled():
    entry = parse_ptx(fixture_text("matmul_tiled")).entry("matmul_tiled")
    assert entry.shared == {"_ZZ12matmul_tiledE2As": 1024, "_ZZ12matmul_tiledE2Bs": 1024}
    assert entry.families["%f"] == ("f32", 57) and entry.families["%rd"] == ("b64", 20)
    fma = next(i for i in entry.instructions if i.base == "fma")
    assert fma.opcode == "fma.rn.f32" and fma.mods == ("rn", "f32") and fma.type == "f32"
    assert fma.dsts == ("%f10",) and fma.srcs == ("%f9", "%f8", "%f56")
    lds = next(i for i in entry.instructions if i.opcode == "ld.shared.f32" and i.operands[1].value)
    assert lds.operands[1].kind == "mem" and lds.operands[1].value == 64 and lds.space == "shared"
    bra = [i for i in entry.instructions if i.base == "bra"]
    assert bra[0].guard == "%p1" and bra[0].target == "$L__BB0_3"
    assert entry.labels["$L__BB0_2"] < entry.labels["$L__BB0_3"]
    st_ = next(i for i in entry.instructions if i.base == "st" and i.space == "shared")
    assert st_.dsts == () and set(st_.srcs) == {"%r5", "%f6"}


PTX_HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"


def test_comments_nested_scopes_vectors_and_negated_guards():
    text = PTX_HEAD + """
/* a block comment
   over lines */ .visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)  // trailing
.maxntid 128, 1, 1
{
  .reg .pred %p<3>; .reg .b32 %r<5>; .reg .f32 %f<5>; .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [k_param_0];
  ld.param.u32 %r1, [k_param_1];
  {   // an inline-asm scope with its own registers
    .reg .pred p;
    .reg .b32 %r<2>;
    setp.ne.s32 p, %r1, 0;
    @!p mov.b32 %r1, 7;
  }
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+-16];
  setp.lt.s32 %p1|%p2, %r1, 4;
  @!%p1 bra $L_end;
  add.s32 %r2, %r1, -1;
$L_end:
  ret;
}
"""
    mod = parse_ptx(text, "t.ptx")
    e = mod.entry("k")
    assert e.directives["maxntid"] == [128, 1, 1]
    ops = [i.opcode for i in e.instructions]
    assert ops == ["ld.param.u64", "ld.param.u32", "setp.ne.s32", "mov.b32", "ld.global.v4.f32", "setp.lt.s32",
                   "bra", "add.s32", "ret"]
    inner = e.instructions[2]
    assert inner.dsts == ("p$1",) and e.reg_type("p$1") == "pred"
    assert e.instructions[3].guard == "p$1" and e.instructions[3].guard_neg
    vec = e.instructions[4]
    assert vec.dsts == ("%f1", "%f2", "%f3", "%f4") and vec.vector == 4 and vec.operands[1].value == -16
    assert e.instructions[5].dsts == ("%p1", "%p2")
    assert e.instructions[6].guard_neg and e.instructions[6].target == "$L_end"
    assert e.instructions[7].operands[2].value == -1


@pytest.mark.parametrize("body, message", [
    ("  call.uni foo, (%r1);", "calls to device functions"),
    ("  brx.idx %r1, $tbl;", "indirect branches"),
    ("  frobnicate.b32 %r1, %r1;", "not in the pipeline model's opcode table"),
    ("  add.s32 %r9, %r1, 1;", "undeclared register %r9"),
    ("  bra $nowhere;", "undefined label $nowhere"),
    ("  add.s32 %r1, %r1 ? 1;", "unexpected character"),
])
def test_unsupported_input_names_the_line(body, message):
    text = PTX_HEAD + ".visible .entry k()\n{\n  .reg .b32 %r<3>;\n" + body + "\n  ret;\n}\n"
    with pytest.raises(UserError) as err:
        parse_ptx(text, "bad.ptx")
    assert message in str(err.value)
    assert "bad.ptx:7:" in str(err.value)          # the line of the offending statement


def test_unterminated_body_and_missing_kernel():
    with pytest.raises(UserError, match="unterminated|unexpected end"):
        parse_ptx(PTX_HEAD + ".visible .entry k()\n{\n ret;\n", "x.ptx")
    with pytest.raises(UserError, match="no kernel"):
        parse_ptx(PTX_HEAD, "x.ptx")
    mod = parse_ptx(fixture_text("apps_cg"), "cg.ptx")
    with pytest.raises(UserError, match="choose one with --kernel"):
        mod.entry(None)
    with pytest.raises(UserError, match="no kernel 'nope'"):
        mod.entry("nope")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["// x", "/* y */", "/* multi\nline */", ""]), min_size=1, max_size=8))
def test_comments_anywhere_between_statements_change_nothing(comments):
    base = fixture_text("vadd")
    lines = base.splitlines()
    out = []
    for k, ln in enumerate(lines):
        out.append(ln + (" " + comments[k % len(comments)] if ln.strip().endswith(";") else ""))
    a = parse_ptx(base).entry("vadd")
    b = parse_ptx("\n".join(out)).entry("vadd")
    assert [(i.opcode, i.dsts, i.srcs) for i in a.instructions] == [(i.opcode, i.dsts, i.srcs) for i in b.instructions]


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_hex_float_immediates_round_trip(x):
    import struct

    assert parse_number("0f" + struct.pack(">f", x).hex().upper()) == x
    toks = tokenize("mov.f32 %f1, 0f" + struct.pack(">f", x).hex() + ";")
    assert [t.kind for t in toks] == ["ident", "ident", "punct", "num", "punct"]


def test_fixture_headers_match_their_sources():
    """Each builtin fixture is found for its .cu with the spec's defines (what the spec form uses)."""
    from gpuprofiler.workloads.spec import load_spec

    for toml in sorted(KERNELS.glob("*.toml")):
        spec = load_spec(toml)
        cu = spec.sources["cuda"]
        defines = spec.instantiate(spec.small[0]).defines
        assert find_fixture(cu, "sm_90", defines) == FIXTURES / f"{cu.stem}.ptx", toml.name
        src = load_ptx(cu, "sm_90", defines)
        assert src.how.startswith("fixture")
    assert find_fixture(KERNELS / "matmul_tiled.cu", "sm_90", {"TILE": 32}) is None   # other defines: no match


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: fixtures cannot be regenerated here")
def test_fixtures_regenerate_identically(tmp_path):
    for cu, name, defines in [(KERNELS / "vadd.cu", "vadd", {}), (KERNELS / "matmul_tiled.cu", "matmul_tiled",
                                                                  {"TILE": 16})]:
        out = make_fixture(cu, tmp_path / f"{name}.ptx", "sm_90", defines)
        assert out.read_text() == fixture_text(name)
        assert out.read_text().splitlines()[0] == fixture_header(cu, "sm_90", defines)


@pytest.mark.nvcc
def test_nvcc_failure_is_a_user_error(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(int n) { this is not C++; }\n')
    with pytest.raises(UserError, match="nvcc --ptx failed"):
        load_ptx(bad, "sm_90", {})


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_hold_kernel_compiles_and_reads_the_global_timer(tmp_path):
    """The CUDA backend's hold kernel (queued before each timed launch) builds for Hopper and spins on
    %globaltimer, so it keeps the GPU busy for wall time, whatever the clock."""
    import subprocess

    from gpuprofiler.device.cuda_hold import HOLD_SOURCE

    src = tmp_path / "hold.cu"
    src.write_text(HOLD_SOURCE)
    subprocess.run(["nvcc", "--ptx", "-arch=sm_90", "-o", str(tmp_path / "hold.ptx"), str(src)], check=True)
    ptx = (tmp_path / "hold.ptx").read_text()
    assert ".entry gpuprofiler_hold" in ptx and ptx.count("%globaltimer") == 2
