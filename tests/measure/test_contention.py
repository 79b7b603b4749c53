"""Contention measured and said: what other processes took of the host's cores while a record was timed (Linux
/proc/stat), exact arithmetic on snapshots, and the real PoCL device timed quiet and beside a CPU hog."""

import os
import subprocess
import sys
import time

import pytest
from conftest import KERNELS

from gpuprofiler.measure.contention import CONTENDED_SHARE, JUDGED_S, Snapshot, between, combine, contended


def test_other_processes_share_is_the_cores_busy_time_less_this_process():
    start, end = Snapshot(10.0, 100.0, 5.0, 2), Snapshot(12.0, 103.0, 6.0, 2)  # 3 s busy, 1 s ours, 2 s x 2 cores
    c = between(start, end)
    assert c["other_cpu_s"] == pytest.approx(2.0) and c["wall_s"] == pytest.approx(2.0)
    assert c["share"] == pytest.approx(0.5) and c["cpus"] == 2
    assert between(Snapshot(0.0, None, 0.0, 2), end) is None
    assert between(start, Snapshot(12.0, 100.5, 7.0, 2))["other_cpu_s"] == 0.0  # never negative
    both = combine([c, None, {**c, "other_cpu_s": 0.0, "wall_s": 2.0, "load1": 9.0}])
    assert both["share"] == pytest.approx(0.25) and both["load1"] == 9.0 and combine([None]) is None


def test_only_a_cpu_device_long_enough_to_judge_is_marked():
    c = {"share": CONTENDED_SHARE, "wall_s": JUDGED_S, "cpus": 1}
    assert contended(c, "cpu") and not contended(c, "gpu") and not contended(None, "cpu")
    assert not contended({**c, "share": CONTENDED_SHARE / 2}, "cpu")
    assert not contended({**c, "wall_s": JUDGED_S / 4}, "cpu")  # a few clock ticks: not judged


def _vadd_record(pocl):
    from gpuprofiler.measure.policy import TimingPolicy
    from gpuprofiler.workloads.kernel import measure_spec
    from gpuprofiler.workloads.spec import load_spec

    policy = TimingPolicy(warmup=1, min_samples=5, budget_s=1.0, rel_ci=0.0, placements=1)
    (rec,) = measure_spec(pocl, load_spec(KERNELS / "vadd.toml"), [1 << 20], policy, check=False)
    return rec


@pytest.mark.pocl
@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux's /proc/stat")
def test_a_cpu_hog_beside_a_pocl_measurement_marks_it_contended_and_quiet_it_is_not(pocl):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)
        busy = _vadd_record(pocl)
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.wait()
    assert busy["contended"] is True, busy["contention"]
    assert busy["contention"]["share"] >= CONTENDED_SHARE
    time.sleep(0.5)
    quiet = _vadd_record(pocl)
    assert quiet["contended"] is False, quiet["contention"]
    assert quiet["contention"]["wall_s"] * quiet["contention"]["cpus"] >= JUDGED_S  # judged, not skipped
