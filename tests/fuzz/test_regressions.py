"""Crashes the fuzz campaigns found (``scripts/fuzz.py``), kept as regression tests on the PoCL device."""

from conftest import FIXTURES, run_cli

CASES = FIXTURES / "fuzz_regressions"


def test_a_spec_that_gives_a_kernel_too_few_arguments_is_refused(pocl, tmp_path):
    # hotspot's nine arguments, `args = []` in the spec: pyopencl's set_args raised a TypeError in the worker
    r = run_cli("measure", CASES / "no_args.toml", "--sizes", 64, "--device", pocl.info.id, "--budget", "0.05",
                "-o", tmp_path / "m.jsonl", cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "takes 9 argument(s)" in r.stderr and "Traceback" not in r.stderr


def test_a_launch_smaller_than_its_work_group_is_checked_as_run(pocl, tmp_path):
    # transpose_tiled with its side n = 3 and 16 x 16 work-groups: the device runs 16 x 16 work-items, and the
    # unguarded kernel reads and writes element 60 of 9; it crashed (or hung) the runtime
    r = run_cli("measure", CASES / "launch_below_its_work_group.toml", "--sizes", 4194304, "--device", pocl.info.id,
                "--budget", "0.05", "-o", tmp_path / "m.jsonl", cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert ("argument `src`: the launch reads element 60 but the buffer holds 9 float32" in r.stderr
            and "run as [16, 16] (whole work-groups of [16, 16])" in r.stderr and "Traceback" not in r.stderr)
    assert not (tmp_path / "m.jsonl").exists() or not (tmp_path / "m.jsonl").read_text().strip()
