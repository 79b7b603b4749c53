"""`gpuprofiler tune` on the real PoCL device: failures reported without stopping, a killed tune resumed."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import KERNELS, REPO, pocl_id, run_cli

from gpuprofiler.errors import SOME_FAILED
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.tune.space import parse_space
from gpuprofiler.tune.store import TuneStore
from gpuprofiler.tune.strategies import create
from gpuprofiler.tune.tuner import Tuner
from gpuprofiler.workloads import isolated
from gpuprofiler.workloads.spec import load_spec

QUICK = TimingPolicy(warmup=1, min_samples=5, budget_s=0.05)

VARIANTS = """// vadd with variants: V=1 right, V=2 does not compile, V=3 computes the wrong thing
__kernel void vadd(int n, __global const float *a, __global const float *b, __global float *c)
{
    int i = get_global_id(0);
#if V == 2
    this is not C;
#endif
    if (i < n)
#if V == 3
        c[i] = a[i] - b[i];
#else
        c[i] = a[i] + b[i];
#endif
}
"""


@pytest.fixture
def variants(tmp_path):
    (tmp_path / "vadd.cl").write_text(VARIANTS)
    text = (KERNELS / "vadd.toml").read_text().replace('cuda = "vadd.cu"\n', "")
    text = text.replace("[[args]]", '[params]\nV = "1"\nW = "256"\n\n[defines]\nV = "V"\n\n[[args]]', 1)
    text = text.replace("local = [256]", 'local = ["W"]')
    (tmp_path / "vadd.toml").write_text(text)
    return tmp_path / "vadd.toml"


def test_failures_are_rows_and_the_tune_goes_on(pocl, variants, tmp_path):
    spec = load_spec(variants)
    space = parse_space("V=1,2,3;W=64,100032", ["W % 64 == 0", "V > K"])
    store = TuneStore(tmp_path / "out" / "tune.jsonl", pocl.info)
    tuner = Tuner(pocl, spec, 4096, space, store, policy=QUICK, isolate=False)
    assert tuner.candidates == []  # `V > K` cannot be evaluated: every configuration is reported, none run
    assert all(r["status"] == "invalid" and "unknown name 'K'" in r["reason"] for r in tuner.table())

    space = parse_space("V=1,2,3;W=64,100032")
    tuner = Tuner(pocl, spec, 4096, space, store, policy=QUICK, isolate=False)
    create("brute").search(tuner)
    rows = {r["config"]: r for r in tuner.table()}
    assert rows["V=1;W=64"]["status"] == "ok" and rows["V=1;W=64"]["seconds"] > 0 and rows["V=1;W=64"]["stage"] == ""
    assert rows["V=2;W=64"]["status"] == "failed" and rows["V=2;W=64"]["stage"] == "compile"
    assert rows["V=3;W=64"]["status"] == "failed" and "differs" in rows["V=3;W=64"]["reason"]  # wrong result
    assert rows["V=3;W=64"]["stage"] == "check"
    assert rows["V=1;W=100032"]["status"] == "failed"  # a work-group larger than the device takes
    assert tuner.best().key == "V=1;W=64"
    assert tuner.table()[0]["config"] == "V=1;W=64"
    assert {f.item: f.stage for f in tuner.failures()}["V=2;W=64"] == "compile" and len(tuner.failures()) == 5

    # a rerun measures only the failed configurations again (they fail again); the measured one comes from the store
    measured = []
    original = isolated.measure

    def counted(backend, item, sizes, *a, **k):
        measured.append(k.get("overrides"))
        return original(backend, item, sizes, *a, **k)

    again = Tuner(pocl, spec, 4096, space, TuneStore(tmp_path / "out" / "tune.jsonl", pocl.info), policy=QUICK,
                  isolate=False)
    isolated.measure = counted
    try:
        create("brute").search(again)
    finally:
        isolated.measure = original
    assert {r["config"]: r["status"] for r in again.table()} == {k: r["status"] for k, r in rows.items()}
    assert {r["config"] for r in again.table() if r["reused"]} == {"V=1;W=64"} and len(measured) == 5


def test_a_configuration_that_does_not_compile_is_listed_and_the_tune_exits_4(variants, tmp_path):
    """The command's side of the test above (whose rerun tries the failed configurations again): failed.csv, the
    stage in table.csv and in the table, the reason on stderr, exit 4."""
    args = ("tune", variants, "--space", "V=1,2", "--size", "4096", "--seconds", "0.05", "-o", tmp_path / "t")
    done = run_cli(*args)
    assert done.returncode == SOME_FAILED, done.stderr
    with open(tmp_path / "t" / "failed.csv", newline="") as fh:
        [failed] = list(csv.DictReader(fh))
    assert failed["item"] == "V=2" and failed["stage"] == "compile" and "OpenCL compile error" in failed["reason"]
    assert "1 of 2 configuration(s) failed: V=2 (compile): OpenCL compile error" in done.stderr
    assert "best: V=1" in done.stdout and "compile: OpenCL compile error" in done.stdout
    with open(tmp_path / "t" / "table.csv", newline="") as fh:
        assert {r["V"]: r["stage"] for r in csv.DictReader(fh)} == {"1": "", "2": "compile"}


@pytest.mark.slow
def test_a_killed_tune_resumes_without_measuring_again(tmp_path):
    out = tmp_path / "tune"
    args = [sys.executable, "-m", "gpuprofiler", "tune", "spmv_sell", "--space", "S=1,2,4,8;Nt=64,128",
            "--size", "30000", "--seconds", "0.05", "--matrix", "banded", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    store = out / "tune.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not store.exists() or len(store.read_text().splitlines()) < 2):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [json.loads(line) for line in store.read_text().splitlines()]
    assert 2 <= len(before) < 8
    done = run_cli(*args[3:])
    assert done.returncode == 0, done.stderr
    after = [json.loads(line) for line in store.read_text().splitlines()]
    keys = [r["tune_key"] for r in after]
    assert len(keys) == len(set(keys)) == 8  # every configuration once
    assert after[:len(before)] == before  # the killed run's results kept as they were
    assert f"{len(before)} stored result(s) reused" in done.stdout
    assert (out / "table.csv").exists() and (out / "space.png").stat().st_size > 0


@pytest.mark.parametrize("extra, message", [
    (["--space", "Q=1,2"], "Q not among the spec's \\[params\\]"),
    (["--space", "S=1,2", "--strategy", "genetic"], "choose from brute, random, model"),
    (["--space", "S=1,2", "--matrix", "poisson9d"], "neither a matrix family"),
    (["--space", "S=1,2", "--budget", "0"], "at least 1 configuration"),
    (["--space", "S=1;2"], "not NAME=V1"),
])
def test_bad_tune_input_is_a_clear_error(tmp_path, extra, message):
    done = run_cli("tune", "spmv_sell", "--size", "1000", "-o", tmp_path / "t", *extra)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    import re

    assert re.search(message, done.stderr), done.stderr
    assert not (tmp_path / "t" / "tune.jsonl").exists()


def test_tune_refuses_an_app(tmp_path):
    done = run_cli("tune", "cg", "--space", "S=1", "-o", tmp_path / "t")
    assert done.returncode == 2 and "takes a kernel spec" in done.stderr


@pytest.mark.slow
def test_model_strategy_ranks_by_a_static_model_with_a_profile(tmp_path):
    from conftest import POCL_PROFILE

    out = tmp_path / "tune"
    done = run_cli("tune", "spmv_sell", "--space", "S=1,8,32;Nt=64,256", "--size", "40000", "--seconds", "0.05",
                   "--strategy", "model", "--rank", "maxplus", "--profile", POCL_PROFILE, "--matrix", "banded",
                   "-o", out)
    assert done.returncode == 0, done.stderr
    assert "by maxplus at 40000" in done.stderr
    recs = [json.loads(line) for line in (out / "tune.jsonl").read_text().splitlines()]
    ranks = [r for r in recs if r["tune_stage"] == "rank:maxplus"]
    assert len(ranks) == 6 and all(r["tune_status"] == "ok" and r["model_s"] > 0 for r in ranks)
    assert not [r for r in recs if r["tune_stage"] == "rank"]  # nothing timed at a ranking size
    assert 1 <= len([r for r in recs if r["tune_stage"] == "target"]) <= 6
    bad = run_cli("tune", "spmv_sell", "--space", "S=1", "--size", "4000", "--strategy", "model", "--rank", "fractal",
                  "--profile", POCL_PROFILE, "-o", tmp_path / "t2")
    assert bad.returncode == 2 and "not a static one" in bad.stderr


def test_a_tune_that_measures_nothing_exits_2_saying_why(variants, tmp_path):
    """Every configuration refused by a restriction that cannot be evaluated: nothing ran, nothing failed: exit 2
    with the reason (it was 1, outside the documented codes)."""
    done = run_cli("tune", variants, "--space", "V=1,2;W=64", "--restrict", "V > K", "--size", "4096",
                   "--device", pocl_id(), "-o", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "no configuration of 0 allowed was measured" in done.stderr and "Traceback" not in done.stderr
