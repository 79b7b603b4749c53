"""Buffers against the launch, before anything is compiled: the out-of-bounds family (a shape smaller than the
launch) refused with the argument and both sizes named, in 1-D, 2-D, a gather and through a pointer variable; what
the check cannot decide said, not refused; every builtin spec accepted at its sizes, cheaply."""

import shutil
import time

import pytest
from conftest import FIXTURES, run_cli

from gpuprofiler.errors import UserError
from gpuprofiler.kernelcode.sample import corner_groups
from gpuprofiler.workloads.bounds import check_instance, code_reaches
from gpuprofiler.workloads.builtin import builtin_specs
from gpuprofiler.workloads.kernel import measure_spec, prepare
from gpuprofiler.workloads.spec import load_spec

BOUNDS = FIXTURES / "bounds"

# spec, size, the argument, what the launch reaches, what the buffer holds, how it was found
REFUSED = [
    ("short_out", 1024, "c", "writes element 1023", "holds 1023 float32", "kernel's code"),
    ("short_rows", 4096, "dst", "writes element 4095", "holds 4032 float32", "kernel's code"),
    ("gather", 4096, "x", "reads element ", "holds 2048 float32", "kernel's code"),
    ("opaque", 1024, "c", "writes element 1023", "holds 1023 float32", "kernel's code"),
]


@pytest.mark.parametrize("name,size,arg,reach,holds,how", REFUSED, ids=[r[0] for r in REFUSED])
def test_out_of_bounds_launch_is_refused_naming_the_argument(name, size, arg, reach, holds, how):
    inst = load_spec(BOUNDS / f"{name}.toml").instantiate(size)
    with pytest.raises(UserError) as info:
        check_instance(inst)
    text = str(info.value)
    assert f"argument `{arg}`: the launch {reach}" in text and holds in text and how in text, text


def fixed_copy(tmp_path, name, old, new):
    """The fixture with its wrong shape put right."""
    for f in BOUNDS.glob(f"{name}.*"):
        shutil.copy(f, tmp_path / f.name)
    toml = tmp_path / f"{name}.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))
    return load_spec(toml)


@pytest.mark.parametrize("name,old,new", [
    ("short_out", 'shape = "n - 1"', 'shape = "n"'),
    ("short_rows", 'shape = ["n - 1", "n"]', 'shape = ["n", "n"]'),
    ("gather", 'shape = "n / 2"', 'shape = "n"'),
    ("opaque", 'shape = "n - 1"', 'shape = "n"'),
])
def test_the_same_specs_put_right_pass(tmp_path, name, old, new):
    spec = fixed_copy(tmp_path, name, old, new)
    for size in spec.small:
        check_instance(spec.instantiate(size))


def test_the_code_is_followed_through_a_pointer_variable():
    short = load_spec(BOUNDS / "short_out.toml").instantiate(1024)
    got = {r.arg: r for r in code_reaches(short).reaches}
    assert (got["c"].low, got["c"].high, got["c"].writes) == (0, 1023, True)
    assert (got["a"].high, got["a"].reads, got["a"].writes) == (1023, True, False)
    opaque = load_spec(BOUNDS / "opaque.toml").instantiate(1024)
    got = {r.arg: r for r in code_reaches(opaque).reaches}
    assert (got["c"].low, got["c"].high, got["c"].writes) == (0, 1023, True)  # `p = c; p += i; *p = ...`


def test_an_index_from_data_is_said_undecided_not_refused():
    """wild.toml writes through an offset read from float data: nothing tells where, so the launch goes on (in the
    isolated worker) with one line saying so."""
    said = []
    got = check_instance(load_spec(BOUNDS / "wild.toml").instantiate(1024), say=said.append)
    assert "c" not in {r.arg for r in got.reaches}
    assert len(said) == 1 and "`c`: an index read from data the spec does not give" in said[0], said


def test_code_it_cannot_follow_is_said_undecided_not_refused(tmp_path):
    spec = fixed_copy(tmp_path, "short_out", 'opencl = "short_out.cl"', 'opencl = "short_out.cl"')
    (tmp_path / "short_out.cl").write_text("__kernel void vadd(int n, __global float *c) { goto end; end: c[0] = 1.0f; }")
    said = []
    assert check_instance(spec.instantiate(1024), say=said.append).reaches == []
    assert len(said) == 1 and "could not be followed" in said[0], said


def test_corner_groups_of_a_grid():
    assert list(corner_groups([1024], [256])) == [0, 1, 2, 3]
    assert list(corner_groups([2048], [256])) == [0, 1, 6, 7]
    assert list(corner_groups([64, 64], [16, 16], depth=1)) == [0, 3, 12, 15]
    assert list(corner_groups([256], [256])) == [0]
    assert list(corner_groups([1000], None, depth=1)) == [0, 3]  # a default group of 256


def check_builtins(which) -> None:
    slowest, total, checks, undecided = ("", 0, 0.0), 0.0, 0, set()
    for path in builtin_specs():
        spec = load_spec(path)
        for size in which(spec):
            inst = spec.instantiate(size)
            t0 = time.perf_counter()
            said = []
            check_instance(inst, say=said.append)
            spent = time.perf_counter() - t0
            total, checks = total + spent, checks + 1
            slowest = max(slowest, (path.stem, size, spent), key=lambda x: x[2])
            if said:
                undecided.add(path.stem)
    print(f"\nbounds of {len(builtin_specs())} builtin specs at {checks} sizes: {total:.2f} s, "
          f"{1e3 * total / checks:.0f} ms per size, slowest {slowest[0]} at {slowest[1]}: {slowest[2]:.2f} s; "
          f"undecided: {sorted(undecided)}")
    assert slowest[2] < 3.0
    # the trace follows all but the longest loops (covariance's, nbody's at its target)
    assert undecided <= {"covariance", "nbody"}, undecided


def test_every_builtin_spec_passes_at_its_first_small_size_and_its_targets_cheaply():
    check_builtins(lambda spec: spec.small[:1] + spec.target)


@pytest.mark.slow
def test_every_builtin_spec_passes_at_every_size():
    check_builtins(lambda spec: spec.small + spec.target)


def test_measure_refuses_before_compiling(pocl, quick_policy):
    spec = load_spec(BOUNDS / "short_out.toml")
    with pytest.raises(UserError, match="argument `c`"):
        measure_spec(pocl, spec, [1024], quick_policy)
    with pytest.raises(UserError, match="argument `c`"):  # checked in prepare too
        prepare(pocl, load_spec(BOUNDS / "opaque.toml"), 1024)


def test_cli_measure_exits_2_and_stores_nothing(tmp_path):
    done = run_cli("measure", BOUNDS / "short_rows.toml", "--sizes", "4096", cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "argument `dst`: the launch writes element 4095 but the buffer holds 4032 float32" in done.stderr
    assert "Traceback" not in done.stderr and "compiling" not in done.stderr
    assert not list(tmp_path.glob("results/*/measurements.jsonl"))


def test_cli_set_that_doubles_the_launch_is_refused(tmp_path):
    for f in BOUNDS.glob("short_out.*"):
        shutil.copy(f, tmp_path / f.name)
    toml = tmp_path / "short_out.toml"
    toml.write_text(toml.read_text().replace('shape = "n - 1"', 'shape = "m"') + '\n[params]\nm = "n"\n')
    done = run_cli("measure", toml, "--sizes", "1024", "--set", "m=512", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "argument `c`" in done.stderr and "holds 512 float32" in done.stderr, done.stderr


def test_the_check_can_be_turned_off(monkeypatch):
    inst = load_spec(BOUNDS / "short_out.toml").instantiate(1024)
    monkeypatch.setenv("GPUPROFILER_BOUNDS", "off")
    assert check_instance(inst).reaches == []
    monkeypatch.setenv("GPUPROFILER_BOUNDS", "on")
    with pytest.raises(UserError, match="GPUPROFILER_BOUNDS=off skips it"):
        check_instance(inst)


def test_a_clamped_neighbour_is_not_taken_for_an_overrun():
    """hotspot's `r < n - 1 ? r + 1 : n - 1`: the trace picks per work-item."""
    spec = load_spec(next(p for p in builtin_specs() if p.stem == "hotspot"))
    got = {r.arg: r for r in code_reaches(spec.instantiate(1100)).reaches}
    assert got["temp"].high == 1100 * 1100 - 1 and got["temp"].low == 0


def test_an_empty_buffer_is_refused(tmp_path):
    spec = fixed_copy(tmp_path, "opaque", 'shape = "n - 1"', 'shape = "n - n"')
    with pytest.raises(UserError, match=r"argument `c`: the launch writes element 0 but the buffer holds 0 float32"):
        check_instance(spec.instantiate(1024))
