"""``gpuprofiler measure``: time a kernel spec or an app at given sizes, every record stored as it finishes."""

from __future__ import annotations

import argparse
import json
import math
import time
import uuid
from pathlib import Path

from gpuprofiler.cli.common import (
    add_cluster,
    add_device,
    add_timing,
    cluster_kind,
    end_with_failures,
    int_list,
    open_runner,
    overrides,
    plot_path,
    policy,
    progress,
)
from gpuprofiler.errors import DeviceError, UserError
from gpuprofiler.measure.policy import MEASURE


def add_parser(sub) -> None:
    p = sub.add_parser("measure", help="time a kernel spec (.toml) or an app (.py) at given sizes")
    p.add_argument("target", metavar="SPEC_OR_APP", help="spec/app path, or a builtin name such as vadd or cg")
    p.add_argument("--sizes", type=int_list, help="comma-separated sizes (default: the spec's small sizes)")
    add_device(p)
    p.add_argument("--json", action="store_true", help="print only JSON records on stdout")
    p.add_argument("-o", "--output", help="JSON-lines file to append to (default results/<device>/measurements.jsonl)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a spec parameter")
    add_timing(p, MEASURE)
    p.add_argument("--no-check", action="store_true", help="skip the numpy reference check")
    p.add_argument("--repeat", type=int, default=1, metavar="K",
                   help="measure everything K times in independent blocks and report the run-to-run spread of the "
                        "modelling figure (p10) and of the median")
    p.add_argument("--gap", type=float, default=0.0, metavar="SECONDS",
                   help="with --repeat: wait this long between blocks, to spread them in time")
    p.add_argument("--plot", metavar="FILE.png",
                   help="with --repeat: plot every block's samples, 10th percentile and median")
    p.add_argument("--trace", metavar="FILE.json",
                   help="apps: write the measured timeline (the run of median length at each size: every launch and "
                        "copy, its buffers, the host's calls) as Chrome trace-event JSON, for Perfetto or "
                        "chrome://tracing and for `gpuprofiler simulate`")
    p.add_argument("--sequential", action="store_true",
                   help="time one size after the other instead of in alternation (rounds over the sizes)")
    add_cluster(p)
    p.add_argument("--all-devices", action="store_true",
                   help="with --cluster: measure on every device of the cluster (a fleet sweep: each device's "
                        "records under its own key; a rerun skips what is stored)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpuprofiler.device import open_backend
    from gpuprofiler.measure.records import repeat_table
    from gpuprofiler.measure.storage import MeasurementLog, default_path, json_ready
    from gpuprofiler.report.text import print_measurements, print_repeats
    from gpuprofiler.workloads import isolated
    from gpuprofiler.workloads.apps import load_app
    from gpuprofiler.workloads.bounds import check_sizes
    from gpuprofiler.workloads.builtin import resolve
    from gpuprofiler.workloads.spec import load_spec

    path = resolve(args.target)
    is_app = path.suffix == ".py"
    item = load_app(path) if is_app else load_spec(path)
    sizes = args.sizes or item.small
    if not sizes:
        raise UserError(f"{path}: no --sizes given and the spec has no default small sizes")
    if args.repeat < 1 or not (args.gap >= 0 and math.isfinite(args.gap)):
        raise UserError("--repeat must be at least 1 and --gap a non-negative number of seconds")
    if args.plot and args.repeat < 2:
        raise UserError("--plot shows the blocks of --repeat K (K >= 2)")
    plot_path(args.plot)
    sets = overrides(args.set)
    if is_app and sets:
        raise UserError("--set applies to kernel specs, not apps")
    if args.trace and not is_app:
        raise UserError("--trace records an app's timeline (a .py app); a spec is one kernel: see `measure --json`")
    if not is_app:  # every launch against its buffers, before a device is opened or anything compiled
        check_sizes(item, sizes, sets, say=progress)
    runner = open_runner(args)
    if runner is not None:
        return _on_cluster(args, path, item, sizes, runner)
    if args.all_devices:
        raise UserError("--all-devices measures on every device of a cluster: give --cluster")
    backend = open_backend(args.device)
    log = MeasurementLog(Path(args.output) if args.output else default_path(backend.info), backend.info).check()
    progress(f"device {backend.info.id}: {backend.info.name}; measurements go to {log.path}")

    block = {"n": 0, "id": uuid.uuid4().hex[:12]}

    def keep(rec: dict) -> None:
        if args.repeat > 1:
            rec.update(repeat_block=block["n"], repeat_blocks=args.repeat, repeat_id=block["id"])
        log.append(rec)
        shared = rec.get("contention") or {}
        progress(f"{rec['kernel']}/{rec['phase']} size {rec['size']}: p10 {rec['model_s'] * 1e6:.1f} us, median "
                 f"{rec['median_s'] * 1e6:.1f} us "
                 f"({rec['samples']} samples, {rec['stop_reason']}); saved"
                 + (f"; CONTENDED: other processes took {shared.get('share', 0):.0%} of the cores while it ran, "
                    "its times are slower than the device's own" if rec.get("contended") else ""))

    records: list[dict] = []
    timelines: dict[int, dict] = {}

    def timeline(size: int, data: dict) -> None:
        timelines.setdefault(size, data)  # the first block's

    try:
        for n in range(args.repeat):
            block["n"] = n
            if n:
                if args.gap:
                    progress(f"block {n + 1}/{args.repeat} in {args.gap:g} s")
                    time.sleep(args.gap)
                else:
                    progress(f"block {n + 1}/{args.repeat}")
            check = not args.no_check and n == 0
            # in the device's worker process (a crashing runtime is exit 3, the records stored so far kept); the
            # buffers were checked above
            records += isolated.measure(backend, item, sizes, policy(args), check=check, on_record=keep,
                                        overrides=sets or None, progress=progress, interleave=not args.sequential,
                                        bounds=False, on_timeline=timeline if args.trace else None)
    except KeyboardInterrupt:
        progress(f"interrupted: {log.written} finished measurement(s) kept in {log.path}")
        return 130
    except DeviceError:
        progress(f"{log.written} finished measurement(s) kept in {log.path}")
        raise
    finally:
        backend.close()
    if args.json:
        print(json.dumps(json_ready(records), indent=1))
    else:
        print_measurements(records)
        if args.repeat > 1:
            print()
            print_repeats(repeat_table(records))
    if args.trace and timelines:
        from gpuprofiler.simulate import chrome

        named = [(f"measured: {item.name} size {size} on {data['devices'][0]['id']}", chrome.measured_rows(data))
                 for size, data in sorted(timelines.items())]
        out = chrome.write(args.trace, chrome.trace(named, recorded=timelines[min(timelines)]))
        progress(f"timeline of {len(timelines)} size(s) written to {out} (open it in https://ui.perfetto.dev)")
    if args.plot:
        from gpuprofiler.report.plots import plot_repeats

        out = plot_repeats(records, args.plot)
        if out:
            progress(f"plot written to {out}")
    return 0


def _on_cluster(args: argparse.Namespace, path: Path, item, sizes: list[int], runner) -> int:
    """``measure --cluster``: the sizes timed together on one device of a kind (``--device``), or with
    ``--all-devices`` on every device of the cluster; records stored under (device, item digest, size) as each task
    comes back, what is stored already skipped. A task that fails keeps the sizes it finished; the others go on, the
    failures are listed (``LOG.failed.csv`` too) and the exit status is 4."""
    from gpuprofiler.errors import ItemFailure
    from gpuprofiler.measure.runners.base import Task, measured_before
    from gpuprofiler.measure.storage import KeyedLog, provenance, results_root
    from gpuprofiler.report.text import print_measurements
    from gpuprofiler.workloads.builtin import portable
    from gpuprofiler.workloads.sweep import item_digest, sweep_task

    try:
        if args.set or args.trace or args.repeat > 1 or args.sequential:
            raise UserError("--cluster measures the spec or app as it is, sizes in alternation: leave out --set, "
                            "--trace, --repeat and --sequential")
        digest, ref = item_digest(path, item), portable(path)
        if args.all_devices:
            if args.device:
                raise UserError("--all-devices measures on every device of the cluster: leave out --device")
            places = [(s.name, None, s) for s in runner.slots()]
            default = results_root() / "fleet" / "measurements.jsonl"
        else:
            kind = cluster_kind(runner, args.device)
            places = [(f"kind:{kind}", kind, None)]
            default = results_root() / kind / "measurements.jsonl"
        store = KeyedLog(Path(args.output) if args.output else default, runner.slots()[0].info)
        timing = policy(args)
        tasks = []
        for where, kind, slot in places:
            todo = [s for s in sizes if f"{where}|{digest}|{s}" not in store]
            if todo:
                tasks.append(Task(where, sweep_task, (ref, digest, todo, timing, False, not args.no_check),
                                  kind=kind, slot=slot, label=f"{item.name} on {where}"))
        progress(f"{len(tasks)} task(s) on {runner.describe()}; {store.stored} group(s) already in {store.log.path}")
        shown: list[dict] = []

        def done(task: Task, outcome) -> None:
            groups = [(f"{task.key}|{digest}|{size}", records) for size, records in sorted(outcome.value.items())]
            if store.put_many(groups, provenance(outcome.slot.info, outcome.slot.host)):
                shown.extend(r for _, records in groups for r in records if len(shown) < 40)
            progress(f"{task.label}: {len(outcome.value)} size(s) measured on {outcome.slot.name} in "
                     f"{outcome.seconds:.1f} s; saved")

        failed: list[ItemFailure] = []

        def failure(got) -> None:
            kept, slot = measured_before(got, runner.slots())
            if slot is not None and kept:
                store.put_many([(f"{got.task.key}|{digest}|{size}", records) for size, records in sorted(kept.items())],
                               provenance(slot.info, slot.host))
            failed.append(ItemFailure.of(item.name, got.error, got.task.key))
            progress(f"{got.task.label}: failed ({failed[-1].stage})" + (f", {len(kept)} size(s) kept" if kept else "")
                     + "; the other tasks go on")

        runner.run(tasks, done, failure)
    except KeyboardInterrupt:
        progress("interrupted: what finished is kept; rerun to measure the rest")
        return 130
    finally:
        runner.close()
    if shown:
        print_measurements(shown)
    progress(f"{store.records} record(s) stored in {store.log.path}" + (f" (first {len(shown)} shown)"
                                                                       if store.records > len(shown) else ""))
    log = store.log.path
    return end_with_failures(failed, log.with_name(log.stem + ".failed.csv"), len(tasks), "task")
