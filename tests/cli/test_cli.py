"""The command line as a user meets it: subprocesses on the real PoCL device, exit codes, stdout JSON."""

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import KERNELS, REPO, run_cli

pytestmark = pytest.mark.pocl



def test_devices_json_lists_pocl(tmp_path):
    done = run_cli("devices", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    devices = json.loads(done.stdout)
    assert any("portable" in d["platform"].lower() and d["type"] == "cpu" for d in devices)
    assert sum(d["default"] for d in devices) == 1


def test_measure_vadd_json(tmp_path):
    done = run_cli("measure", KERNELS / "vadd.toml", "--sizes", "1048576,4194304", "--json", "--budget", "0.3",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)  # stdout is only JSON
    assert [r["size"] for r in records] == [1048576, 4194304]
    for r in records:
        assert r["median_s"] > 0 and r["samples"] >= 5 and r["checked"] is True
        assert r["ci_low_s"] <= r["median_s"] <= r["ci_high_s"]
        assert r["kernel"] == "vadd" and r["phase"] == "vadd"
    logs = list((tmp_path / "results").glob("*/measurements.jsonl"))
    assert len(logs) == 1
    lines = [json.loads(x) for x in logs[0].read_text().splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert {"device", "version", "date", "host", "command"} <= set(line)
        assert "measure" in line["command"] and line["device"]["backend"] == "opencl"


def test_measure_app_by_name_one_record_per_phase(tmp_path):
    done = run_cli("measure", "cg", "--sizes", "8192", "--json", "--budget", "0.3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    phases = [r["phase"] for r in records]
    assert len(phases) == len(set(phases)) and {"spmv", "dot_partial", "axpy", "xpay"} <= set(phases)
    assert all(r["checked"] for r in records)


def test_measure_repeat_blocks_table_and_plot(tmp_path):
    done = run_cli("measure", "vadd", "--sizes", "4096,65536", "--repeat", "3", "--budget", "0.05",
                   "--plot", tmp_path / "blocks.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "p10 spread" in done.stdout and (tmp_path / "blocks.png").stat().st_size > 0
    lines = [json.loads(x) for x in next((tmp_path / "results").glob("*/measurements.jsonl")).read_text().splitlines()]
    assert sorted((r["size"], r["repeat_block"]) for r in lines) == [(n, b) for n in (4096, 65536) for b in range(3)]
    assert len({r["repeat_id"] for r in lines}) == 1 and {r["repeat_blocks"] for r in lines} == {3}
    assert all(r["interleaved_with"] == [65536 + 4096 - r["size"]] and r["model_statistic"] == "p10" for r in lines)
    assert [r["checked"] for r in sorted(lines, key=lambda r: r["repeat_block"])][:2] == [True, True]


def test_measure_plot_without_repeat_is_a_user_error(tmp_path):
    done = run_cli("measure", "vadd", "--sizes", "4096", "--plot", tmp_path / "x.png", cwd=tmp_path)
    assert done.returncode == 2 and "--repeat" in done.stderr and "Traceback" not in done.stderr


def copy_vadd(tmp_path):
    for f in KERNELS.glob("vadd.*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "vadd.toml"


def test_syntax_error_exits_2_with_compiler_message(tmp_path):
    spec = copy_vadd(tmp_path)
    cl = tmp_path / "vadd.cl"
    cl.write_text(cl.read_text().replace("a[i] + b[i]", "a[i] + b[i] +* ;"))
    done = run_cli("measure", spec, "--sizes", "1024", cwd=tmp_path)
    assert done.returncode == 2
    assert "compile error" in done.stderr and "error:" in done.stderr.split("compile error", 1)[1]
    assert "Traceback" not in done.stderr


def test_unknown_dtype_exits_2_naming_the_field(tmp_path):
    spec = copy_vadd(tmp_path)
    spec.write_text(spec.read_text().replace('dtype = "float32"', 'dtype = "float33"', 1))
    done = run_cli("measure", spec, "--sizes", "1024", cwd=tmp_path)
    assert done.returncode == 2
    assert "args[1] (a).dtype" in done.stderr and "float33" in done.stderr and "Traceback" not in done.stderr


def test_import_in_expression_refused(tmp_path):
    spec = copy_vadd(tmp_path)
    spec.write_text(spec.read_text().replace('global = ["n"]', "global = [\"__import__('os')\"]"))
    done = run_cli("measure", spec, "--sizes", "1024", cwd=tmp_path)
    assert done.returncode == 2
    assert "__import__" in done.stderr and "not allowed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [["--device", "opencl:7:0"], ["--device", "nonsense"]])
def test_unknown_device_exits_2(tmp_path, args):
    done = run_cli("measure", "vadd", "--sizes", "1024", *args, cwd=tmp_path)
    assert done.returncode == 2 and "unknown device" in done.stderr


def test_device_out_of_memory_exits_3(tmp_path):
    # 3 arrays of 2**30 floats = 12 GiB: more than PoCL offers here; refused before anything is allocated
    done = run_cli("measure", "vadd", "--sizes", str(2**30), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "device error" in done.stderr and "GiB" in done.stderr and "Traceback" not in done.stderr


def test_scalar_overflow_is_a_user_error(tmp_path):
    done = run_cli("measure", "vadd", "--sizes", str(2**31), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "args[0] (n).value" in done.stderr and "int32" in done.stderr


def test_interrupt_keeps_finished_sizes(tmp_path):
    log = tmp_path / "m.jsonl"
    sizes = ",".join(str(1 << k) for k in range(16, 23))
    env_cmd = [sys.executable, "-m", "gpuprofiler", "measure", str(KERNELS / "vadd.toml"), "--sizes", sizes,
               "--budget", "1.5", "--rel-ci", "0", "--sequential", "-o", str(log)]  # sizes one after another:
    # timed in alternation, all seven are stored in one burst at the end of their rounds
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(env_cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = [json.loads(x) for x in log.read_text().splitlines()]
    assert 2 <= len(kept) < 7
    assert [r["size"] for r in kept] == [1 << k for k in range(16, 16 + len(kept))]
    assert "interrupted" in err and "kept" in err
