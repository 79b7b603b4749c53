"""Replay validation: every registered predictor against stored measurements, without a device.

A measurements log (``measurements.jsonl`` of ``measure``, ``extrapolate``, ``validate`` or the comparison
script) holds real times of kernel specs and apps at several sizes, with the device that ran them. Replayed
against that device's hardware profile, every static model predicts every stored size (and, for an app,
every kernel phase it can model); a model that learns from small sizes is fitted on the item's stored
small sizes and predicts its stored targets. The rows are those of a live ``validate`` run, so the same
files and report come out: this is how a model is checked against GPU data one does not have.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.measure.policy import device_time
from gpuprofiler.measure.records import pooled
from gpuprofiler.measure.storage import read_records
from gpuprofiler.validate.suite import ItemResult, predict_items, suite_paths
from gpuprofiler.workloads.sweep import Sweep, from_records, load_target


def problem(r: Any) -> str | None:
    """Why a log line is not a usable measurement record (None if it is one)."""
    if not isinstance(r, dict) or not {"kernel", "phase", "size", "samples_s"} <= set(r):
        return "not a measurement record"
    if not all(isinstance(r[k], str) and r[k] for k in ("kernel", "phase")):
        return "kernel and phase must be names"
    size = r["size"]
    if isinstance(size, bool) or not isinstance(size, (int, float)) or size != size or size < 1 \
            or size != int(size):
        return "size is not a positive integer"
    samples = r["samples_s"]
    if not isinstance(samples, list) or not samples or not all(device_time(x) for x in samples):
        return "samples_s must be a list of device times between a picosecond and a day"
    for key in ("model_s", "median_s", "min_s"):
        if r.get(key) is not None and not device_time(r[key]):
            return f"{key} must be a device time between a picosecond and a day"
    work = r.get("work")
    if work is not None and (isinstance(work, bool) or not isinstance(work, (int, float)) or not 0 <= work < math.inf):
        return "work must be a non-negative number"
    if r.get("device") is not None and not isinstance(r["device"], dict):
        return "device must be a table"
    return None


def read_log(path: str | Path, say: Callable[[str], None] = lambda m: None) -> list[dict]:
    """The log's kernel and app records; a missing, empty or foreign file is a UserError, and lines that are
    not measurements are skipped with a note."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"--replay: measurements file not found: {path}")
    if not path.is_file():
        raise UserError(f"--replay {path}: not a regular file (a directory, a pipe or a device): write the log "
                        "to a file and give its path")
    try:
        lines = read_records(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--replay {path}: cannot read the file ({type(exc).__name__})") from None
    records, bad = [], {}
    for r in lines:
        why = problem(r)
        if why is None:
            records.append(dict(r, size=int(r["size"])))
        else:
            bad[why] = bad.get(why, 0) + 1
    if not records:
        detail = f" ({'; '.join(bad)})" if bad else ""
        raise UserError(f"--replay {path}: no measurement records in the file{detail}")
    if bad:
        say(f"replay: {sum(bad.values())} line(s) skipped: " + "; ".join(f"{n} {why}" for why, n in bad.items()))
    return records


def logged_device(records: list[dict]) -> dict:
    """The device the log's records were measured on (the last record's); a log of several devices is refused."""
    ids = {(r.get("device") or {}).get("id") for r in records} - {None}
    if len(ids) > 1:
        raise UserError(f"--replay: the log holds measurements of several devices ({', '.join(map(str, ids))}); "
                        "replay one device's log at a time")
    return next((r["device"] for r in reversed(records) if r.get("device")), {})


def latest_per_size(records: list[dict]) -> dict[int, list[dict]]:
    """Per size, the latest record of every phase (a log appended to by several runs keeps the newest); a size
    validate measured in visits gets the latest of each visit, pooled (its modelling figure is that of all
    the visits' runs, as the run that measured them used)."""
    by_key: dict[tuple[int, int, str], dict] = {}
    for r in records:
        by_key[(int(r["size"]), int(r.get("validate_visit", 0)), str(r["phase"]))] = r
    visits: dict[int, dict[int, list[dict]]] = {}
    for (size, visit, _), r in sorted(by_key.items()):
        visits.setdefault(size, {}).setdefault(visit, []).append(r)
    return {size: pooled([got[v] for v in sorted(got)]) for size, got in visits.items()}


def stored_sweep(sizes: list[int], item) -> tuple[list[int], list[int]]:
    """The small sizes and the targets among a log's sizes of an item: its spec's targets and the sizes below them
    (the stored sweep, whichever sizes it took); with no stored sweep, the largest size is the target."""
    targets = [s for s in sizes if s in set(item.target)]
    small = [s for s in sizes if targets and s < min(targets)]
    if len(small) < 2 or not targets:
        small, targets = sizes[:-1], sizes[-1:]
    return small, targets


def replay(log: str | Path, profile: Any, models: list[str], suite: str = "builtin",
           items: list[str] | None = None, say: Callable[[str], None] = lambda m: None) -> list[ItemResult]:
    """Predict every item of ``suite`` found in the log (by name) with every model, from the log's times."""
    records = read_log(log, say)
    named = {}
    for path in suite_paths(suite, items):
        item = load_target(path)
        named.setdefault(getattr(item, "name", path.stem), (path, item))
    logged = {r["kernel"] for r in records}
    missing = sorted(logged - set(named))
    if missing:
        where = "in the suite or among --items" if items else "in the suite"
        say(f"replay: skipped, not {where}: {', '.join(missing)}")
    jobs, every = [], []
    for name, (path, item) in named.items():
        mine = [r for r in records if r["kernel"] == name]
        if not mine:
            continue
        per_size = latest_per_size(mine)
        sizes = sorted(per_size)
        small, targets = stored_sweep(sizes, item)
        res = ItemResult(name, path, "app" if path.suffix == ".py" else "kernel")
        res.measurements = len(sizes)
        res.reused = len(sizes)
        sweep = from_records([r for s in small for r in per_size[s]]) if small else None
        checks: dict[int, Sweep] = {s: from_records(per_size[s]) for s in sizes}
        jobs.append((res, item, sweep, {t: checks[t] for t in targets}))
        every.append(checks)
    results = predict_items(jobs, profile, models, every)
    for res in results:
        say(f"replay: {res.name}: {res.measurements} size(s), {len(res.rows)} prediction(s)")
    if not results:
        raise UserError(f"--replay {log}: none of its items ({', '.join(sorted(logged))}) is in the suite {suite!r}")
    return results
