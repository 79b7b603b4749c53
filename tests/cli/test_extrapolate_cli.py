"""`gpuprofiler extrapolate` and `export` end to end on the real PoCL device (small sizes, generous bounds)."""

import json

import pytest
from conftest import run_cli

from gpuprofiler.profile.file import SCHEMA, SCHEMA_VERSION, Profile, entry

pytestmark = pytest.mark.pocl



def tiny_profile(path):
    Profile({"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
             "caches": [{"level": 2, "size_bytes": 1 << 20, "latency_s": 4e-9}],
             "launch": {"event_s": entry(4e-7, "s", "test value")}}).save(path)
    return path


def test_extrapolate_check_json_and_plot(tmp_path):
    prof = tiny_profile(tmp_path / "p.json")
    done = run_cli("extrapolate", "vadd", "--small", "16384,24576,32768,49152,65536", "--target", "524288",
                   "--check", "--json", "--budget", "0.1", "--profile", prof, "--plot", tmp_path / "x.png",
                   "--no-extrap", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    [rec] = json.loads(done.stdout)
    for key in ("size", "predicted_s", "interval_s", "model", "phases", "measured_s", "error"):
        assert key in rec
    assert rec["size"] == 524288 and rec["measured_s"] > 0 and rec["predicted_s"] > 0
    assert rec["error"] == (rec["predicted_s"] - rec["measured_s"]) / rec["measured_s"]
    lo, hi = rec["interval_s"]
    assert lo <= rec["predicted_s"] <= hi
    [ph] = rec["phases"]
    assert ph["name"] == "vadd" and {"m", "d", "predicted_s"} <= set(ph)
    assert {"poly1", "poly2", "poly3", "poly4", "fractal (whole run)"} <= set(rec["baselines_s"])
    assert rec["fractal_s"] > 0
    # 12 B per element: 768 KiB at the largest small size, 6 MiB at the target: the 1 MiB cache is crossed
    assert any("L2 cache (1.0 MiB" in w for w in rec["warnings"])
    assert "warning:" in done.stderr and "L2 cache" in done.stderr
    assert (tmp_path / "x.png").stat().st_size > 1000


@pytest.mark.slow
def test_export_extrap_text(tmp_path):
    log = tmp_path / "m.jsonl"
    done = run_cli("measure", "copy", "--sizes", "4096,8192,16384", "--budget", "0.05", "-o", log, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-1000:]
    out = tmp_path / "copy.txt"
    done = run_cli("export", "--extrap", out, "--measurements", log, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = out.read_text().splitlines()
    assert text[0] == "PARAMETER n" and text[1] == "POINTS ( 4096 ) ( 8192 ) ( 16384 )"
    assert "REGION copy" in text and sum(line.startswith("DATA ") for line in text) == 3
    done = run_cli("export", "--extrap", out, "--measurements", tmp_path / "missing.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and "not found" in done.stderr
