"""The pytest plugin on the real PoCL device: a performance test whose kernel is refused by the bounds check, does not
compile or fails its check fails that test only; the others pass, and the summary and the JSON list each failed
kernel with its stage."""

import json

import pytest
from conftest import FIXTURES, pocl_id

pytest_plugins = "pytester"

pytestmark = pytest.mark.pocl

GOOD = FIXTURES / "faults" / "suite" / "tiny_vadd.toml"


def test_a_failing_kernel_fails_its_own_test_only(pytester):
    device = pocl_id()
    if device is None:
        pytest.fail("the PoCL device is missing: pip install pocl-binary-distribution")
    good = GOOD.read_text()
    (pytester.path / "vadd.cl").write_text((GOOD.parent / "vadd.cl").read_text())  # a spec's source is in its folder
    (pytester.path / "broken.cl").write_text("__kernel void vadd(int n) { this is not C; }\n")
    specs = {
        "broken": good.replace('opencl = "vadd.cl"', 'opencl = "broken.cl"'),
        "wrong": good.replace('expect = "a + b"', 'expect = "a - b"'),
        "short": good.replace('shape = "n"\ninit = "zeros"', 'shape = "n - 1"\ninit = "zeros"'),
    }
    for name, text in specs.items():
        assert text != good
        (pytester.path / f"{name}.toml").write_text(text.replace('name = "tiny_vadd"', f'name = "{name}"'))
    (pytester.path / "good.toml").write_text(good)
    pytester.makepyfile(test_kernels=f'''
import pytest

@pytest.mark.parametrize("name", ["good", "broken", "wrong", "short"])
def test_kernel(gpu_measure, name):
    r = gpu_measure({str(pytester.path)!r} + f"/{{name}}.toml", 4096)
    assert r.figure_s > 0
''')
    result = pytester.runpytest_subprocess(f"--gpu-device={device}", "--gpu-budget=0.1", "-p", "no:cacheprovider",
                                           f"--gpu-json={pytester.path}/r.json")
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    assert "3 kernel(s) failed (each failed its own test):" in out and "Traceback" not in out
    assert "broken (compile): OpenCL compile error" in out and "short (bounds): " in out
    assert "wrong (check): " in out
    report = json.loads((pytester.path / "r.json").read_text())
    assert [r["kernel"] for r in report["results"]] == ["tiny_vadd"]
    assert {f["kernel"]: f["stage"] for f in report["failed"]} == {"broken": "compile", "wrong": "check",
                                                                   "short": "bounds"}
    assert all(f["test"].startswith("test_kernels.py::test_kernel[") and f["size"] == 4096 for f in report["failed"])
