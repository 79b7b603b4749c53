"""``gpuprofiler validate`` on the real PoCL device goes on past items that fail: one refused by the bounds check,
one that does not compile, one that fails its check; each listed with its stage, the good one measured and predicted,
exit 4; a rerun reuses the good one's measurements and tries the failed ones again."""

import csv
import json

import pytest
from conftest import FIXTURES, POCL_PROFILE, pocl_id, run_cli

from gpuprofiler.errors import SOME_FAILED

pytestmark = pytest.mark.pocl

GOOD = FIXTURES / "faults" / "suite" / "tiny_vadd.toml"
VADD = FIXTURES / "faults" / "suite" / "vadd.cl"
BROKEN = """__kernel void vadd(int n, __global const float *a, __global const float *b, __global float *c)
{
    this is not C;
}
"""


def make_suite(folder):
    """tiny_vadd (good), broken (does not compile), wrong (checked against a - b), short (its output one element
    short of the one work-item per element launch: refused by the bounds check)."""
    folder.mkdir()
    good = GOOD.read_text()
    (folder / "vadd.cl").write_text(VADD.read_text())
    (folder / "broken.cl").write_text(BROKEN)
    (folder / "tiny_vadd.toml").write_text(good)
    variants = {
        "broken": good.replace('opencl = "vadd.cl"', 'opencl = "broken.cl"'),
        "wrong": good.replace('expect = "a + b"', 'expect = "a - b"'),
        "short": good.replace('shape = "n"\ninit = "zeros"', 'shape = "n - 1"\ninit = "zeros"'),
    }
    for name, text in variants.items():
        text = text.replace('name = "tiny_vadd"', f'name = "{name}"')
        assert text.count(name) >= 1 and text != good
        (folder / f"{name}.toml").write_text(text)
    return folder


def validate(suite, out, *extra):
    return run_cli("validate", "--suite", suite, "--device", pocl_id(), "--profile", POCL_PROFILE, "--quick",
                   "--spec-sizes", "--models", "fractal,maxplus", "-o", out, *extra)


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The suite validated once: (suite, output folder, the finished process)."""
    folder = tmp_path_factory.mktemp("failures")
    suite = make_suite(folder / "suite")
    return suite, folder / "out", validate(suite, folder / "out")


def test_failed_items_are_listed_with_their_stage_and_the_rest_is_predicted(first_run):
    suite, out, done = first_run
    assert done.returncode == SOME_FAILED == 4, done.stderr
    assert "Traceback" not in done.stderr
    failed = {r["item"]: r for r in read_csv(out / "failed.csv")}
    assert {k: r["stage"] for k, r in failed.items()} == {"broken": "compile", "wrong": "check", "short": "bounds"}
    assert "OpenCL compile error" in failed["broken"]["reason"]
    assert "differs from a - b" in failed["wrong"]["reason"]
    assert "run past the buffer" in failed["short"]["reason"]
    assert all(r["device"] == pocl_id() for r in failed.values())
    # the good item: measured on its three visits and predicted by both models
    rows = read_csv(out / "predictions.csv")
    assert {r["kernel"] for r in rows} == {"tiny_vadd"} and {r["model"] for r in rows} == {"fractal", "maxplus"}
    records = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    assert {r["kernel"] for r in records} == {"tiny_vadd"} and len(records) == 4 * 3
    report = (out / "report.md").read_text()
    assert "## Failed items" in report and "| broken | " in report and "| compile |" in report
    # the terminal: the summary, then the table of the failed items; the count on stderr
    assert "fractal" in done.stdout and "3 of 4 item(s) failed" in done.stdout
    assert [line.split()[:3] for line in done.stdout.splitlines() if line.startswith(("short ", "wrong "))] == [
        ["short", pocl_id(), "bounds"], ["wrong", pocl_id(), "check"]]
    assert "3 of 4 item(s) failed (listed in" in done.stderr


def test_a_rerun_reuses_the_good_item_and_tries_the_failed_ones_again(first_run):
    suite, out, _ = first_run
    again = validate(suite, out)
    assert again.returncode == 4, again.stderr
    assert "reusing 12 finished measurement(s)" in again.stderr and "1 item(s), 0 measurement(s)" not in again.stderr
    assert "broken size" in again.stderr and "failed (compile)" in again.stderr
    assert len((out / "measurements.jsonl").read_text().splitlines()) == 12
    assert {r["item"] for r in read_csv(out / "failed.csv")} == {"broken", "wrong", "short"}


def test_one_named_item_that_fails_exits_nonzero_with_the_reason(tmp_path):
    suite = make_suite(tmp_path / "suite")
    done = validate(suite, tmp_path / "out", "--items", "short")
    assert done.returncode == 4 and "Traceback" not in done.stderr
    assert "1 of 1 item(s) failed" in done.stdout and "bounds" in done.stdout
    # the one item's reason in full on stderr, as an error that stopped the run would give it
    assert "1 of 1 item(s) failed: short (bounds): " in done.stderr and "The launch would run past the buffer" in \
        done.stderr
    assert not (tmp_path / "out" / "predictions.csv").read_text().strip().splitlines()[1:]
