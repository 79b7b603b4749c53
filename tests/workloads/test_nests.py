"""Kernels generated from loop nests with loopy: every variant against the untransformed nest on PoCL, the spec
that selects them, and bad nest files."""

import itertools

import pytest
from conftest import KERNELS, run_cli

pytest.importorskip("loopy", reason="generate needs loopy: pip install 'gpuprofiler[generate]'")

from gpuprofiler.errors import UserError  # noqa: E402
from gpuprofiler.workloads import nests  # noqa: E402
from gpuprofiler.workloads.kernel import measure_spec  # noqa: E402
from gpuprofiler.workloads.safe_eval import evaluate  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402

NESTS = KERNELS / "nests"


@pytest.mark.parametrize("name, size", [("gemm", 37), ("stencil2d", 45), ("matvec", 70)])
def test_every_variant_matches_the_untransformed_nest(pocl, tmp_path, name, size):
    nest = nests.load_nest(NESTS / f"{name}.py")
    made = nests.variants(nest)
    assert len(made) == len(nest.configs())
    _, toml = nests.write(nest, made, tmp_path)
    rows = nests.verify(nest, toml, pocl, made, size)  # sizes that are no multiple of the tiles: the guards count
    ran = [r for r in rows if r["status"] != "refused by loopy"]
    assert len(ran) >= len(rows) - 3
    assert all(r["status"] == "ok" and r["max_rel_error"] < 1e-5 for r in ran), [r for r in ran if r["status"] != "ok"]
    refused = [r for r in rows if r["status"] == "refused by loopy"]
    assert all("LoopyError" in r["reason"] for r in refused)


def test_the_spec_selects_variants_and_refuses_others(pocl, tmp_path, quick_policy):
    nest = nests.load_nest(NESTS / "gemm.py")
    made = nests.variants(nest)
    _, toml = nests.write(nest, made, tmp_path)
    base = nests.write_untransformed(nest, tmp_path)
    spec = load_spec(toml)
    [rec] = measure_spec(pocl, spec, [48], quick_policy, overrides={"TI": 4, "TJ": 32, "PREFETCH": 1})
    assert rec["checked"] is True and rec["global_size"] == [64, 48] and rec["local_size"] == [32, 4]
    [rec] = measure_spec(pocl, load_spec(base), [48], quick_policy)
    assert rec["checked"] is True and rec["global_size"] == [1]
    refused = next(k for k, v in enumerate(made) if v.error)
    from gpuprofiler.errors import GpuProfilerError

    with pytest.raises(GpuProfilerError, match="loopy refused|compile"):
        measure_spec(pocl, spec, [48], quick_policy, overrides=dict(made[refused].config))
    assert spec.instantiate(48, {"TI": 3, "TJ": 32, "PREFETCH": 0}).names["VARIANT"] == -1  # outside PARAMS
    with pytest.raises(GpuProfilerError, match="no generated variant"):
        measure_spec(pocl, spec, [48], quick_policy, overrides={"TI": 3, "TJ": 32, "PREFETCH": 0})


def test_variant_index_is_the_product_order():
    class Fake:
        params = {"A": [1, 2], "B": [3, 4, 5], "C": [0, 1]}

    text = nests._variant_expression(Fake())
    for k, values in enumerate(itertools.product(*Fake.params.values())):
        assert evaluate(text, dict(zip(Fake.params, values))) == k
    for bad in ({"A": 7, "B": 3, "C": 0}, {"A": 1, "B": 6, "C": 1}, {"A": 2, "B": 5, "C": 2}):
        assert evaluate(text, bad) == -1


NEST = '''
import loopy as lp
NAME = "scale"
DOMAIN = "{[i]: 0<=i<n}"
INSTRUCTIONS = "y[i] = 2*x[i]"
ARGS = {"x": ("float32", ("n",)), "y": ("float32", ("n",), "output")}
PARAMS = {"T": [16, 32]}
GLOBAL = ["ceil(n / T) * T"]
LOCAL = ["T"]
CHECKS = [("y", "2*x")]
SMALL = [100]

def transform(knl, T):
    return lp.split_iname(knl, "i", T, outer_tag="g.0", inner_tag="l.0")
'''


def test_generate_command_writes_a_tunable_spec(tmp_path):
    (tmp_path / "scale.py").write_text(NEST)
    done = run_cli("generate", tmp_path / "scale.py", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "2 of 2 variant(s) agree" in done.stdout
    tuned = run_cli("tune", tmp_path / "out" / "scale.toml", "--space", "T=16,32,48", "--size", "1000",
                    "--seconds", "0.05", "-o", tmp_path / "tune")
    assert tuned.returncode == 4, tuned.stderr  # completed, one configuration failed
    assert "T=48" in tuned.stdout and "failed" in tuned.stdout  # no variant: reported, not fatal
    assert "1 of 3 configuration(s) failed: T=48 (compile)" in tuned.stderr


@pytest.mark.parametrize("change, message", [
    (("NAME = \"scale\"", ""), "must define NAME"),
    (("PARAMS = {\"T\": [16, 32]}", "PARAMS = {\"T\": []}"), "non-empty lists of integers"),
    (("PARAMS = {\"T\": [16, 32]}", "PARAMS = {\"T\": [16, 32]}\nDEFAULTS = {\"T\": 8}"), "DEFAULTS must give"),
    (("ARGS = {", "ARGS = {\"z\": (\"complex64\", (\"n\",)), "), "dtype one of"),
    (("import loopy as lp", "import loopy as lp\nraise RuntimeError('boom')"), "cannot load the nest"),
])
def test_bad_nest_files_are_clear_errors(tmp_path, change, message):
    assert change[0] in NEST
    (tmp_path / "bad.py").write_text(NEST.replace(change[0], change[1], 1))
    with pytest.raises(UserError, match=message):
        nest = nests.load_nest(tmp_path / "bad.py")
        nests.variants(nest)


def test_a_launch_that_does_not_match_loopy_is_reported(pocl, tmp_path):
    (tmp_path / "scale.py").write_text(NEST.replace('GLOBAL = ["ceil(n / T) * T"]', 'GLOBAL = ["n"]'))
    done = run_cli("generate", tmp_path / "scale.py", "-o", tmp_path / "out", "--verify-size", "100")
    assert done.returncode == 1 and "launch differs" in done.stdout and "Traceback" not in done.stderr


def test_a_transform_that_raises_names_the_line(tmp_path):
    (tmp_path / "scale.py").write_text(NEST.replace('    return lp.split_iname', '    1 / 0\n    return lp.split_iname'))
    made = nests.variants(nests.load_nest(tmp_path / "scale.py"))
    assert all("ZeroDivisionError" in v.error and "(line 14)" in v.error for v in made)


def test_generate_without_a_nest_is_a_clear_error(tmp_path):
    done = run_cli("generate", tmp_path / "nope.py")
    assert done.returncode == 2 and "no nest file" in done.stderr and "Traceback" not in done.stderr
