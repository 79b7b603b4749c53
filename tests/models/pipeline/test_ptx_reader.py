"""The PTX reader is total: a file that is not text, a malformed line, a number too large or a register
declaration past the limit is a UserError naming the file and the line, never a traceback or a huge allocation."""

import contextlib
import io

import pytest
from conftest import POCL_PROFILE, PTX_FIXTURES

from gpuprofiler.cli.main import main
from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.ptx_parser import MAX_REGISTERS, MAX_TOKEN, parse_ptx
from gpuprofiler.models.pipeline.ptx_source import MAX_PTX_BYTES, load_ptx

VADD = (PTX_FIXTURES / "vadd.ptx").read_text()
LINES = VADD.splitlines()


def line_of(text):
    """The 1-based line of vadd.ptx that holds ``text``."""
    return next(i for i, line in enumerate(LINES, 1) if text in line)


def refused(text):
    with pytest.raises(UserError) as info:
        parse_ptx(text, "k.ptx")
    return str(info.value)


def replaced(old, new):
    assert old in VADD, old
    return VADD.replace(old, new, 1)


# ---- the file ----------------------------------------------------------------------------------------

def test_not_utf8_is_refused_with_the_line(tmp_path):
    path = tmp_path / "k.ptx"
    path.write_bytes(VADD.encode().replace(b"mov.u32 \t%r3", b"mov.u32 \t\xfe%r3", 1))
    with pytest.raises(UserError) as info:
        load_ptx(path)
    n = line_of("mov.u32 \t%r3")
    assert str(info.value) == f"{path}:{n}:11: not UTF-8 text (byte 0xfe): a PTX file must be a text file"


def test_binary_is_refused_with_the_line(tmp_path):
    path = tmp_path / "k.ptx"
    path.write_bytes(VADD.encode().replace(b".target sm_90", b".target sm_90\x00\x01\x02", 1))
    with pytest.raises(UserError, match=rf"k\.ptx:{line_of('.target')}:14: control character 0x00: a PTX file"):
        load_ptx(path)


def test_too_large_or_missing(tmp_path):
    path = tmp_path / "k.ptx"
    with open(path, "wb") as fh:
        fh.truncate(MAX_PTX_BYTES + 1)
    with pytest.raises(UserError, match=f"larger than {MAX_PTX_BYTES} bytes: too large for a PTX file"):
        load_ptx(path)
    with pytest.raises(UserError, match="PTX file not found"):
        load_ptx(tmp_path / "none.ptx")


# ---- malformed lines ----------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, expected", [
    (".reg .f32 \t%f<4>;", ".reg .f32 \t%f<100000000>;",
     f"%f<100000000> declares 100000000 registers: the limit is {MAX_REGISTERS} per declaration"),
    (".reg .f32 \t%f<4>;", ".reg .f32 \t%f<1.5>;", "expected a register count (a whole number), found '1.5'"),
    (".reg .f32 \t%f<4>;", ".reg .f32 \t%f<x>;", "expected a register count, found 'x'"),
    (".reg .f32 \t%f<4>;", ".reg .f32 \t%f<4;", "expected %f<N> in a register declaration"),
    (".reg .f32 \t%f<4>;", ".reg .f32 \t7;", "expected a register name, found '7'"),
    (".address_size 64", ".address_size abc", "expected an address size, found 'abc'"),
    (".address_size 64", ".address_size 99999999999999999999999", "an address size 99999999999999999999999 does "
                                                                  "not fit in 64 bits"),
    (".address_size 64", ".address_size 48", ".address_size 48: expected 32 or 64"),
    ("[vadd_param_0]", "[vadd_param_0+99999999999999999999999]", "an address offset 99999999999999999999999 does not"),
    ("[vadd_param_0]", "[vadd_param_0+9223372036854775808]", "an address offset 9223372036854775808 does not fit in 63 bits"),
    ("[vadd_param_0]", "[vadd_param_0+1.5]", "expected an address offset (a whole number), found '1.5'"),
    ("mov.u32 \t%r3, %ctaid.x;", "mov.u32 \t%r3, 0x" + "f" * 40 + ";", "the immediate 0xffff"),
    ("mov.u32 \t%r3, %ctaid.x;", "mov.u32 \t%r3, {{{%r1}}};", "vector operand nested too deeply"),
    ("mad.lo.s32 \t%r1, %r3, %r4, %r5;", "mad.lo.s32 \t%r1, %r3, %r4;", "mad.lo.s32 takes at least 4 operands, found 3"),
    ("setp.ge.s32 \t%p1, %r1, %r2;", "setp.ge.and.s32 \t%p1, %r1, %r2;", "setp.ge.and.s32 takes at least 4 operands"),
    ("ld.global.f32 \t%f1, [%rd8];", "ld.global.f32 \t%f1, %rd8;", "ld.global.f32 needs an address operand [...]"),
    ("mad.lo.s32 \t%r1, %r3, %r4, %r5;", "mad.lo.s32 \t5, %r3, %r4, %r5;",
     "the destination of mad.lo.s32 must be a register, not '5'"),
    ("@%p1 bra", "@ bra", "undeclared guard predicate bra"),
    ("@%p1 bra \t$L__BB0_2;", "@;", "a guard '@' without a predicate"),
    ("mov.u32 \t%r3, %ctaid.x;", "mov.u32 \t%r" + "9" * (MAX_TOKEN + 1) + ", %ctaid.x;",
     f"a name or number longer than {MAX_TOKEN} characters"),
])
def test_malformed_lines_name_the_line(old, new, expected):
    got = refused(replaced(old, new))
    assert got.startswith(f"k.ptx:{line_of(old)}: ") and expected in got, got


def test_declarations_of_arrays_and_parameters():
    text = replaced(".reg .pred \t%p<2>;", ".reg .pred \t%p<2>;\n\t.shared .align 4 .b8 s[")
    assert "k.ptx:" in refused(text)
    text = replaced(".param .u32 vadd_param_0,", ".param .u32 vadd_param_0[x],")
    assert refused(text) == f"k.ptx:{line_of('vadd_param_0,')}: expected a parameter's extent, found 'x'  " \
                            f"[.param .u32 vadd_param_0[x],]"
    text = replaced(".reg .pred \t%p<2>;", ".reg .pred \t%p<2>;\n\t.shared .b8 s[4 5];")
    assert "expected ']' after an array extent" in refused(text)


def test_truncated_files_never_crash():
    for cut in range(0, len(VADD), 97):
        try:
            parse_ptx(VADD[:cut], "k.ptx")
        except UserError as exc:
            assert str(exc).startswith("k.ptx")


def test_an_entry_at_the_end_of_the_file():
    assert "unexpected end of PTX" in refused(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry")


# ---- the command line ----------------------------------------------------------------------------------

def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_the_cli_on_a_huge_register_declaration(tmp_path):
    path = tmp_path / "k.ptx"
    path.write_text(replaced(".reg .f32 \t%f<4>;", ".reg .f32 \t%f<100000000>;"))
    code, out, err = run("pipeline", path, "--grid", "1024", "--block", "256", "--profile", POCL_PROFILE)
    assert code == 2 and f"k.ptx:{line_of('.reg .f32')}: %f<100000000> declares" in err and "Traceback" not in err


@pytest.mark.parametrize("define", ["X -Xclang=1", "-Xclang=1", "1X=1", "X Y=2"])
def test_define_names_are_c_identifiers(tmp_path, define):
    code, out, err = run("pipeline", PTX_FIXTURES / "vadd.ptx", "--grid", "4", "--block", "256",
                         f"--define={define}", "--profile", POCL_PROFILE)
    assert code == 2 and "NAME must be a C identifier" in err, err


# ---- regressions the fuzzing found: launches and trip counts past what the model can follow ---------------

def test_a_launch_past_2_to_the_48_threads_is_refused():
    code, out, err = run("pipeline", PTX_FIXTURES / "vadd.ptx", "--grid", "2147483647,2147483647,2147483647",
                         "--block", "1024", "--profile", POCL_PROFILE)
    assert code == 2 and "is 1.01e+31 threads: more than the 2^48 the model follows" in err, err


def test_a_loop_too_long_to_simulate_is_named_not_built():
    """A trip count of 2^31 once built a list of 2^31 loop passes (22 GB) before simulating it."""
    code, out, err = run("pipeline", PTX_FIXTURES / "matmul_naive.ptx", "--grid", "4,4", "--block", "16,16",
                         "--trip", "2147483648", "--profile", POCL_PROFILE)
    assert code == 2, err
    assert "against a budget of 250000; too long to simulate: $L__BB0_7 (line 107, 2147483648 passes)" in err
    assert "give their trip counts with --trip LABEL=N, or a larger --budget" in err


@pytest.mark.parametrize("argv, message", [
    (["--grid", "2147483648"], "each extent must be below 2^31"),
    (["--trip", "2147483649"], "a trip count above 2^31 is not a loop the model can follow"),
    (["--working-set", "nan"], "--working-set nan: expected a positive number of bytes"),
    (["--budget", "0"], "--budget 0: expected a positive number of warp-instructions"),
])
def test_option_limits(argv, message, capsys):
    args = ["pipeline", str(PTX_FIXTURES / "vadd.ptx"), "--grid", "4", "--block", "256", "--profile",
            str(POCL_PROFILE), *argv]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own refusal: exit 2 with the usage
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("sizes", ["1e400", "nan", "1.5", "99999999999999999999999"])
def test_size_lists_past_the_limits(sizes, capsys):
    with pytest.raises(SystemExit) as info:
        main(["measure", "vadd", "--sizes", sizes])
    assert info.value.code == 2 and "--sizes" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["1e30", "2**63", "-(2**63)", "0.5"])
def test_argument_values_past_int64_are_wrapped_not_a_crash(value):
    """--args 0=1e30 once reached numpy as a Python number past int64 (OverflowError)."""
    code, out, err = run("pipeline", PTX_FIXTURES / "syr2k.ptx", "--grid", "4", "--block", "256", "--args",
                         f"0={value}", "--budget", "3000", "--profile", POCL_PROFILE)
    assert code in (0, 2) and "Traceback" not in err, err


def test_u64_immediates_up_to_2_to_the_64(tmp_path):
    """A u64 immediate past 2^63 (0xFFFFFFFFFFFFFFFF) is a 64-bit pattern, not an OverflowError."""
    text = replaced("mov.u32 \t%r3, %ctaid.x;", "mov.u32 \t%r3, %ctaid.x;\n\tmov.u64 \t%rd5, 0xFFFFFFFFFFFFFFFF;"
                                                  "\n\tadd.s64 \t%rd5, %rd5, 18446744073709551615;")
    assert parse_ptx(text, "k.ptx").entries["vadd"].instructions
    path = tmp_path / "k.ptx"
    path.write_text(text)
    code, out, err = run("pipeline", path, "--grid", "4", "--block", "256", "--args", "0=1024",
                         "--profile", POCL_PROFILE)
    assert code == 0, err
