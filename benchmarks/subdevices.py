"""Device scaling by simulation against measurement (not a test): an app run on one sub-device, on two, and on the
whole device in alternation, one run of each per round, so that the shared machine's changing state falls on all
three alike; the simulator predicts the two-sub-device and whole-device runs from the one-sub-device runs only (the
recorded graph of its run nearest the median, its phases' medians per call) and the device's compute units (from
the profile where given), and is compared with each configuration's measured median host time per run (medians,
because a program's time is a sum of its parts and medians add; a low quantile of a sum lies above the sum of the
parts' ones). Two sub-devices that fill the device run their compute units at the rate the whole device's kernels
showed against one sub-device's (a single-device measurement: on a shared VM a core is slower when both are busy);
the whole device is predicted from the one sub-device alone.

    python benchmarks/subdevices.py [APP] [--size N] [--seconds S] [--blocks B] [--profile P] [-o DIR]

The rounds are cut into ``--blocks`` blocks, each compared on its own (the spread between blocks is the
measurement's own), and all pooled. Writes DIR/table.csv (one row per block and configuration), DIR/summary.json,
DIR/gantt.png and DIR/trace.json (the pooled comparison: each configuration's measured run nearest its median
above its simulation).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler import __version__  # noqa: E402
from gpuprofiler.device import open_backend  # noqa: E402
from gpuprofiler.measure.engine import Engine  # noqa: E402
from gpuprofiler.measure.policy import TimingPolicy  # noqa: E402
from gpuprofiler.measure.stats import model_value  # noqa: E402
from gpuprofiler.profile.file import load_profile  # noqa: E402
from gpuprofiler.profile.hardware import view  # noqa: E402
from gpuprofiler.report.gantt import gantt  # noqa: E402
from gpuprofiler.simulate import chrome  # noqa: E402
from gpuprofiler.simulate.algorithm import from_timeline  # noqa: E402
from gpuprofiler.simulate.architecture import machine  # noqa: E402
from gpuprofiler.simulate.schedule import kernel_cost, simulate  # noqa: E402
from gpuprofiler.workloads.apps import load_app, timeline  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402
from gpuprofiler.workloads.wrapper import Recorder, RunContext  # noqa: E402


def lengths_of(runs: list) -> np.ndarray:
    return np.array([line["run_s"] for _, line in runs])


def nearest_median(runs: list) -> int:
    """The index of the run whose host time is nearest the runs' median."""
    lengths = lengths_of(runs)
    return int(np.argmin(np.abs(lengths - np.median(lengths))))


def compare(runs: dict, names: tuple, whole_cus: int) -> tuple[dict, dict]:
    """Simulate the two-sub-device and whole-device runs from the one-sub-device runs; each against its measured
    median."""
    one, two, whole = names
    mine = runs[one]
    per_run = [phases for phases, _ in mine]
    phases = set.intersection(*(set(p) for p in per_run))
    per_call = {ph: float(np.median([p[ph]["total_s"] for p in per_run])) / per_run[0][ph]["calls"] for ph in phases}
    recorded = mine[nearest_median(mine)][1]
    alg = from_timeline(recorded, per_call)
    sub_cus = recorded["devices"][0]["compute_units"]
    # the compute units' rate when every one of them is busy, against one alone: the whole device's kernels (a
    # single-device measurement) against the one-sub-device kernels scaled to its compute units
    whole_runs = [phases for phases, _ in runs[whole]]
    kernels = [ph for ph in phases if per_run[0][ph]["kind"] == "kernel"]
    ideal = sum(kernel_cost(t, whole_cus) for t in alg.tasks if t.kind == "kernel")
    full = sum(float(np.median([p[ph]["total_s"] for p in whole_runs])) for ph in kernels)
    rate = ideal / full if full > 0 else 1.0
    machines = {one: machine(1, sub_cus), two: machine(2, sub_cus, rate=rate), whole: machine(1, whole_cus)}
    out, extra = {}, {}
    for name in names:
        lengths = lengths_of(runs[name])
        sched = simulate(alg, machines[name])
        measured = float(np.median(lengths))
        out[name] = {"runs": len(lengths), "measured_ms": measured * 1e3, "p10_ms": model_value(lengths) * 1e3,
                     "full_load_rate": machines[name].devices[0].rate,
                     "simulated_ms": sched.makespan_s * 1e3, "error": sched.makespan_s / measured - 1,
                     "machine": machines[name].name}
        extra[name] = (runs[name][nearest_median(runs[name])][1], sched)
    return out, extra


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", nargs="?", default="batch")
    ap.add_argument("--size", type=int, default=1048576)
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of alternating rounds")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--device", default="opencl:0:0", help="the whole device (opencl:P:D)")
    ap.add_argument("--profile", help="the device's hardware profile (its compute units make the whole device)")
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/subdevices"))
    args = ap.parse_args()
    app = load_app(resolve(args.app))
    names = (f"{args.device}/2/1", f"{args.device}/2", args.device)
    backends = {name: open_backend(name) for name in names}
    whole_cus = backends[args.device].info.compute_units
    if args.profile:
        cu = view(load_profile(args.profile)).compute_units
        whole_cus = int(cu.value) if cu.ok else whole_cus
    for name, b in backends.items():  # each configuration checked once before anything is timed
        ctx = RunContext(b, Recorder(), app.path.parent, poison=True, peers=b.peers)
        result = app.call("run", app.run_fn, ctx, args.size)
        ctx.finish()
        if app.check_fn is not None:
            app.call("check", app.check_fn, args.size, result)
    runs: dict[str, list] = {name: [] for name in names}

    def runner(name: str):
        b = backends[name]

        def go() -> float:
            rec = Recorder()
            ctx = RunContext(b, rec, app.path.parent, peers=b.peers)
            t0 = time.perf_counter_ns()
            app.run_fn(ctx, args.size)
            ctx.finish()
            t1 = time.perf_counter_ns()
            # kept as plain data, not the recorder and its events (their memory slowed later runs here, 190 -> 310 ms)
            runs[name].append((rec.phase_times(), timeline(app, args.size, b, rec, (t0, t1))))
            return (t1 - t0) * 1e-9
        return go

    engine = Engine(TimingPolicy(warmup=2, min_samples=5, budget_s=args.seconds, rel_ci=0.0, max_samples=100000))
    timings = engine.interleave([runner(n) for n in names], budget_s=args.seconds)
    warm = len(timings[0].warmup_s)
    for name in names:
        del runs[name][:warm]
    rounds = len(runs[names[0]])
    rows = []
    edges = np.linspace(0, rounds, args.blocks + 1).astype(int)
    for k in range(args.blocks):
        block = {n: runs[n][edges[k]:edges[k + 1]] for n in names}
        res, _ = compare(block, names, whole_cus)
        for name in names:
            rows.append({"block": k, "configuration": name, **res[name]})
            print(f"block {k}: {name:<16} {res[name]['runs']:3d} runs  measured {res[name]['measured_ms']:8.2f} ms  "
                  f"simulated {res[name]['simulated_ms']:8.2f} ms  error {res[name]['error']:+.1%}", flush=True)
    pooled, extra = compare(runs, names, whole_cus)
    print(f"\nall {rounds} rounds pooled (medians of the runs' host time)")
    print(f"{'configuration':<16} {'machine simulated':<46} {'rate':>5} {'measured':>10} {'p10':>10} "
          f"{'simulated':>10} {'error':>7} {'blocks |error| max':>19}")
    for name in names:
        p = pooled[name]
        worst = max(abs(r["error"]) for r in rows if r["configuration"] == name)
        print(f"{name:<16} {p['machine']:<46} {p['full_load_rate']:5.2f} {p['measured_ms']:7.2f} ms {p['p10_ms']:7.2f} ms "
              f"{p['simulated_ms']:7.2f} ms {p['error']:+7.1%} {worst:>19.1%}")
    args.output.mkdir(parents=True, exist_ok=True)
    with open(args.output / "table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = []
    for name in names:
        recorded, sched = extra[name]
        lines.append((f"measured on {name}", chrome.measured_rows(recorded)))
        lines.append((f"simulated from {names[0]}: {sched.machine}", chrome.simulated_rows(sched)))
    gantt(lines, args.output / "gantt.png", f"{app.name}, size {args.size}: measured and simulated")
    chrome.write(args.output / "trace.json", chrome.trace(lines, recorded=extra[names[0]][0]))
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    (args.output / "summary.json").write_text(json.dumps({
        "app": app.name, "size": args.size, "rounds": rounds, "pooled": pooled, "device": backends[args.device].info.to_dict(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpuprofiler_version": __version__, "commit": commit, "command": " ".join(sys.argv)}, indent=1) + "\n")
    for b in backends.values():
        b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
