"""Benchmark (not a test): how often the pytest plugin flags a kernel that became 25% slower, and how often one
that did not change, on a real device (default: PoCL).

Each of ``--pairs`` paired runs is three pytest sessions in a fresh folder, as a user would run them: save the
baseline of a streaming kernel spec (y = a + b + c, 16 bytes per element), then compare against it the same
kernel and a variant that also reads d (20 bytes per element: 25% more memory traffic), in alternating order, with
``--gpu-compare-fail`` (10%). Prints each pair's changes and verdicts, then both counts; exit status 1 if the
slower kernel is flagged in fewer than 19 of 20 pairs or the unchanged one in more than 1 of 20 (scaled to
``--pairs``).

    python benchmarks/plugin_detection.py [--pairs 20] [--device opencl:0:0] [--fail 10%] [--budget 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS = Path(__file__).resolve().parent / "plugin_kernels"
TEST_FILE = f'''
import os

SPECS = {{"0": {str(KERNELS / "stream3.toml")!r}, "1": {str(KERNELS / "stream4.toml")!r}}}
N = 1 << 24  # 64 MiB per array, five arrays: past the last-level cache, and long enough (6-8 ms) to reproduce


def test_stream(gpu_measure):
    # the same key ("stream" at N) for both variants: the baseline is the 3-array kernel's
    gpu_measure(SPECS[os.environ["STREAM_EXTRA"]], N, name="stream")
'''


def session(folder: Path, device: str, budget: str, extra: bool, *args: str) -> dict:
    """One pytest session in ``folder``; returns its --gpu-json report."""
    report = folder / "report.json"
    report.unlink(missing_ok=True)
    env = {**os.environ, "STREAM_EXTRA": "1" if extra else "0"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--gpu-device={device}",
                           f"--gpu-budget={budget}", f"--gpu-json={report}", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    if not report.exists():
        raise SystemExit(f"pytest wrote no report (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(report.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--device", default="opencl:0:0")
    ap.add_argument("--fail", default="10%")
    ap.add_argument("--budget", default="1.0")
    args = ap.parse_args(argv)
    flagged_slow = flagged_same = 0
    print(f"{'pair':>4}  {'order':14}  {'unchanged':>10} {'verdict':10}  {'+25% traffic':>12} {'verdict':10}")
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_stream.py").write_text(TEST_FILE)
        for i in range(args.pairs):
            # a fresh one-session baseline per pair (saving again would keep earlier sessions as its history)
            (folder / ".gpuprofiler" / "baselines" / "base.json").unlink(missing_ok=True)
            session(folder, args.device, args.budget, False, "--gpu-save=base")
            order = [False, True] if i % 2 == 0 else [True, False]
            got = {}
            for extra in order:
                rep = session(folder, args.device, args.budget, extra, "--gpu-compare=base",
                              f"--gpu-compare-fail={args.fail}")
                (res,) = rep["results"]
                got[extra] = res
            same, slow = got[False], got[True]
            flagged_same += same["comparison"] == "regressed"
            flagged_slow += slow["comparison"] == "regressed"
            print(f"{i + 1:>4}  {'same, slower' if not order[0] else 'slower, same':14}  {same['change']:>+10.1%} "
                  f"{same['comparison']:10}  {slow['change']:>+12.1%} {slow['comparison']:10}", flush=True)
    n = args.pairs
    print(f"\nkernel with 25% more memory traffic flagged in {flagged_slow} of {n} paired runs; unchanged kernel "
          f"flagged in {flagged_same} of {n} (--gpu-compare-fail={args.fail}, --gpu-budget={args.budget} s; "
          f"{time.time() - start:.0f} s)")
    ok = flagged_slow >= n - n // 20 and flagged_same <= max(1, n // 20)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
