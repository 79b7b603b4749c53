"""What a Dask cluster adds to each measurement (not a test): N tasks that each hold the device for a fixed time
(100 ms by default: a short measurement) run on one device of a LocalCluster of worker processes, one after the
other as the device allows; the wall time beyond the tasks' own time, per task, is the scheduling overhead. Then
the same with real measurements: a kernel timed at one size per task (its engine time on the worker against the
client's wall time).

    python benchmarks/cluster_overhead.py [--tasks N] [--seconds S] [--workers W] [--kernel vadd --size 1048576]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.measure.policy import TimingPolicy  # noqa: E402
from gpuprofiler.measure.runners import local_devices  # noqa: E402
from gpuprofiler.measure.runners.base import Task  # noqa: E402
from gpuprofiler.measure.runners.dask import DaskRunner  # noqa: E402
from gpuprofiler.workloads.builtin import portable, resolve  # noqa: E402
from gpuprofiler.workloads.sweep import item_digest, load_target, sweep_task  # noqa: E402


def hold(ctx, seconds: float) -> float:
    """A task that holds the device for ``seconds`` (the device opened first, as a measurement would)."""
    ctx.backend()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        time.sleep(0.001)
    return seconds


def run(runner, tasks) -> tuple[float, float, int]:
    spent = []
    t0 = time.perf_counter()
    runner.run(tasks, lambda t, o: spent.append(o.seconds))
    return time.perf_counter() - t0, sum(spent), len(spent)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kernel", default="vadd")
    ap.add_argument("--size", type=int, default=1 << 20)
    args = ap.parse_args()
    device = local_devices()[0]
    runner = DaskRunner.local(args.workers, [device])
    try:
        slot = runner.slots()[0]
        run(runner, [Task("warm", hold, (0.01,), slot=slot)])  # the worker opens the device once
        wall, own, n = run(runner, [Task(f"h{i}", hold, (args.seconds,), slot=slot) for i in range(args.tasks)])
        per = (wall - own) / n
        print(f"{n} tasks of {args.seconds * 1e3:.0f} ms on {slot.name} ({slot.info['name']}), {args.workers} "
              f"worker process(es): wall {wall:.3f} s, tasks {own:.3f} s: overhead {per * 1e3:.2f} ms per task "
              f"= {100 * per / args.seconds:.2f}% of a {args.seconds * 1e3:.0f} ms measurement")
        path = resolve(args.kernel)
        item = load_target(path)
        policy = TimingPolicy(warmup=1, warmup_s=0.0, min_samples=5, budget_s=args.seconds, rel_ci=0.0)
        tasks = [Task(f"m{i}", sweep_task, (portable(path), item_digest(path, item), [args.size], policy, True),
                      slot=slot) for i in range(max(10, args.tasks // 5))]
        wall, own, n = run(runner, tasks)
        per = (wall - own) / n
        print(f"{n} measurements of {args.kernel} at {args.size} ({args.seconds * 1e3:.0f} ms sampling budget each): "
              f"wall {wall:.3f} s, tasks {own:.3f} s on the worker: overhead {per * 1e3:.2f} ms per task "
              f"= {100 * per / (own / n):.2f}% of a measurement")
    finally:
        runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
