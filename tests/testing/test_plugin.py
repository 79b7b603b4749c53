"""The pytest plugin, run as a user runs it: real test files in a fresh pytest process (pytester) on the PoCL
device: save and compare baselines, fail on a real regression, pass without one, the model budget, skips, JSON."""

import json
import subprocess
import sys

import pytest
from conftest import pocl_id

pytest_plugins = "pytester"

pytestmark = [pytest.mark.pocl, pytest.mark.slow]

BUDGET = "0.15"

SPIN = '''
import os

import numpy as np
import pytest

SOURCE = """
__kernel void spin(__global float *x, int reps)
{
    int i = get_global_id(0);
    float v = x[i];
    for (int r = 0; r < reps; ++r)
        v = v * 0.999f + 0.5f;
    x[i] = v;
}
"""


def test_spin(gpu_device, gpu_measure):
    backend = gpu_device.backend
    kernel = backend.compile(SOURCE, "spin")
    buf, _ = backend.to_device(np.ones(1 << 14, dtype=np.float32))
    reps = np.int32(int(os.environ["SPIN_REPS"]))
    result = gpu_measure(lambda b: b.launch(kernel, (1 << 14,), None, [buf, reps]), name="spin")
    assert result.figure_s > 0 and result.low_s <= result.figure_s <= result.high_s
    assert result.device_id == gpu_device.id and len(result.samples_s) >= 5
'''


@pytest.fixture(scope="module")
def device():
    found = pocl_id()
    if found is None:
        pytest.fail("the PoCL device is missing: pip install pocl-binary-distribution")
    return found


def run(pytester, device, *args):
    return pytester.runpytest_subprocess(f"--gpu-device={device}", f"--gpu-budget={BUDGET}", "-p", "no:cacheprovider",
                                         "-rs", *args)


def test_save_compare_and_fail_on_a_real_regression(pytester, device, monkeypatch):
    """The same kernel saved, compared unchanged (passes), then made 4x slower (fails, 'regressed')."""
    pytester.makepyfile(test_spin=SPIN)
    monkeypatch.setenv("SPIN_REPS", "400")
    saved = run(pytester, device, "--gpu-save=base")
    saved.assert_outcomes(passed=1)
    base = json.loads((pytester.path / ".gpuprofiler" / "baselines" / "base.json").read_text())
    (entry,) = base["entries"].values()
    assert entry["kernel"] == "spin" and entry["device_id"] == device and len(entry["samples_s"]) >= 5
    assert "gpuprofiler: GPU kernel performance" in saved.stdout.str()

    same = run(pytester, device, "--gpu-compare=base", "--gpu-compare-fail=25%", f"--gpu-json={pytester.path}/r.json")
    same.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    (res,) = report["results"]
    assert res["comparison"] in ("unchanged", "slower", "faster") and res["baseline_s"] == entry["figure_s"]
    assert res["verdict"] != "FAIL" and abs(res["change"]) < 0.25 and len(res["samples_s"]) >= 5

    monkeypatch.setenv("SPIN_REPS", "1600")
    slower = run(pytester, device, "--gpu-compare=base", "--gpu-compare-fail=25%")
    slower.assert_outcomes(failed=1)
    out = slower.stdout.str()
    assert "regressed" in out and "against the baseline" in out and "Traceback" not in out


def test_a_builtin_spec_with_an_absolute_and_a_model_budget(pytester, device):
    pytester.makepyfile(test_budgets='''
import pytest

@pytest.mark.gpu_perf(max_s=10.0)
def test_fast_enough(gpu_measure):
    r = gpu_measure("vadd", 1 << 16)
    assert r.kernel == "vadd" and r.size == 1 << 16 and r.verdict == "ok"

@pytest.mark.gpu_perf(max_s=1e-9)
def test_over_budget(gpu_measure):
    gpu_measure("vadd", 1 << 16)

def test_an_app(gpu_measure):
    r = gpu_measure("cg", 1 << 14)  # a builtin app: its phases summed run by run
    assert r.kernel == "cg" and r.figure_s > 0 and len(r.samples_s) >= 5

@pytest.mark.gpu_perf(predicted_within=1e-6, model="fractal")
def test_held_to_its_prediction(gpu_measure):
    gpu_measure("vadd", 1 << 25)  # above the spec's small sizes, which the fractal fit measures
''')
    result = run(pytester, device, "--gpu-isolate", f"--gpu-plot={pytester.path}/plots")  # in the worker process
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert len(list((pytester.path / "plots").glob("*.png"))) == 4  # a histogram per measurement
    assert "exceeds the budget max_s" in out
    assert "fractal predicted" in out and "outside predicted_within" in out
    assert "Traceback" not in out


def test_skips_and_deselection(pytester, device, monkeypatch):
    """No stored profile, no CUDA, a baseline of another device: skipped with the reason; -m 'not gpu_perf'
    deselects every test that uses a gpu_* fixture."""
    pytester.makepyfile(test_skips='''
def test_needs_profile(gpu_profile):
    pass

def test_vadd(gpu_measure):
    gpu_measure("vadd", 1 << 12)

def test_plain():
    pass
''')
    other = {"format": 1, "entries": {"someone-else|vadd|4096|0.1.0": {
        "device_slug": "someone-else", "device_name": "Another GPU", "kernel": "vadd", "size": 4096,
        "version": "0.1.0", "figure_s": 1e-5, "samples_s": [1e-5] * 10}}}
    (pytester.path / "other.json").write_text(json.dumps(other))
    monkeypatch.setenv("GPUPROFILER_RESULTS", str(pytester.path / "no-results"))
    result = run(pytester, device, "--gpu-compare=other", f"--gpu-baseline-dir={pytester.path}")
    result.assert_outcomes(passed=1, skipped=2)
    out = result.stdout.str()
    assert "gpuprofiler calibrate" in out and "only for another device (Another GPU)" in out

    cuda = pytester.runpytest_subprocess("--gpu-device=cuda:0", "-rs", "-k", "vadd")
    if not cuda.ret == 0 or "skipped" in cuda.stdout.str():
        cuda.assert_outcomes(skipped=1)
        assert "pycuda" in cuda.stdout.str() or "no GPU" in cuda.stdout.str()

    deselected = pytester.runpytest_subprocess("-m", "not gpu_perf")
    deselected.assert_outcomes(passed=1, deselected=2)


def test_bad_use_is_a_clear_message(pytester, device):
    pytester.makepyfile(test_bad='''
def test_unknown_budget(gpu_measure):
    gpu_measure("vadd", 1 << 12, set={"nothing": 1})

def test_no_such_kernel(gpu_measure):
    gpu_measure("no_such_kernel", 10)
''')
    result = run(pytester, device)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "no spec or app 'no_such_kernel'" in out and "Traceback" not in out

    unknown = pytester.runpytest_subprocess("--gpu-device=opencl:9:9", "-k", "no_such")
    assert unknown.ret != 0 and "opencl:9:9" in unknown.stdout.str() and "Traceback" not in unknown.stdout.str()

    bad_option = pytester.runpytest_subprocess("--gpu-compare-fail=ten")
    assert bad_option.ret != 0 and "expected a fraction" in bad_option.stderr.str()


def test_a_spec_that_fails_its_check_fails_the_test(pytester, device):
    spec = (pytester.path / "wrong.toml")
    from conftest import KERNELS

    text = (KERNELS / "vadd.toml").read_text().replace('opencl = "vadd.cl"', f'opencl = "{KERNELS / "vadd.cl"}"')
    cuda = [line for line in text.splitlines() if line.startswith("cuda =")]
    for line in cuda:
        text = text.replace(line, "")
    text = text.replace('expect = "a + b"', 'expect = "a - b"')
    assert 'expect = "a - b"' in text
    spec.write_text(text)
    pytester.makepyfile(test_check=f'''
def test_wrong(gpu_measure):
    gpu_measure({str(spec)!r}, 1 << 12)
''')
    result = run(pytester, device)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "check" in out.lower() and "Traceback" not in out


def test_the_plugin_imports_no_gpu_driver_when_unused(pytester):
    """A run that loads the plugin but uses none of its fixtures imports neither pyopencl nor pycuda (nor numpy, nor
    the package's measuring code): not in ``-X importtime``'s list, not in ``sys.modules`` at the test."""
    pytester.makepyfile(test_plain=(
        "import sys\n"
        "def test_plain():\n"
        "    print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in ('gpuprofiler', 'numpy', 'pyopencl', "
        "'pycuda')))\n"))
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"],
                          cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    timed = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not {m for m in timed if m.split(".")[0] in ("pyopencl", "pycuda", "numpy")}
    (loaded,) = [line for line in proc.stdout.splitlines() if "LOADED" in line]
    assert "'gpuprofiler.testing.plugin'" in loaded  # the plugin is there, and nothing heavy with it
    for heavy in ("numpy", "pyopencl", "pycuda", "gpuprofiler.device", "gpuprofiler.testing.session"):
        assert f"'{heavy}'" not in loaded
