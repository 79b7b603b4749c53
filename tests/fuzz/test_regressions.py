"""Crashes the fuzz campaigns found (``scripts/fuzz.py``), kept as regression tests on the PoCL device."""

from conftest import FIXTURES, run_cli

CASES = FIXTURES / "fuzz_regressions"


def test_a_spec_that_gives_a_kernel_too_few_arguments_is_refused(pocl, tmp_path):
    # hotspot's nine arguments, `args = []` in the spec: pyopencl's set_args raised a TypeError in the worker
    r = run_cli("measure", CASES / "no_args.toml", "--sizes", 64, "--device", pocl.info.id, "--budget", "0.05",
                "-o", tmp_path / "m.jsonl", cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "takes 9 argument(s)" in r.stderr and "Traceback" not in r.stderr
