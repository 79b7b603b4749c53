"""Every spec reader error is a UserError naming the file and the field (or the line and column): broken TOML,
files that are not text, wrong types anywhere, defines that are not identifiers, values past the limits."""

import shutil

import pytest
from conftest import KERNELS

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.kernel import gib
from gpuprofiler.workloads.spec import MAX_SPEC_BYTES, load_spec


def vadd(tmp_path, text=None, old=None, new=None, data=None):
    """The builtin vadd spec copied into ``tmp_path``, with ``old`` replaced by ``new`` (or the whole text)."""
    for f in KERNELS.glob("vadd.*"):
        shutil.copy(f, tmp_path / f.name)
    path = tmp_path / "vadd.toml"
    if data is not None:
        path.write_bytes(data)
        return path
    if text is None:
        text = path.read_text()
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)
    return path


def message(path):
    with pytest.raises(UserError) as info:
        load_spec(path)
    return str(info.value)


# ---- the file: text, size and TOML syntax ----------------------------------------------------------

def test_toml_syntax_errors_say_line_and_column(tmp_path):
    got = message(vadd(tmp_path, old='kernel = "vadd"', new='kernel = "vadd'))
    assert "vadd.toml: not valid TOML: Illegal character '\\n' (at line 3, column 15)" in got
    got = message(vadd(tmp_path, old='local = [256]', new='local = [256'))
    assert got.endswith("vadd.toml: not valid TOML: Unclosed array (at line 40, column 1)")


def test_invalid_dates_and_huge_integers_name_the_line(tmp_path):
    assert "(at line 2, column" in message(vadd(tmp_path, old="description", new="when = 1979-02-30\ndescription"))
    got = message(vadd(tmp_path, old='size = "n"', new="size = " + "9" * 5000))
    assert "not valid TOML: Exceeds the limit (4300 digits)" in got and got.endswith("(at line 4)")


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path):
    got = message(vadd(tmp_path, old="description", new="x = " + "[" * 5000 + "]" * 5000 + "\ndescription"))
    assert got.endswith("not valid TOML: tables or arrays nested too deeply")


def test_not_utf8_or_binary_names_the_line(tmp_path):
    text = (KERNELS / "vadd.toml").read_bytes()
    got = message(vadd(tmp_path, data=text.replace(b'kernel = "vadd"', b'kernel = "v\xffadd"')))
    assert got.endswith("vadd.toml:3:12: not UTF-8 text (byte 0xff): a spec must be a text file")
    got = message(vadd(tmp_path, data=text.replace(b'size = "n"', b'size = "\x00n"')))
    assert got.endswith("vadd.toml:4:9: control character 0x00: a spec must be a text file")


def test_too_large_and_missing_files(tmp_path):
    got = message(vadd(tmp_path, text="#" * (MAX_SPEC_BYTES + 1)))
    assert got.endswith(f"larger than {MAX_SPEC_BYTES} bytes: too large for a spec")
    assert message(tmp_path / "none.toml") == f"spec not found: {tmp_path / 'none.toml'}"
    assert message(tmp_path) == f"spec {tmp_path} is a directory, not a file"


# ---- types anywhere ------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, expected", [
    ('name = "vadd"', "name = [1]", "vadd.toml.name: expected the spec's name, got a list [1]"),
    ('description = "c[i] = a[i] + b[i] (float32 vector add)"', "description = 3",
     "vadd.toml.description: expected a description, got an integer 3"),
    ('kernel = "vadd"', "kernel = {a = 1}", "vadd.toml.kernel: expected the kernel function's name, got a table"),
    ('kernel = "vadd"', 'kernel = "vadd -Dx"', "vadd.toml.kernel: 'vadd -Dx' is not a kernel function's name"),
    ('size = "n"', "size = 3", "vadd.toml.size: expected the size parameter's name, got 3"),
    ("small = [8388608,", 'small = ["8388608",', "vadd.toml.small: expected a list of positive integers up to 2^63"),
    ("target = [134217728]", "target = [36893488147419103232]", "vadd.toml.target: expected a list of positive"),
    ('value = "n"', "value = [1, 2]", "args[0] (n).value: expected a number or an expression string, got a list"),
    ('value = "n"', "value = {x = 1}", "args[0] (n).value: expected a number or an expression string, got a table"),
    ('shape = "n"', "shape = {x = 1}", "args[1] (a).shape: expected a number or an expression, got a table"),
    ('shape = "n"', 'shape = "n, n, n, n"', "args[1] (a).shape: expected 1 to 3 sizes"),
    ('init = "random"', "init = [1]", "args[1] (a).init: unknown init [1]"),
    ('output = true', 'output = "yes"', "args[3] (c).output: expected true or false, got 'yes'"),
    ('name = "n"', 'name = "n n"', "args[0].name: 'n n' is not a valid name"),
    ('global = ["n"]', "global = {x = 1}", "launch.global: expected global sizes, got a table"),
    ('local = [256]', "local = [[256]]", "launch.local: expected a number or an expression, got a list [256]"),
    ('local = [256]', "local = [256]\nblock = 3", "launch: unknown field(s) block (allowed: global, local)"),
    ('flops = "n"', "flops = [1]", "work.flops: expected a number or an expression string, got a list [1]"),
    ('kernel = "vadd"', 'kernel = "vadd"\nparams = 3', "vadd.toml.params: expected a table, got an integer 3"),
    ('expect = "a + b"', 'expect = "a + b"\nrtol = "x"', "check[0].rtol: expected a finite number >= 0, got 'x'"),
    ('expect = "a + b"', 'expect = "a + b"\nrtol = nan', "check[0].rtol: expected a finite number >= 0, got nan"),
    ('expect = "a + b"', 'expect = "a + b"\natol = -1.0', "check[0].atol: expected a finite number >= 0, got -1.0"),
    ('expect = "a + b"', 'expect = ["a + b"]', "check[0].expect: expected an expression over the inputs, got a list"),
    ('expect = "a + b"', 'expect = "a + b"\ntol = 1', "check[0]: unknown field(s) tol"),
    ('[[args]]\nname = "n"', '[[args]]\nname = "n"\n[args.extra]', "unknown field(s) extra"),
    ('opencl = "vadd.cl"', 'opencl = "v\\u0000.cl"', "vadd.toml.source.opencl: expected opencl"),
    ('opencl = "vadd.cl"', 'opencl = "' + "x" * 5000 + '.cl"', "vadd.toml.source.opencl: cannot read"),
])
def test_wrong_types_name_the_field(tmp_path, old, new, expected):
    assert expected in message(vadd(tmp_path, old=old, new=new))


# ---- defines: identifiers and values, never compiler options ---------------------------------------

@pytest.mark.parametrize("define, expected", [
    ('"X -Xclang -load" = "1"', "defines: 'X -Xclang -load' is not a C identifier"),
    ('"-Xclang" = "1"', "defines: '-Xclang' is not a C identifier"),
    ('"1X" = "1"', "defines: '1X' is not a C identifier"),
    ('"TILÉ" = "1"', "defines: 'TILÉ' is not a C identifier"),
    ('TILE = "-Xclang"', "defines.TILE: unknown name 'Xclang'"),
    ('TILE = "16 -O0"', "defines.TILE: unknown name 'O0'"),
    ('TILE = "16 --O0 x"', "defines.TILE: cannot parse '16 --O0 x'"),
    ('TILE = "1 if n else 2"', "defines.TILE: IfExp is not allowed"),
    ('TILE = ["16"]', "defines.TILE: expected a number or an expression string, got a list"),
    ('TILE = "2**70"', "defines.TILE: 2 ** 70 would be about 2^70"),
])
def test_defines_are_identifiers_with_plain_values(tmp_path, define, expected):
    assert expected in message(vadd(tmp_path, old="[work]", new=f"[defines]\n{define}\n[work]"))


def test_good_defines_load(tmp_path):
    spec = load_spec(vadd(tmp_path, old="[work]", new='[defines]\nTILE = "16"\nHALF = "n / 2"\n[work]'))
    assert spec.instantiate(1024).defines == {"TILE": 16, "HALF": 512.0}


# ---- values past the limits name the field ---------------------------------------------------------

@pytest.mark.parametrize("old, new, expected", [
    ("[work]", '[params]\nk = "n**256"\n[work]', "vadd.toml: params.k: 8388608 ** 256 would be about 2^5888"),
    ("[work]", '[params]\nk = "(-1)**0.5"\n[work]', "params.k: the result of '(-1) ** 0.5' is a complex number"),
    ("[work]", '[params]\nk = "9**9**9"\n[work]', "params.k: exponent 387420489 is too large"),
    ("[work]", '[params]\n"a b" = "1"\n[work]', "vadd.toml.params: 'a b' is not a valid name"),
    ('flops = "n"', 'flops = "n**256"', "vadd.toml: work.flops: 8388608 ** 256 would be about 2^5888"),
    ('flops = "n"', 'flops = "1e308 * 1e308"', "work.flops: the result of '1e+308 * 1e+308' is not a finite number"),
    ('value = "n"', 'value = "n * 1024"', "args[0] (n).value: 8589934592 does not fit in int32"),
    ('init = "random"', 'init = "value"\nvalue = 1e39', "args[1] (a).value: 1e+39 does not fit in float32"),
    ('shape = "n"\ninit = "random"', 'shape = "n"\ninit = "random"\nlow = -1e300\nhigh = inf',
     "args[1] (a).high: inf is not a finite number"),
    ('shape = "n"', 'shape = "n ** 3"', "args[1] (a).shape: 8388608 ** 3 would be about 2^69"),
    ('shape = "n"', 'shape = ["n", "n", "n"]',
     "args[1] (a).shape: (8388608, 8388608, 8388608) is more than 2^63 bytes at n=8388608"),
    ('global = ["n"]\nlocal = [256]', 'global = ["n", "n", "n"]\nlocal = [1, 1, 1]',
     "launch.global: [8388608, 8388608, 8388608] is more than 2^63 work-items at n=8388608"),
])
def test_values_past_the_limits_name_the_field(tmp_path, old, new, expected):
    assert expected in message(vadd(tmp_path, old=old, new=new))


def test_random_integers_must_fit_their_dtype(tmp_path):
    path = vadd(tmp_path, old='dtype = "float32"\nshape = "n"\ninit = "random"',
                new='dtype = "int8"\nshape = "n"\ninit = "random"\nhigh = 1000')
    assert "args[1] (a).high: 1000 is outside the range of int8 (-128 .. 128)" in message(path)


def test_sizes_past_the_limit_at_instantiate(tmp_path):
    spec = load_spec(KERNELS / "vadd.toml")
    with pytest.raises(UserError, match=r"n=36893488147419103232: a size must be a whole number from 1 to 2\^63"):
        spec.instantiate(2**65)


# ---- the allocation message never shows two equal rounded figures ------------------------------------

def test_allocation_sizes_in_exact_bytes_when_rounding_hides_the_difference():
    assert gib(8589934596, 8589934592) == ("8589934596 bytes", "8589934592 bytes")
    assert gib(3 << 30, 2 << 30) == ("3.00 GiB", "2.00 GiB")


def test_a_kernel_source_that_is_not_text_is_refused_on_load(tmp_path):
    path = vadd(tmp_path, old='kernel = "vadd"', new='kernel = "vadd"')
    (tmp_path / "vadd.cl").write_bytes(b"__kernel void vadd(\xff) {}\n")
    assert message(path).endswith("vadd.cl:1:20: not UTF-8 text (byte 0xff): a kernel source must be a text file")


@pytest.mark.parametrize("check, expected", [
    ("5", "vadd.toml.check: expected a list of [[check]] tables, got an integer 5"),
    ('["x"]', "vadd.toml: check[0]: expected a table ([[check]]), got a string 'x'"),
])
def test_a_check_that_is_not_a_table(tmp_path, check, expected):
    text = (KERNELS / "vadd.toml").read_text().replace('[[check]]\ngot = "c"\nexpect = "a + b"', "")
    text = text.replace('kernel = "vadd"', f'kernel = "vadd"\ncheck = {check}')
    assert expected in message(vadd(tmp_path, text=text))


def test_a_zero_extent_does_not_hide_a_huge_shape(tmp_path):
    """(0, 2^62, 2^62) holds no element, but numpy multiplies its extents out and refused it with a ValueError."""
    path = vadd(tmp_path, old='shape = "n"', new='shape = ["0", "2**62", "2**62"]')
    assert "args[1] (a).shape: (0, 4611686018427387904, 4611686018427387904) is more than 2^63 bytes" in message(path)


def test_arrays_are_bounded_by_the_8_byte_draws_that_fill_them(tmp_path):
    """An int32 array of (0, 2^60) elements: numpy's int64 draw of that shape is 2^63 bytes (a ValueError)."""
    path = vadd(tmp_path, old='dtype = "float32"\nshape = "n"\ninit = "random"',
                new='dtype = "int32"\nshape = ["0", "2**60"]\ninit = "random"\nhigh = 10')
    assert "args[1] (a).shape: (0, 1152921504606846976) is more than 2^63 bytes" in message(path)
