"""``gpuprofiler simulate``: a whole program scheduled on a machine of 1..k devices (Pomelov's simulation).

The program is a declared graph (TOML), a measured trace (``measure APP --trace F.json``), or an app, measured
here at ``--sizes`` (the largest is simulated, with each phase's median per call, against the runs' median). The machine is ``--devices`` like devices of ``--compute-units``
each (by default those of the recorded device), linked as the ``--profile`` measured. With ``--at M`` an app is
also predicted at size M: the program's operations there from a dry run (nothing executes), each kernel phase's
cost from the fractal predictor's per-phase prediction (fitted on the measured sizes with the device's profile),
each copy its bytes at the rate measured at the largest size, the host's work from a power law of the recorded
runs.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from gpuprofiler.cli.common import add_device, add_timing, int_list, progress
from gpuprofiler.errors import UserError
from gpuprofiler.measure.policy import MEASURE


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="schedule a whole program (app, measured trace or TOML graph) on 1..k "
                                        "devices: makespan, utilisation, critical path, Gantt and trace")
    p.add_argument("target", metavar="APP_OR_GRAPH",
                   help="an app (.py or builtin name), a measured trace (.json from `measure APP --trace`) or an "
                        "algorithm graph (.toml)")
    p.add_argument("--devices", type=int_list, help="device counts to simulate, e.g. 1,2,4 (default: as recorded, "
                                                    "or 1)")
    p.add_argument("--compute-units", type=int, help="compute units per simulated device (default: the recorded "
                                                     "device's, or 1)")
    p.add_argument("--profile", action="append", default=[], metavar="PROFILE.json",
                   help="hardware profile for the links and launch figures (repeat it for a machine of unlike "
                        "devices, one profile each)")
    p.add_argument("--pinned", action="store_true", help="price declared transfers on pinned host memory")
    p.add_argument("--queue", choices=("in-order", "out-of-order"), default="in-order")
    p.add_argument("--placement", choices=("recorded", "earliest"),
                   help="recorded: each task on its recorded device; earliest: list scheduling of the program's "
                        "data-connected groups (default: recorded when the machine has the recorded devices)")
    p.add_argument("--sizes", type=int_list, help="apps: sizes to measure (default: the app's largest small size)")
    p.add_argument("--at", type=int, metavar="SIZE", help="apps: also predict the program at this size")
    p.add_argument("--check", action="store_true", help="with --at: measure the app there too and report the error")
    add_device(p)
    add_timing(p, MEASURE)
    p.add_argument("--gantt", metavar="FILE.png", help="Gantt chart: the measured run (where there is one) above "
                                                        "each simulated machine")
    p.add_argument("--trace", metavar="FILE.json", help="the same timelines as Chrome trace-event JSON")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-o", "--output", help="apps: JSON-lines file for the measurements (default "
                                          "results/<device>/measurements.jsonl)")
    p.set_defaults(func=run)


def _machines(args, alg, profiles: list) -> list:
    from gpuprofiler.profile.hardware import view
    from gpuprofiler.simulate.architecture import DeviceNode, Machine, launch_from_profile, links_from_profile, machine

    devices = alg.measured.get("devices") or []
    recorded_cus = devices[0].get("compute_units") if devices else None
    cus = args.compute_units or recorded_cus or 1
    if args.compute_units is not None and args.compute_units < 1:
        raise UserError("--compute-units must be at least 1")
    name = devices[0].get("name", "device") if devices else "device"
    if len(profiles) > 1:
        if args.devices:
            raise UserError("several --profile options make one machine of those devices: leave out --devices")
        nodes = []
        for k, prof in enumerate(profiles):
            hw = view(prof)
            units = int(hw.compute_units.value) if hw.compute_units.ok else cus
            nodes.append(DeviceNode(f"{hw.name} #{k}", units, links_from_profile(prof, args.pinned),
                                    launch_from_profile(prof)))
        return [Machine(nodes, name=" + ".join(n.name for n in nodes))]
    counts = args.devices or [max(1, len({t.device for t in alg.tasks if t.device is not None}))]
    return [machine(n, cus, name, profiles[0] if profiles else None, args.pinned) for n in counts]


def _host_law(timelines: dict[int, dict]):
    """The host's own work per run against size, a power law fitted in log-log (one size: proportional)."""
    import numpy as np

    from gpuprofiler.simulate.algorithm import from_timeline

    sizes, host = [], []
    for size, tl in sorted(timelines.items()):
        g = from_timeline(tl)
        sizes.append(size)
        host.append(sum(t.host_before_s + t.host_after_s + t.host_call_s for t in g.tasks) + g.host_tail_s)
    if len(sizes) == 1 or min(host) <= 0:
        return lambda n: host[-1] * n / sizes[-1], 1.0
    slope, icept = np.polyfit(np.log(sizes), np.log(host), 1)
    return lambda n: float(math.exp(icept) * n ** slope), float(slope)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.profile.file import load_profile
    from gpuprofiler.report.gantt import gantt
    from gpuprofiler.simulate import chrome
    from gpuprofiler.simulate.algorithm import from_timeline, from_toml
    from gpuprofiler.simulate.schedule import scaling, simulate

    profiles = [load_profile(p) for p in args.profile]
    target = Path(args.target)
    measured_tl: dict | None = None
    result: dict[str, Any] = {"target": args.target}
    prediction: dict[str, Any] | None = None
    if target.suffix == ".toml":
        if args.sizes or args.at:
            raise UserError("--sizes and --at apply to apps, not to a declared graph")
        alg = from_toml(target)
    elif target.suffix == ".json":
        if args.sizes or args.at:
            raise UserError("--sizes and --at apply to apps, not to a recorded trace")
        measured_tl = chrome.load_recorded(target)
        alg = from_timeline(measured_tl)
    else:
        alg, measured_tl, prediction = _from_app(args, result, profiles)
    machines = _machines(args, alg, profiles)
    schedules = [simulate(alg, m, args.queue, args.placement) for m in machines]
    result["tasks"] = len(alg.tasks)
    result["simulated"] = [s.summary() for s in schedules]
    if measured_tl is not None:
        result["measured_run_s"] = measured_tl["run_s"]
        result["recorded_on"] = measured_tl["devices"][0].get("id")
        # the machine the run was recorded on, where simulated: its makespan against the measured run
        recorded_shape = [d.get("compute_units") for d in measured_tl["devices"]]
        reference = result.get("measured_run_median_s", measured_tl["run_s"])
        for m, s in zip(machines, result["simulated"]):
            if [d.compute_units for d in m.devices] == recorded_shape and reference > 0:
                simulated = result.get("per_run_simulated_median_s", s["makespan_s"])
                s["error_vs_measured"] = simulated / reference - 1
    if len(machines) > 1 and len(profiles) <= 1:
        result["scaling"] = scaling(alg, machines, args.queue)
    if prediction:
        result["prediction"] = prediction
    timelines = []
    if measured_tl is not None:
        timelines.append((f"measured on {measured_tl['devices'][0].get('id')}", chrome.measured_rows(measured_tl)))
    timelines += [(f"simulated: {s.machine}, {s.queue}", chrome.simulated_rows(s)) for s in schedules]
    if args.gantt:
        out = gantt(timelines, args.gantt, f"{alg.name}: measured and simulated")
        progress(f"Gantt chart written to {out}")
    if args.trace:
        out = chrome.write(args.trace, chrome.trace(timelines, recorded=measured_tl))
        progress(f"trace written to {out} (open it in https://ui.perfetto.dev)")
    if args.json:
        print(json.dumps(result, indent=1, default=float))
    else:
        _print(result)
    return 0


def _from_app(args, result: dict[str, Any], profiles: list):
    """Measure the app (with its timeline) at ``--sizes``; the largest size's recorded graph with each phase's
    measured cost per call; with ``--at``, the prediction there."""
    import numpy as np

    from gpuprofiler.cli.common import policy
    from gpuprofiler.device import open_backend
    from gpuprofiler.measure.storage import MeasurementLog, default_path
    from gpuprofiler.models.fractal.predictor import FractalPredictor
    from gpuprofiler.profile.locate import choose_profile
    from gpuprofiler.simulate.algorithm import at_size, from_timeline
    from gpuprofiler.simulate.architecture import machine
    from gpuprofiler.simulate.schedule import simulate
    from gpuprofiler.workloads import isolated
    from gpuprofiler.workloads.apps import App
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.sweep import from_records, load_target
    from gpuprofiler.workloads.trace import trace_operations

    path = resolve(args.target)
    item = load_target(path)
    if not isinstance(item, App):
        raise UserError(f"{path}: simulate takes an app (.py), a measured trace (.json) or a graph (.toml)")
    sizes = sorted(args.sizes or item.small[-1:])
    if not sizes:
        raise UserError(f"{path}: no --sizes given and the app has no SMALL sizes")
    if args.at and len(sizes) < 3:
        raise UserError("--at predicts from a sweep: give at least 3 --sizes below it")
    if args.at and args.at <= max(sizes):
        raise UserError("--at must lie above the measured sizes")
    if args.check and not args.at:
        raise UserError("--check measures the --at size")
    backend = open_backend(args.device)
    backend_kind = backend.kind
    profile = profiles[0] if profiles else choose_profile(None, backend.info).profile
    log = MeasurementLog(Path(args.output) if args.output else default_path(backend.info), backend.info)
    timelines: dict[int, dict] = {}
    try:
        progress(f"measuring {item.name} at {sizes} on {backend.info.id}, each run's timeline recorded")
        records = isolated.measure(backend, item, sizes, policy(args), on_record=log.append, progress=progress,
                                   on_timeline=lambda s, t: timelines.setdefault(s, t))
        check_records = []
        if args.check:
            check_records = isolated.measure(backend, item, [args.at], policy(args), on_record=log.append,
                                             progress=progress, on_timeline=lambda s, t: timelines.setdefault(s, t))
    finally:
        backend.close()
    top = sizes[-1]
    # medians throughout (each phase's per call, the runs' host time, the recorded run nearest it): a program's time
    # is a sum of its parts, and medians add where a low quantile of a sum lies above the sum of the parts' ones
    per_call = {r["phase"]: r["median_s"] / max(1, r["calls"]) for r in records if int(r["size"]) == top}
    measured_tl = timelines[top]
    alg = from_timeline(measured_tl, per_call)
    # each timed run simulated with its own phases' measured costs (the recorded run's host work and structure):
    # the median of those against the median run, so that no statistic of a sum is compared with a sum of statistics
    top_records = [r for r in records if int(r["size"]) == top]
    runs = min(len(r["samples_s"]) for r in top_records)
    one_machine = machine(len(measured_tl["devices"]), measured_tl["devices"][0].get("compute_units") or 1)
    per_run = [simulate(from_timeline(measured_tl, {r["phase"]: r["samples_s"][k] / max(1, r["calls"])
                                                    for r in top_records}), one_machine, args.queue).makespan_s
               for k in range(runs)]
    result["per_run_simulated_median_s"] = float(np.median(per_run))
    mine = top_records[0]
    result["size"] = top
    result["measured_run_median_s"] = mine["run_host_median_s"]
    result["measured_run_model_s"] = mine["run_host_model_s"]
    prediction = None
    if args.at:
        predictor = FractalPredictor().fit(item, profile, from_records(records))
        pred = predictor.predict([args.at])[0]
        rows = trace_operations(item, args.at, backend_kind)
        calls: dict[str, int] = {}
        for r in rows:
            calls[r["phase"]] = calls.get(r["phase"], 0) + 1
        here = {r["phase"]: r for r in records if int(r["size"]) == top}
        phases = {ph["name"]: ph["predicted_s"] for ph in pred.details["phases"]}
        kernel_phases = {r["phase"] for r in rows if r["kind"] == "kernel"}
        minor = [p for p in kernel_phases if p not in phases]
        if minor and "rest_s" in pred.details:  # the minor phases' predicted total, shared as they share it here
            rest_here = sum(here[p]["median_s"] for p in here if p not in phases)
            for p in minor:
                phases[p] = pred.details["rest_s"] * (here[p]["median_s"] / rest_here if rest_here > 0 else 0.0)
        per_call = {p: phases[p] / calls[p] for p in kernel_phases if p in phases}
        # a copy is bytes over the link: the seconds per byte measured at the largest size, per direction
        per_byte = {}
        for direction, phase in (("htod", "memcpy HtoD"), ("dtoh", "memcpy DtoH")):
            r = here.get(phase)
            if r and r.get("work"):
                per_byte[direction] = r["median_s"] / r["work"]
        host_law, exponent = _host_law({s: t for s, t in timelines.items() if s in sizes})
        top_host = host_law(top)
        target = at_size(alg, rows, per_call, per_byte, host_law(args.at) / top_host if top_host > 0 else 1.0,
                         args.at)
        devices = measured_tl["devices"]
        sim = simulate(target, machine(len(devices), devices[0].get("compute_units") or 1))
        prediction = {"size": args.at, "simulated_s": sim.makespan_s, "fractal_device_s": pred.seconds,
                      "fractal_model": pred.summary, "warnings": list(pred.details.get("warnings", [])),
                      "kernel_per_call_s": per_call, "copy_s_per_byte": per_byte, "host_exponent": exponent,
                      "operations": len(rows)}
        if check_records:
            measured = check_records[0]["run_host_median_s"]
            prediction["measured_s"] = measured
            prediction["error"] = sim.makespan_s / measured - 1
    return alg, measured_tl, prediction


def _print(result: dict[str, Any]) -> None:
    if "measured_run_median_s" in result:
        print(f"measured at size {result['size']}: {result['measured_run_median_s'] * 1e3:.2f} ms per run (median of "
              f"the timed runs; p10 {result['measured_run_model_s'] * 1e3:.2f} ms; the recorded run "
              f"{result['measured_run_s'] * 1e3:.2f} ms)")
    elif "measured_run_s" in result:
        print(f"recorded run on {result['recorded_on']}: {result['measured_run_s'] * 1e3:.2f} ms")
    print(f"{'machine':<40} {'queue':<13} {'makespan':>12}  utilisation")
    for s in result["simulated"]:
        util = ", ".join(f"{r} {u:.0%}" for r, u in s["utilisation"].items())
        print(f"{s['machine']:<40} {s['queue']:<13} {s['makespan_s'] * 1e3:>9.2f} ms  {util}")
        cp = s["critical_path"]
        print(f"{'':<40} critical path: {cp['steps']} steps, {cp['first']} .. {cp['last']}")
        if "error_vs_measured" in s:
            what = ("each timed run simulated with its phases' costs, median" if "per_run_simulated_median_s" in result
                    else "simulated")
            print(f"{'':<40} against the measured runs on this machine ({what}): {s['error_vs_measured']:+.1%}")
    if "scaling" in result:
        sc = result["scaling"]
        f = sc["serial_fraction"]
        print(f"\nscaling (Amdahl's serial fraction fitted: {'-' if f is None else f'{f:.3f}'})")
        print(f"{'devices':>7} {'makespan':>12} {'speedup':>8} {'efficiency':>10} {'Amdahl':>7} {'Gustafson':>9}")
        for r in sc["rows"]:
            am = "-" if r["amdahl_speedup"] is None else f"{r['amdahl_speedup']:.2f}"
            gu = "-" if r["gustafson_speedup"] is None else f"{r['gustafson_speedup']:.2f}"
            print(f"{r['devices']:>7} {r['makespan_s'] * 1e3:>9.2f} ms {r['speedup']:>8.2f} {r['efficiency']:>10.0%} "
                  f"{am:>7} {gu:>9}")
    if "prediction" in result:
        p = result["prediction"]
        line = f"\npredicted at size {p['size']}: {p['simulated_s'] * 1e3:.2f} ms (simulated from per-phase predictions)"
        if "measured_s" in p:
            line += f"; measured {p['measured_s'] * 1e3:.2f} ms (median of the runs), error {p['error']:+.1%}"
        print(line)
