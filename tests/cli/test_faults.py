"""Faults from outside and from the device: a runtime that really crashes ends in exit 3 with the records before it
kept; SIGKILL and SIGINT at random moments during ``measure`` and ``validate`` leave a log whose every line is a
whole record, with none duplicated and at most the one in flight lost, and a rerun that resumes.

The CI versions kill a few times; ``-m slow`` runs the acceptance's twenty SIGKILLs.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, POCL_PROFILE, REPO, run_cli

pytestmark = pytest.mark.pocl

SUITE = FIXTURES / "faults" / "suite"
MEASURE_SIZES = [4096, 8192, 16384, 32768]
RECORD_KEYS = {"kernel", "phase", "size", "model_s", "median_s", "samples", "samples_s", "device", "command", "date"}


def start(args, cwd: Path) -> tuple[subprocess.Popen, Path]:
    """``python -m gpuprofiler ARGS`` in the background, its stderr to a file."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    err = cwd / f"stderr-{time.monotonic_ns()}.txt"
    with open(err, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "gpuprofiler", *map(str, args)], cwd=cwd, env=env,
                                stdout=subprocess.DEVNULL, stderr=fh)
    return proc, err


def wait_for(err: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while text not in err.read_text():
        if proc.poll() is not None or time.monotonic() > end:
            raise AssertionError(f"never said {text!r}:\n{err.read_text()}")
        time.sleep(0.02)


def interrupt(args, cwd: Path, sig: int, delay: float, ready: str) -> tuple[int, str]:
    """Run, wait until it says ``ready`` (the command has started: the interpreter and its handlers are up), then
    ``delay`` seconds, then send ``sig``; returns the exit status and stderr."""
    proc, err = start(args, cwd)
    try:
        wait_for(err, ready, proc)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, err.read_text()


def whole_lines(path: Path) -> list[dict]:
    """Every line of the log, each of which must be a whole record; no record twice."""
    if not path.exists():
        return []
    text = path.read_text()
    assert not text or text.endswith("\n"), f"a torn last line: {text[-200:]!r}"
    records = [json.loads(line) for line in text.splitlines()]  # raises on a partial line
    for r in records:
        assert RECORD_KEYS <= set(r), sorted(RECORD_KEYS - set(r))
        assert len(r["samples_s"]) == r["samples"] >= 5
    keys = [(r["date"], r["kernel"], r["phase"], r["size"], tuple(r["samples_s"])) for r in records]
    assert len(set(keys)) == len(keys), "a record stored twice"
    return records


def tracebacks(stderr: str) -> bool:
    """Whether stderr holds a traceback, other than Python's note of an interrupt that landed in a garbage
    collector's callback ("Exception ignored in: <function ...remove>" ... "KeyboardInterrupt": Python drops that
    interrupt, and the command goes on)."""
    kept, skipping = [], False
    for line in stderr.splitlines():
        if line.startswith("Exception ignored in"):
            skipping = True
        elif skipping and line.startswith("KeyboardInterrupt"):
            skipping = False
        elif not skipping:
            kept.append(line)
    return any("Traceback" in line for line in kept)


def saved_lines(stderr: str) -> int:
    return sum(1 for line in stderr.splitlines() if line.endswith("; saved"))


# ---- a runtime that crashes -------------------------------------------------------------------------------------

def test_a_kernel_writing_far_out_of_bounds_ends_in_exit_3_with_the_records_before_it(tmp_path):
    log = tmp_path / "m.jsonl"
    done = run_cli("measure", FIXTURES / "bounds" / "wild.toml", "--sizes", "1024,2048", "--sequential",
                   "--budget", "0.1", "-o", log, cwd=tmp_path, timeout=180)
    assert done.returncode == 3, done.stderr
    assert ("gpuprofiler: device error: the device runtime crashed while running wild at size 2048 (likely an "
            "out-of-bounds access)") in done.stderr
    assert "Traceback" not in done.stderr and "1 finished measurement(s) kept" in done.stderr
    [rec] = whole_lines(log)
    assert rec["size"] == 1024 and rec["kernel"] == "wild"


def test_a_kernel_that_never_ends_is_stopped_by_the_timeout_with_the_records_before_it(tmp_path):
    log = tmp_path / "m.jsonl"
    t0 = time.monotonic()
    done = run_cli("measure", FIXTURES / "bounds" / "spin.toml", "--sizes", "1024,2048", "--sequential",
                   "--budget", "0.1", "--timeout", "3", "-o", log, cwd=tmp_path, timeout=180)
    assert done.returncode == 3, done.stderr
    assert ("gpuprofiler: device error: spin at size 2048 gave no result for 3 s and was stopped as hung"
            in done.stderr)
    assert "Traceback" not in done.stderr and "1 finished measurement(s) kept" in done.stderr
    [rec] = whole_lines(log)
    assert rec["size"] == 1024 and rec["kernel"] == "spin"
    assert time.monotonic() - t0 < 150  # the spinning worker was stopped, not waited for


@pytest.mark.parametrize("bad", ["-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_duration_is_refused(tmp_path, bad):
    done = run_cli("measure", FIXTURES / "bounds" / "spin.toml", f"--timeout={bad}", cwd=tmp_path)
    assert done.returncode == 2 and "--timeout" in done.stderr and "Traceback" not in done.stderr


def test_a_crash_during_validate_is_listed_and_the_rest_is_measured_and_predicted(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    for f in (SUITE / "tiny_vadd.toml", SUITE / "vadd.cl", FIXTURES / "bounds" / "wild.cl"):
        (suite / f.name).write_text(f.read_text())
    wild = (FIXTURES / "bounds" / "wild.toml").read_text().replace("small = [1024, 2048]",
                                                                    "small = [512, 1024]\ntarget = [2048]")
    (suite / "wild.toml").write_text(wild)
    done = run_cli("validate", "--suite", suite, "--quick", "--spec-sizes", "--models", "fractal", "--profile",
                   POCL_PROFILE, "-o", tmp_path / "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 4, done.stderr  # completed, one item failed
    assert ("1 of 2 item(s) failed: wild (device crash): the device runtime crashed while running wild at one of "
            "the sizes 512, 1024, 2048 (timed in alternation) (likely an out-of-bounds access)") in done.stderr
    assert "Traceback" not in done.stderr
    # tiny_vadd (before wild) and its later visits (after the crash, in a new worker) measured and predicted
    groups = groups_of(whole_lines(tmp_path / "out" / "measurements.jsonl"))
    assert {recs[0]["kernel"] for recs in groups.values()} == {"tiny_vadd"} and len(groups) == 4 * 3
    assert "tiny_vadd," in (tmp_path / "out" / "predictions.csv").read_text()
    assert "wild,opencl" in (tmp_path / "out" / "failed.csv").read_text()


# ---- measure ----------------------------------------------------------------------------------------------------

def measure_args(log: Path):
    return ["measure", "vadd", "--sizes", ",".join(map(str, MEASURE_SIZES)), "--sequential", "--budget", "0.1",
            "--warmup", "1", "--no-check", "-o", log]


def kill_measure(tmp_path: Path, rng: random.Random, sig: int) -> bool:
    """One run of measure, signalled at a random moment; whether the signal cut it short."""
    log = tmp_path / "m.jsonl"
    before = len(whole_lines(log))
    code, stderr = interrupt(measure_args(log), tmp_path, sig, rng.uniform(0.0, 2.0), "measurements go to")
    records = whole_lines(log)
    new = len(records) - before
    saved = saved_lines(stderr)
    # each record is stored before it is reported: every one reported is there; at most the one in flight beyond
    assert saved <= new <= min(saved + 1, len(MEASURE_SIZES)), (new, saved, stderr)
    if sig == signal.SIGINT:
        assert code in (0, 130) and not tracebacks(stderr), stderr
        if "finished measurement(s) kept" in stderr:
            assert f"{new} finished measurement(s) kept" in stderr, stderr
    else:
        assert code in (0, -signal.SIGKILL)
    return code != 0


def rerun_measure(tmp_path: Path) -> None:
    log = tmp_path / "m.jsonl"
    before = len(whole_lines(log))
    done = run_cli(*measure_args(log), cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    assert len(whole_lines(log)) == before + len(MEASURE_SIZES)


def test_measure_survives_sigkill_and_sigint(tmp_path):
    rng = random.Random(17)
    cut = [kill_measure(tmp_path, rng, sig) for sig in (signal.SIGKILL, signal.SIGINT, signal.SIGKILL)]
    rerun_measure(tmp_path)
    assert sum(cut) >= 1, "no signal landed while measure ran"


@pytest.mark.slow
def test_measure_ten_sigkills(tmp_path):
    rng = random.Random(1017)
    cut = [kill_measure(tmp_path, rng, signal.SIGKILL) for _ in range(10)]
    kill_measure(tmp_path, rng, signal.SIGINT)
    rerun_measure(tmp_path)
    print(f"\nmeasure: {sum(cut)} of 10 SIGKILLs landed while it ran")
    assert sum(cut) >= 6


# ---- validate ---------------------------------------------------------------------------------------------------

def validate_args(out: Path):
    return ["validate", "--suite", SUITE, "--quick", "--spec-sizes", "--models", "fractal", "--profile",
            POCL_PROFILE, "-o", out]


def groups_of(records: list[dict]) -> dict:
    """validate's stored groups (one per item, size and visit), each whole: no group partial, none measured
    twice."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["validate_group"], []).append(r)
    for recs in groups.values():
        assert len(recs) == recs[0]["validate_group_size"], "a partial group"
    keys = [(recs[0]["validate_digest"], recs[0]["size"], recs[0]["validate_visit"]) for recs in groups.values()]
    assert len(set(keys)) == len(keys), "an item's size stored twice"
    return groups


def kill_validate(tmp_path: Path, rng: random.Random, sig: int) -> bool:
    """One run of validate, signalled at a random moment; whether the signal cut it short."""
    out = tmp_path / "out"
    code, stderr = interrupt(validate_args(out), tmp_path, sig, rng.uniform(0.0, 1.0), "measurement(s) to run")
    groups_of(whole_lines(out / "measurements.jsonl"))
    if sig == signal.SIGINT:
        assert code in (0, 130) and not tracebacks(stderr), stderr
    else:
        assert code in (0, -signal.SIGKILL)
    return code != 0


def rerun_validate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stored = groups_of(whole_lines(out / "measurements.jsonl"))
    done = run_cli(*validate_args(out), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    if stored:  # the rerun resumes: what was stored is reused, not measured again
        assert f"reusing {len(stored)} finished measurement(s)" in done.stderr, done.stderr
    groups = groups_of(whole_lines(out / "measurements.jsonl"))
    assert len(groups) == 2 * 4 * 3 and set(stored) <= set(groups)  # two items at four sizes, three visits each
    assert (out / "report.md").exists()


@pytest.mark.slow  # over five seconds; a cheaper test of the same behaviour stays in the default run
def test_validate_survives_sigkill_and_sigint_and_resumes(tmp_path):
    rng = random.Random(23)
    cut = [kill_validate(tmp_path, rng, sig) for sig in (signal.SIGKILL, signal.SIGINT, signal.SIGKILL)]
    rerun_validate(tmp_path)
    assert sum(cut) >= 1, "no signal landed while validate ran"


@pytest.mark.slow
def test_validate_ten_sigkills(tmp_path):
    """Five runs from scratch, each killed twice (a run that resumes a stored run is shorter), then resumed."""
    rng = random.Random(1023)
    cut = []
    for run in range(5):
        folder = tmp_path / f"run{run}"
        folder.mkdir()
        cut += [kill_validate(folder, rng, signal.SIGKILL) for _ in range(2)]
        if run == 4:
            kill_validate(folder, rng, signal.SIGINT)
        rerun_validate(folder)
    print(f"\nvalidate: {sum(cut)} of 10 SIGKILLs landed while it ran")
    assert sum(cut) >= 6


@pytest.mark.parametrize("option, value", [("--min-samples", "1000000000"), ("--min-samples", "0"),
                                           ("--warmup", "100000000"), ("--warmup", "-1"), ("--budget", "0"),
                                           ("--budget", "inf"), ("--budget", "1e9"), ("--rel-ci", "2"),
                                           ("--rel-ci", "nan")])
def test_timing_options_out_of_their_range_are_refused_before_measuring(option, value):
    """Each timing option in its range (``cli.common.RANGES``), else exit 2 naming it, before a device is opened."""
    import argparse

    from gpuprofiler.cli.common import add_timing, policy
    from gpuprofiler.errors import UserError
    from gpuprofiler.measure.policy import MEASURE

    p = argparse.ArgumentParser()
    add_timing(p, MEASURE)
    assert policy(p.parse_args([])) is not None  # the defaults are in range
    with pytest.raises(UserError, match=f"{option} .*expected"):
        policy(p.parse_args([f"{option}={value}"]))


def test_extrapolate_refuses_a_coverage_outside_0_to_1_and_a_budget_is_named_as_the_command_names_it(tmp_path):
    for bad in ("-1", "0", "1.5", "nan"):
        done = run_cli("extrapolate", "vadd", f"--coverage={bad}", cwd=tmp_path)
        assert done.returncode == 2 and "--coverage" in done.stderr and "Traceback" not in done.stderr, done.stderr
    import argparse

    from gpuprofiler.cli.common import add_timing, policy
    from gpuprofiler.errors import UserError
    from gpuprofiler.measure.policy import MEASURE

    p = argparse.ArgumentParser()
    add_timing(p, MEASURE, budget_option="--seconds")  # tune's name for it
    with pytest.raises(UserError, match="--seconds -1.0: expected seconds above 0"):
        policy(p.parse_args(["--seconds=-1"]))


@pytest.mark.pocl
def test_measure_refuses_an_output_that_cannot_take_records_before_measuring(tmp_path):
    for bad in ("/dev/full", tmp_path):
        done = run_cli("measure", "vadd", "--sizes", "1024", "--budget", "0.05", "-o", bad, cwd=tmp_path)
        assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr
        assert "saved" not in done.stderr  # nothing was measured


def test_a_plot_path_is_checked_before_any_work(tmp_path):
    """--plot: a format matplotlib writes (by extension) in a file that can be written, else exit 2 naming it, before
    a device is opened; a good path is created, a later plot overwrites it."""
    from gpuprofiler.cli.common import plot_path
    from gpuprofiler.errors import UserError

    assert plot_path(None) is None and plot_path(str(tmp_path / "a" / "p.png")) == str(tmp_path / "a" / "p.png")
    for bad, message in (("x.txt", "not .txt"), (str(tmp_path / "noext"), "no extension"),
                         (str(tmp_path), "no extension"), (str(tmp_path / "m.jsonl" / "p.png"), "cannot write"),
                         (str(tmp_path / "d.png"), "not a regular file")):
        (tmp_path / "m.jsonl").touch()
        if bad.endswith("d.png"):
            (tmp_path / "d.png").mkdir()
        with pytest.raises(UserError, match=message):
            plot_path(bad)
    done = run_cli("measure", "vadd", "--repeat", "2", "--plot", "x.txt", "-o", tmp_path / "m.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and "--plot x.txt" in done.stderr and "saved" not in done.stderr
    assert (tmp_path / "m.jsonl").read_text() == ""


def test_validate_refuses_a_results_folder_it_cannot_write_before_any_work(tmp_path):
    """-o on a device, inside /proc, or under a file: exit 2 naming it (they were tracebacks after the predictions)."""
    (tmp_path / "file").write_text("x\n")
    for bad, message in (("/dev/full", "exists and is not a folder"), ("/proc/out", "cannot write results there"),
                         (tmp_path / "file" / "out", "cannot write results there")):
        done = run_cli("validate", "--replay", FIXTURES / "replay" / "measurements.jsonl", "--profile", POCL_PROFILE,
                       "--models", "fractal", "-o", bad, cwd=tmp_path)
        assert done.returncode == 2 and f"-o {bad}: {message}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
