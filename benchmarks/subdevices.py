"""Device scaling by simulation against measurement (not a test): an app measured on one sub-device, on two, and
on the whole device, in alternating rounds; each round, the simulator predicts the two-sub-device and whole-device
runs from the one-sub-device measurement (its recorded graph, its per-phase costs) and the profile's device
(compute units), and is compared with that round's measurements; then once more with every round pooled (the
one-sub-device phase costs' medians over the rounds) against each configuration's median over the rounds. Every
figure is the modelling figure (the 10th percentile of the runs): each phase's per call, the runs' host time, and
the recorded run nearest it.

    python benchmarks/subdevices.py [APP] [--size N] [--rounds R] [--budget S] [--profile P] [-o DIR]

Writes DIR/table.csv (one row per round and configuration), DIR/gantt.png and DIR/trace.json (the last round's
measured and simulated timelines) and prints the table with the median error per configuration.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler import __version__  # noqa: E402
from gpuprofiler.measure.policy import TimingPolicy  # noqa: E402
from gpuprofiler.profile.file import load_profile  # noqa: E402
from gpuprofiler.profile.hardware import view  # noqa: E402
from gpuprofiler.report.gantt import gantt  # noqa: E402
from gpuprofiler.simulate import chrome  # noqa: E402
from gpuprofiler.simulate.algorithm import from_timeline  # noqa: E402
from gpuprofiler.simulate.architecture import machine  # noqa: E402
from gpuprofiler.simulate.schedule import simulate  # noqa: E402
from gpuprofiler.workloads import isolated  # noqa: E402
from gpuprofiler.workloads.apps import load_app  # noqa: E402
from gpuprofiler.workloads.builtin import resolve  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app", nargs="?", default="batch")
    ap.add_argument("--size", type=int, default=1048576)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=1.5, help="seconds of runs per configuration per round")
    ap.add_argument("--device", default="opencl:0:0", help="the whole device (opencl:P:D)")
    ap.add_argument("--profile", help="the device's hardware profile (its compute units make the whole device)")
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/subdevices"))
    args = ap.parse_args()
    app = load_app(resolve(args.app))
    one, two, whole = f"{args.device}/2/1", f"{args.device}/2", args.device
    policy = TimingPolicy(warmup=1, min_samples=5, budget_s=args.budget)
    rows, last, pooled = [], {}, []
    units = None
    if args.profile:
        cu = view(load_profile(args.profile)).compute_units
        units = int(cu.value) if cu.ok else None
    for k in range(args.rounds):
        got = {}
        for dev in (one, two, whole):
            lines: dict[int, dict] = {}
            recs = isolated.worker(dev).measure(app, [args.size], policy,
                                                on_timeline=lambda s, t, lines=lines: lines.setdefault(s, t))
            got[dev] = (recs, lines[args.size])
        recs, tl = got[one]
        per_call = {r["phase"]: r["model_s"] / max(1, r["calls"]) for r in recs}
        alg = from_timeline(tl, per_call)
        sub_cus = tl["devices"][0]["compute_units"]
        whole_cus = units or tl["devices"][0]["extra"]["sub_device"]["parent_compute_units"]
        sims = {one: simulate(alg, machine(1, sub_cus)), two: simulate(alg, machine(2, sub_cus)),
                whole: simulate(alg, machine(1, whole_cus))}
        for dev, (r, t) in got.items():
            measured = r[0]["run_host_model_s"]
            rows.append({"round": k, "configuration": dev, "devices": len(t["devices"]),
                         "compute_units": sum(d["compute_units"] for d in t["devices"]),
                         "measured_ms": measured * 1e3, "simulated_ms": sims[dev].makespan_s * 1e3,
                         "error": sims[dev].makespan_s / measured - 1,
                         "device_busy_ms": sum(x["model_s"] for x in r) * 1e3})
            print(f"round {k}: {dev:<16} measured {measured * 1e3:8.2f} ms  simulated "
                  f"{sims[dev].makespan_s * 1e3:8.2f} ms  error {rows[-1]['error']:+.1%}", flush=True)
        last = {"got": got, "sims": sims}
        pooled.append((per_call, tl, {dev: r[0]["run_host_model_s"] for dev, (r, _) in got.items()}))
    args.output.mkdir(parents=True, exist_ok=True)
    with open(args.output / "table.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    timelines = []
    for dev in (one, two, whole):
        timelines.append((f"measured on {dev}", chrome.measured_rows(last["got"][dev][1])))
        timelines.append((f"simulated from {one}: {last['sims'][dev].machine}", chrome.simulated_rows(last["sims"][dev])))
    gantt(timelines, args.output / "gantt.png", f"{app.name}, size {args.size}: measured and simulated")
    chrome.write(args.output / "trace.json", chrome.trace(timelines, recorded=last["got"][one][1]))
    # all rounds pooled: the one-sub-device phase costs' medians over the rounds, the graph of the round whose
    # one-sub-device run was the median one, against each configuration's median over the rounds
    phases = set.intersection(*(set(p) for p, _, _ in pooled))
    cost = {ph: float(np.median([p[ph] for p, _, _ in pooled])) for ph in phases}
    order = np.argsort([m[one] for _, _, m in pooled])
    tl = pooled[int(order[(len(order) - 1) // 2])][1]
    alg = from_timeline(tl, cost)
    sub_cus = tl["devices"][0]["compute_units"]
    whole_cus = units or tl["devices"][0]["extra"]["sub_device"]["parent_compute_units"]
    machines = {one: machine(1, sub_cus), two: machine(2, sub_cus), whole: machine(1, whole_cus)}
    print(f"\n{'configuration':<16} {'measured (median of rounds)':>28} {'simulated (pooled)':>19} {'error':>8} "
          f"{'per-round median |error|':>25}")
    summary = {}
    for dev in (one, two, whole):
        mine = [r for r in rows if r["configuration"] == dev]
        measured = float(np.median([m[dev] for _, _, m in pooled]))
        sim = simulate(alg, machines[dev]).makespan_s
        summary[dev] = {"measured_ms": measured * 1e3, "simulated_ms": sim * 1e3, "error": sim / measured - 1,
                        "machine": machines[dev].name,
                        "per_round_median_abs_error": float(np.median(np.abs([r["error"] for r in mine]))),
                        "per_round_max_abs_error": float(np.max(np.abs([r["error"] for r in mine])))}
        s = summary[dev]
        print(f"{dev:<16} {s['measured_ms']:>25.2f} ms {s['simulated_ms']:>16.2f} ms {s['error']:>+8.1%} "
              f"{s['per_round_median_abs_error']:>25.1%}")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    (args.output / "summary.json").write_text(json.dumps({
        "app": app.name, "size": args.size, "rounds": args.rounds, "summary": summary,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpuprofiler_version": __version__, "commit": commit, "command": " ".join(sys.argv)}, indent=1) + "\n")
    isolated.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
