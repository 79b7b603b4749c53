"""`gpuprofiler pipeline` as a user runs it: fixture and spec forms on the committed PoCL profile, errors exit 2."""

import json

import pytest
from conftest import POCL_PROFILE, PTX_FIXTURES, run_cli

FIXTURES = PTX_FIXTURES
POCL = POCL_PROFILE


def test_json_on_a_fixture_with_the_pocl_profile(tmp_path):
    done = run_cli("pipeline", FIXTURES / "transpose_naive.ptx", "--grid", "16,16", "--block", "16,16",
                   "--args", "n=256", "--profile", POCL, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    for key in ("cycles", "predicted_s", "launch_s", "uncoalesced", "units"):
        assert key in r
    assert r["cycles"] > 0 and r["predicted_s"] > r["launch_s"] > 0
    assert r["uncoalesced"] == 1.0                      # the column store of the naive transpose
    store = [a for a in r["accesses"] if a["kind"] == "store"][0]
    assert store["pattern"] == "strided" and store["stride_bytes"] == 4 * 256
    # the PoCL profile has no PTX opcode latencies: the arithmetic ones are defaults, and the output says so
    lat = r["latencies"]
    assert "mad.lo.s32" in lat["defaults"] and "mad.lo.s32" not in lat["from_profile"]
    assert all(u["source"].startswith("default sm_90") for u in lat["used"] if u["unit"] not in ("ldg", "stg"))
    assert any("not a GPU" in w and "defaults" in w for w in r["warnings"])
    assert r["traffic"]["launch_source"].startswith("fixed: ") and "launch.event_s" in r["traffic"]["launch_source"]
    assert set(r["units"]) >= {"ldg", "stg", "int"} and 0 < r["units"]["stg"]["utilization"] <= 1


def test_spec_form_explain_and_trace(tmp_path):
    done = run_cli("pipeline", "matmul_tiled", "--size", "128", "--profile", POCL, "--explain", "--trace", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "predicted" in out and "fixture" in out          # the committed PTX matches the .cu and TILE=16
    assert "loop $L__BB0_2" in out and "8 passes (static)" in out and "induction %r31 from 0 step 1" in out
    assert "issue / execute / write back" in out and "task list of warp 0" in out
    assert "latencies from the profile:" in out and "defaults (sm_90):" in out


@pytest.mark.parametrize("args, message", [
    (["pipeline", FIXTURES / "vadd.ptx", "--block", "256", "--profile", POCL], "--grid"),
    (["pipeline", FIXTURES / "vadd.ptx", "--grid", "4", "--block", "256", "--args", "m=3", "--profile", POCL],
     "no parameter 'm'"),
    (["pipeline", FIXTURES / "vadd.ptx", "--grid", "4", "--block", "2048", "--profile", POCL], "at most 1024"),
    (["pipeline", FIXTURES / "vadd.ptx", "--grid", "4", "--block", "256", "--profile", "missing.json"],
     "profile not found"),
    (["pipeline", "vadd", "--profile", POCL], "--size"),
    (["pipeline", "cg", "--size", "1024", "--profile", POCL], "one kernel"),
    (["pipeline", FIXTURES / "apps_cg.ptx", "--grid", "4", "--block", "256", "--profile", POCL], "--kernel"),
])
def test_bad_input_is_a_clear_error_with_exit_2(tmp_path, args, message):
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_unsupported_ptx_names_the_line(tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
                   "  .reg .b32 %r<2>;\n  tex.1d.v4.s32.s32 {%r1, %r1, %r1, %r1}, [t, {%r1}];\n  ret;\n}\n")
    done = run_cli("pipeline", bad, "--grid", "1", "--block", "32", "--profile", POCL, cwd=tmp_path)
    assert done.returncode == 2 and "bad.ptx:7: unsupported PTX instruction 'tex.1d.v4.s32.s32'" in done.stderr
