"""The guard corpus (``tests/fixtures/guards``): the bounds check follows the control flow that keeps an access in
its buffer, so it never refuses these correct kernels; each one's out-of-bounds twin (one edit to its guard) is
refused, naming the argument. The kernels themselves pass their numpy checks on the PoCL device."""

import shutil

import pytest
from conftest import FIXTURES, run_cli

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.bounds import check_instance, code_reaches
from gpuprofiler.workloads.kernel import measure_spec
from gpuprofiler.workloads.spec import load_spec

GUARDS = FIXTURES / "guards"
NAMES = sorted(p.stem for p in GUARDS.glob("*.toml"))

# name, the guard as written, the twin's guard (which reaches one element or more past a buffer), the argument
TWINS = [
    ("early_return", "if (i >= n)", "if (i > n)", "a"),
    ("conv17", "if (i >= n - (TAPS - 1)) return;", "if (i >= n - (TAPS - 2)) return;", "x"),
    ("stencil3d", "|| z >= n - 1)", "|| z >= n)", "u"),
    ("jacobi_border", "i == n - 1 ||", "i == n ||", "u"),
    ("if_block", "if (i < n) {", "if (i <= n) {", "a"),
    ("ternary", "i + 1 < n ?", "i + 1 <= n ?", "a"),
    ("clamp", "min(i + 1, n - 1)", "min(i + 1, n)", "a"),
    ("row_loop", "k < m;", "k <= m;", "A"),
    ("grid_stride", "j < n;", "j <= n;", "a"),
    ("padded_2d", "x >= w ||", "x > w ||", "a"),
    ("short_circuit", "i < n &&", "i <= n &&", "a"),
    ("vector4", "if (i >= n4) return;", "if (i > n4) return;", "a"),
    ("vload", "4 * i + 3 < n", "4 * i < n", "a"),
    ("loop_break", "if (i + k >= n) break;", "if (i + k > n) break;", "a"),
    ("helper", "i >= n)", "i > n)", "a"),
    ("bitwise", "int p = i ^ j;", "int p = i ^ (2 * n);", "a"),
]


def test_every_guard_idiom_has_a_twin():
    assert sorted(t[0] for t in TWINS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_guarded_kernel_is_never_refused(name):
    spec = load_spec(GUARDS / f"{name}.toml")
    undecided = []
    for size in spec.small:
        got = check_instance(spec.instantiate(size), say=undecided.append)
        assert got.reaches, "the trace followed the kernel's code"
    assert not undecided, undecided


def twin(tmp_path, name, old, new):
    for f in GUARDS.glob(f"{name}.*"):
        shutil.copy(f, tmp_path / f.name)
    cl = tmp_path / f"{name}.cl"
    text = cl.read_text()
    assert old in text
    cl.write_text(text.replace(old, new))
    return tmp_path / f"{name}.toml"


@pytest.mark.parametrize("name,old,new,arg", TWINS, ids=[t[0] for t in TWINS])
def test_its_out_of_bounds_twin_is_refused(tmp_path, name, old, new, arg):
    spec = load_spec(twin(tmp_path, name, old, new))
    with pytest.raises(UserError, match=f"argument `{arg}`: the launch (reads|writes)"):
        check_instance(spec.instantiate(spec.small[0]))


def test_a_condition_on_data_keeps_what_it_knows():
    """``i < n && a[i] > 0.5f``: the store may run only where i < n, so it is proven inside; where the guard is on
    data alone, the check says it cannot decide."""
    spec = load_spec(GUARDS / "short_circuit.toml")
    got = code_reaches(spec.instantiate(1000))
    assert not got.undecided and {r.arg: r.high for r in got.reaches} == {"a": 999}


@pytest.mark.pocl
def test_the_guard_corpus_passes_its_checks_on_the_device(pocl, quick_policy):
    for name in NAMES:
        spec = load_spec(GUARDS / f"{name}.toml")
        [rec] = measure_spec(pocl, spec, spec.small[:1], quick_policy)
        assert rec["checked"], name


def test_cli_refuses_a_twin_with_exit_2_and_runs_its_original(tmp_path):
    done = run_cli("measure", twin(tmp_path, *TWINS[0][:3]), "--sizes", "1000", "--budget", "0.05", cwd=tmp_path,
                   timeout=120)
    assert done.returncode == 2 and "argument `a`: the launch reads element 1000" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    done = run_cli("measure", GUARDS / "early_return.toml", "--sizes", "1000", "--budget", "0.05", cwd=tmp_path,
                   timeout=120)
    assert done.returncode == 0, done.stderr
