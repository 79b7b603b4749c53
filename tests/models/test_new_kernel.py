"""A kernel no model was written for: ``rowsum``, its spec written from the README alone (tests/fixtures/kernels).

Its spec must be valid (it runs and checks on PoCL), and both static models must predict it from the H100
profile without naming it anywhere: max-plus from its OpenCL / CUDA source, the pipeline model from nvcc's PTX.
"""

import json
import shutil

import pytest
from conftest import FIXTURES, run_cli

SPEC = FIXTURES / "kernels" / "rowsum.toml"
H100 = FIXTURES / "profiles" / "h100.json"


def predict(model: str, size: int, *extra) -> dict:
    r = run_cli(model, SPEC, "--size", size, "--profile", H100, "--json", *extra)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_the_spec_runs_and_checks_on_pocl(pocl, tmp_path):
    r = run_cli("measure", SPEC, "--sizes", 4096, "--device", pocl.info.id, "--budget", "0.2", "-o", tmp_path / "m.jsonl",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "true" in r.stdout  # checked against numpy's row sums


@pytest.mark.parametrize("size", [16384, 1048576])
def test_maxplus_predicts_it(size):
    d = predict("maxplus", size)
    assert d["model"] == "overlap" and d["batches"] == "overlapped"
    assert d["launch_fixed_s"] < d["predicted_s"] < 1.0
    bounds = d["bounds_s"]
    # its 32 loads per work-item: a few warps per SM wait for each in turn (in-order issue); a full device waits on
    # the L1 data path's queue, so its in-order chain is that queue's time
    assert d["limited_by"] in ("latency", "lsu", "dram", "cache")
    if size == 1048576:
        assert bounds["latency"] <= 1.1 * bounds["lsu"]
    # one work-item per row: each lane reads its own 128-byte row, so every warp request touches 32 lines
    assert d["traffic"]["l1_request_cycles"] == pytest.approx(size / 32 * 32 * 32, rel=0.01)
    matrix = 4 * size * 32
    if d["traffic"]["resident_in_cache"]:  # 2 MiB: it stays in the H100's L2 between launches
        assert matrix < 50e6 and d["traffic"]["dram_read_bytes"] == 0
    else:                                  # 128 MiB: read from DRAM once per launch
        assert d["traffic"]["dram_read_bytes"] == pytest.approx(matrix, rel=0.01)


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_pipeline_predicts_it_and_both_models_agree_on_the_large_size():
    pipe = predict("pipeline", 1048576)
    mp = predict("maxplus", 1048576)
    assert pipe["launch_s"] < pipe["predicted_s"] < 1.0
    assert 0.5 < pipe["predicted_s"] / mp["predicted_s"] < 2.0
