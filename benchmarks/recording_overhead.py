"""A/B (not a test): what recording each operation's buffers and host clocks adds to an app's run. Runs of the app
with that detail kept and without alternate, one of each per round (the timeline itself is built once per size,
after the timed runs, from the run of median length: not per run); prints each one's median and 10th percentile
of the host's wall time per run, with 95% intervals, and their ratio.

    python benchmarks/recording_overhead.py [APP] [--size N] [--seconds S] [--device D]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.engine import Engine  # noqa: E402
from gpuprofiler.measure.policy import TimingPolicy  # noqa: E402
from gpuprofiler.measure.stats import summarize  # noqa: E402
from gpuprofiler.workloads.apps import load_app  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.wrapper import Recorder, RunContext  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", nargs="?", default="jacobi")
    ap.add_argument("--size", type=int, default=262144)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--device")
    args = ap.parse_args()
    app = load_app(resolve(args.app))
    backend = open_backend(args.device)
    ops = []

    def one(detail: bool):
        def go() -> float:
            rec = Recorder(detail=detail)
            ctx = RunContext(backend, rec, app.path.parent, peers=backend.peers)
            t0 = time.perf_counter()
            app.run_fn(ctx, args.size)
            ctx.finish()
            t = time.perf_counter() - t0
            ops.append(len(rec.operations))
            return t
        return go

    engine = Engine(TimingPolicy(warmup=3, min_samples=20, budget_s=args.seconds, rel_ci=0.0, max_samples=100000))
    # the first run of each round is slower by about 1% on its own here (an A/A test shows it), so both orders run,
    # half the budget each, and the ratio is their geometric mean
    ratios = {"median": [], "p10": []}
    for order in ((True, False), (False, True)):
        timings = engine.interleave([one(d) for d in order], budget_s=args.seconds / 2)
        by = dict(zip(order, timings))
        print(f"{app.name} size {args.size} on {backend.info.id}, {'with' if order[0] else 'without'} detail first: "
              f"{int(np.median(ops))} operations per run, {len(timings[0].device_s)} runs of each in alternation")
        rows = []
        for name, timing in (("without detail", by[False]), ("with buffers and clocks", by[True])):
            s = summarize(np.array(timing.device_s))
            rows.append(s)
            print(f"  {name:<24} median {s.median * 1e3:9.3f} ms [{s.ci_low * 1e3:.3f}, {s.ci_high * 1e3:.3f}]"
                  f"  p10 {s.model * 1e3:9.3f} ms [{s.model_ci_low * 1e3:.3f}, {s.model_ci_high * 1e3:.3f}]")
        ratios["median"].append(rows[1].median / rows[0].median)
        ratios["p10"].append(rows[1].model / rows[0].model)
    print("with / without, both orders: " + ", ".join(f"{k} {np.sqrt(np.prod(v)) - 1:+.2%}" for k, v in ratios.items()))
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
