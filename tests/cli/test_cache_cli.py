"""`gpuprofiler cache` as a user runs it: levels, arrays, a plot, JSON; bad input exits 2."""

import json

import pytest
from conftest import POCL_PROFILE, run_cli


@pytest.mark.slow
def test_power_of_two_transpose_crowds_the_l1_sets(tmp_path):
    """A 4096 x 4096 naive transpose writes a column whose lines all fall in one L1 set; 4000 x 4000 does not."""
    ratios = {}
    for n in (4096, 4000):
        done = run_cli("cache", "transpose_naive", "--size", n * n, "--profile", POCL_PROFILE, "--json",
                       cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        r = json.loads(done.stdout)
        assert r["kernel"] == "transpose_naive" and r["accesses"] == pytest.approx(2 * n * n, rel=0.01)
        l1 = r["levels"][0]
        assert l1["name"] == "L1" and l1["sets"] == 64 and l1["ways"] >= 8
        ratios[n] = l1
        assert r["histogram"] and abs(sum(share for _, share in r["histogram"]) - 1) < 1e-9
    assert ratios[4096]["miss_ratio"] > 0.3 > 0.1 > ratios[4000]["miss_ratio"]
    assert ratios[4096]["by_array"]["dst"] > 0.8  # the column writes miss
    # a fully associative cache of the same size would not see it
    assert ratios[4096]["miss_ratio_fully_associative"] < 0.1


def test_table_and_plot(tmp_path):
    plot = tmp_path / "mrc.png"
    done = run_cli("cache", "spmv_csr", "--size", 1 << 16, "--profile", POCL_PROFILE, "--plot", plot, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "global accesses per launch" in out and "x " in out and "reuse distances" in out
    assert plot.stat().st_size > 10_000


@pytest.mark.parametrize("args,message", [
    (["vadd", "--size", "0"], "--size must be positive"),
    (["vadd", "--size", "1024", "--rate", "2"], "--rate"),
    (["cg", "--size", "1024"], "not an app"),
])
def test_bad_input_exits_2(tmp_path, args, message):
    done = run_cli("cache", *args, "--profile", POCL_PROFILE, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
