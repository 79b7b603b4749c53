#!/usr/bin/env python3
"""What measuring in a worker process costs (issue 17's A/B): the same spec measured in this process and in the
device's worker (:mod:`gpuprofiler.workloads.isolated`), alternately, in the same run, several rounds.

Per launch: the device event time's 10th percentile and the engine's host round trip (enqueue + finish, the host
time around each timed launch) in each mode; with a fixed number of samples, both modes run exactly as many
launches. Nothing crosses the pipe inside the timed region, so both should agree within the noise. Per request (a
group of sizes: compile, upload, time, send the records back) the wall time's difference; and once per command the
worker's start (a fresh interpreter, imports, the device opened).

    python scripts/isolation_cost.py [--device ID] [--rounds 6] [--samples 300] [--sizes 4096,1048576] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.policy import fixed  # noqa: E402
from gpuprofiler.workloads import isolated  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.kernel import measure_spec  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device")
    p.add_argument("--spec", default="vadd")
    p.add_argument("--sizes", default="4096,1048576")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--starts", type=int, default=3, help="worker starts to time")
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    spec = load_spec(resolve(args.spec))
    policy = fixed(args.samples, warmup=2)
    backend = open_backend(args.device)
    starts = []
    for _ in range(args.starts):
        t0 = time.perf_counter()
        w = isolated.DeviceWorker(backend.info.id)
        starts.append(time.perf_counter() - t0)
        w.close()
    worker = isolated.DeviceWorker(backend.info.id)
    rows: list[dict] = []
    for r in range(args.rounds):
        modes = ("in-process", "worker") if r % 2 == 0 else ("worker", "in-process")
        for mode in modes:
            t0 = time.perf_counter()
            if mode == "worker":
                recs = worker.measure(spec, sizes, policy, check=False)
            else:
                recs = measure_spec(backend, spec, sizes, policy, check=False)
            wall = time.perf_counter() - t0
            for rec in recs:
                rows.append({"round": r, "mode": mode, "size": rec["size"], "p10_s": rec["model_s"],
                             "median_s": rec["median_s"], "host_median_s": rec["host_median_s"],
                             "host_min_s": rec["host_min_s"], "samples": rec["samples"], "request_wall_s": wall})
    worker.close()
    backend.close()

    def med(mode, size, key):
        return statistics.median(x[key] for x in rows if x["mode"] == mode and x["size"] == size)

    out = {"device": backend.info.id, "device_name": backend.info.name, "spec": spec.name, "sizes": sizes,
           "rounds": args.rounds, "samples_per_size": args.samples, "worker_start_s": starts, "per_size": [],
           "rows": rows}
    print(f"{backend.info.name} ({backend.info.id}), {spec.name}, {args.rounds} rounds x {args.samples} launches per "
          f"size and mode, modes alternating")
    print(f"worker start (spawn, imports, device opened): {', '.join(f'{s:.2f}' for s in starts)} s")
    print(f"{'size':>9} {'mode':<11} {'p10 device':>12} {'median dev':>12} {'host/launch':>12} {'host min':>10}")
    for size in sizes:
        fig = {}
        for mode in ("in-process", "worker"):
            fig[mode] = {k: med(mode, size, k) for k in ("p10_s", "median_s", "host_median_s", "host_min_s")}
            f = fig[mode]
            print(f"{size:>9} {mode:<11} {f['p10_s'] * 1e6:>10.2f}us {f['median_s'] * 1e6:>10.2f}us "
                  f"{f['host_median_s'] * 1e6:>10.2f}us {f['host_min_s'] * 1e6:>8.2f}us")
        diff = {k: fig["worker"][k] - fig["in-process"][k] for k in fig["worker"]}
        print(f"{size:>9} {'difference':<11} {diff['p10_s'] * 1e6:>+10.2f}us {diff['median_s'] * 1e6:>+10.2f}us "
              f"{diff['host_median_s'] * 1e6:>+10.2f}us {diff['host_min_s'] * 1e6:>+8.2f}us")
        out["per_size"].append({"size": size, **{m: fig[m] for m in fig}, "difference": diff})
    walls = {m: statistics.median(x["request_wall_s"] for x in rows if x["mode"] == m) for m in ("in-process", "worker")}
    print(f"request wall time (compile, upload, {args.samples} launches x {len(sizes)} sizes, records): in-process "
          f"{walls['in-process']:.3f} s, worker {walls['worker']:.3f} s, difference "
          f"{(walls['worker'] - walls['in-process']) * 1e3:+.1f} ms")
    out["request_wall_s"] = walls
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
