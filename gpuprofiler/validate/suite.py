"""Validation: every registered predictor on a suite of kernels and apps, checked against real runs.

Steps: each item's small-size sweep, each target measured for real, then a prediction of every target
from every predictor of :mod:`gpuprofiler.models.registry` that applies (one row per item, size and
model; :mod:`gpuprofiler.report.validation` writes the files). Measurements go to
``OUTDIR/measurements.jsonl`` the moment each item's sizes finish (they are timed together, interleaved); a rerun reuses those of the same device,
item (same file contents) and size, so an interrupted run resumes. An item that fails (refused by the bounds check,
not compiling, failing its check, crashing the device, hung) is left out with the stage and the reason
(``ItemResult.failure``) and the rest go on; a rerun tries it again.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler.errors import ItemFailure, UserError, stage_of
from gpuprofiler.measure.policy import VALIDATE, VALIDATE_QUICK, TimingPolicy
from gpuprofiler.measure.records import pooled
from gpuprofiler.measure.runners.base import Runner, Task, TaskFailed, measured_before
from gpuprofiler.measure.runners.sequential import SequentialRunner
from gpuprofiler.measure.stats import model_value, spread
from gpuprofiler.measure.storage import MeasurementLog, provenance, read_records
from gpuprofiler.models import correction, intervals, registry
from gpuprofiler.models.base import NotApplicable, Prediction, Predictor
from gpuprofiler.models.fractal.regimes import recommended_small
from gpuprofiler.workloads.builtin import CORPORA, builtin_apps, builtin_specs, corpus, portable
from gpuprofiler.workloads.sweep import Sweep, from_records, item_digest, load_target, sweep_task


def suite_paths(suite: str, items: list[str] | None = None) -> list[Path]:
    """The specs (.toml) and apps (.py) of ``builtin`` or of a folder; with ``items``, only those of these names
    (file stems)."""
    if suite == "builtin":
        paths = builtin_specs() + builtin_apps()
    else:
        folder = corpus(suite) if suite in CORPORA and not Path(suite).is_dir() else Path(suite)
        if not folder.is_dir():
            raise UserError(f"--suite {suite!r}: not 'builtin', {', '.join(map(repr, CORPORA))} or a folder")
        paths = sorted(folder.glob("*.toml")) + sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
        if not paths:
            raise UserError(f"--suite {suite}: no kernel specs (*.toml) or apps (*.py) in the folder")
    if items is not None:
        if not items:
            raise UserError("--items: no item named")
        unknown = [name for name in items if name not in {p.stem for p in paths}]
        if unknown:
            raise UserError(f"--items: {', '.join(unknown)} not in the suite (it has: "
                            f"{', '.join(p.stem for p in paths)})")
        paths = [p for p in paths if p.stem in items]
    return paths


class Store:
    """The run's measurements: one group of records per (device, item digest, size, visit), appended when complete.

    ``device`` is the key the groups are stored under: the device's id (measured here), or ``kind:SLUG`` (measured on
    any device of that kind of a cluster); each record keeps the provenance of the device and host that measured
    it. A group is written once: a rerun, or a task retried after its worker died, finds it stored. A size
    measured in visits (``validate_visit`` of ``validate_visits``) is finished when every visit is stored; its
    records are then pooled (:func:`~gpuprofiler.measure.records.pooled`)."""

    def __init__(self, path: Path, device: Any, fresh: bool = False, key: str | None = None):
        self.log = MeasurementLog(path, device)
        self.device_id = key or device.id
        self.groups: dict[tuple[str, int], dict[int, list[dict]]] = {}
        self.counts: dict[tuple[str, int], int] = {}
        self.reused = 0
        if path.exists() and not fresh:
            by_group: dict[str, list[dict]] = {}
            for r in read_records(path):
                if _stored_under(r) == self.device_id and "validate_group" in r:
                    by_group.setdefault(r["validate_group"], []).append(r)
            for recs in by_group.values():
                first = recs[0]
                if len(recs) != first.get("validate_group_size"):
                    continue
                key_ = (first["validate_digest"], int(first["size"]))
                visits = int(first.get("validate_visits", 1))
                if self.counts.setdefault(key_, visits) != visits:
                    continue  # visits of another run's protocol: that run's own set decides
                if self.groups.setdefault(key_, {}).setdefault(int(first.get("validate_visit", 0)), recs) is recs:
                    self.reused += 1

    def _finished(self, digest: str, size: int) -> bool:
        got = self.groups.get((digest, size))
        return bool(got) and len(got) >= self.counts[(digest, size)]

    def has(self, digest: str, size: int, visit: int) -> bool:
        """Whether this visit of the size is stored, or the size is finished (by another run's visits)."""
        return visit in self.groups.get((digest, size), {}) or self._finished(digest, size)

    def get(self, digest: str, size: int) -> list[dict] | None:
        """The size's records, every visit pooled; None until every visit is stored."""
        if not self._finished(digest, size):
            return None
        got = self.groups[(digest, size)]
        return pooled([got[v] for v in sorted(got)])

    def put(self, digest: str, size: int, records: list[dict], meta: dict | None = None, visit: int = 0,
            visits: int = 1) -> bool:
        """Store one visit of one size's records (an app's phases) in one write: a crash keeps the group whole or
        not at all; a group already stored is not written again (False). ``meta``: the provenance where a worker
        measured."""
        key_ = (digest, size)
        if self.has(digest, size, visit) or self.counts.get(key_, visits) != visits:
            return False
        group = uuid.uuid4().hex
        tags = {"validate_digest": digest, "validate_group": group, "validate_device": self.device_id,
                "validate_group_size": len(records)}
        if visits > 1:
            tags.update(validate_visit=visit, validate_visits=visits)
        self.log.append_many([{**r, **tags} for r in records], meta)
        self.counts[key_] = visits
        self.groups.setdefault(key_, {})[visit] = records
        return True


def _stored_under(record: dict) -> str | None:
    """The device key a validate record was stored under (records before ``validate_device``: the device's id)."""
    return record.get("validate_device") or (record.get("device") or {}).get("id")


@dataclass
class Progress:
    """What is running and an estimate of what is left, on stderr.

    A measurement's time is taken as proportional to its size, at the rate (seconds per size unit) of
    the item's latest finished measurement; an item not yet started gets the run's mean time per
    measurement so far (before anything has finished, ``guess_s``).
    """

    pending: list[tuple[str, int]]
    say: Callable[[str], None]
    guess_s: float = 3.0
    done: int = 0
    spent: float = 0.0
    rates: dict[str, float] = field(default_factory=dict)

    def estimate(self) -> float:
        mean = self.spent / self.done if self.done else self.guess_s
        return sum(self.rates[k] * size if k in self.rates else mean for k, size in self.pending)

    def start(self, key: str, size: int, what: str) -> None:
        total = self.done + len(self.pending)
        self.say(f"[{self.done + 1}/{total}] {what}; {len(self.pending)} measurement(s) left, about "
                 f"{_duration(self.estimate())} to go")
        self._t0 = time.perf_counter()

    def finish(self, key: str, sizes: list[int], seconds: float | None = None) -> None:
        """The measurements of ``sizes`` (taken together since :meth:`start`, or in ``seconds`` elsewhere) are
        done."""
        secs = time.perf_counter() - self._t0 if seconds is None else seconds
        self.done += len(sizes)
        self.spent += secs
        self.rates[key] = secs / max(sum(sizes), 1)
        for size in sizes:
            if (key, size) in self.pending:
                self.pending.remove((key, size))

    def drop(self, key: str) -> None:
        """The item ``key`` failed: none of its measurements is left to run."""
        self.pending = [p for p in self.pending if p[0] != key]


def _duration(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


@dataclass
class ItemResult:
    """One item of the suite: its rows (one per target and model), the fitted predictors, notes and how many
    of its measurements were taken or reused; ``failure`` where it failed (then it has no rows)."""

    name: str
    path: Path
    kind: str
    rows: list[dict] = field(default_factory=list)
    fitted: dict[str, Predictor] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    measurements: int = 0
    reused: int = 0
    baselines: list[dict] = field(default_factory=list)
    failure: ItemFailure | None = None


def measure_plan(runner: Runner, store: Store, plan: list[tuple], policy: TimingPolicy, prog: Progress,
                 kind: str, say: Callable[[str], None]) -> list[TaskFailed]:
    """Every size of every planned item not in the store measured through ``runner`` on devices of ``kind`` (an
    item's sizes in one task, timed in alternation), in ``policy.visits`` visits: every item's first visit, then
    every item's second, so that an item's visits lie minutes apart (its reference check, and its launches
    checked against its buffers by following the kernel's indices, in the first only; later ones against the
    declared shapes); each visit of a size stored as it reaches this process. Returns the tasks that failed: an
    item whose task fails is not visited again by this run, and what it measured before is stored."""
    failed: list[TaskFailed] = []
    broken: set[str] = set()  # the digests of the items that failed
    sequential = isinstance(runner, SequentialRunner)
    visits = max(1, policy.visits)
    visit_of: dict[str, int] = {}

    def tasks():
        for visit in range(visits):
            for path, item, digest, small, _ in plan:
                if digest in broken:
                    continue
                todo = [s for s in small + list(item.target) if not store.has(digest, s, visit)]
                if not todo:
                    continue
                label = (f"{getattr(item, 'name', path.stem)} size{'s' if len(todo) > 1 else ''} "
                         f"{', '.join(map(str, todo))}" + (f" (visit {visit + 1} of {visits})" if visits > 1 else ""))
                if sequential:
                    prog.start(digest, max(todo), label)
                key = f"{digest}:{visit}:{','.join(map(str, todo))}"
                visit_of[key] = visit
                yield Task(key, sweep_task, (portable(path), digest, todo, policy.per_visit(visit),
                                             visit == 0, visit == 0), kind=kind, label=label)

    def meta(slot) -> dict | None:
        return None if sequential else provenance(slot.info, slot.host)

    def partial(task: Task, got) -> None:
        size, records = got
        store.put(task.args[1], size, records, visit=visit_of[task.key], visits=visits)

    def done(task: Task, outcome) -> None:
        digest, todo = task.args[1], task.args[2]
        for size, records in sorted(outcome.value.items()):
            store.put(digest, size, records, meta(outcome.slot), visit=visit_of[task.key], visits=visits)
        prog.finish(digest, todo, None if sequential else outcome.seconds)
        if not sequential:
            say(f"[{prog.done}/{prog.done + len(prog.pending)}] {task.label}: measured on {outcome.slot.name} in "
                f"{outcome.seconds:.1f} s; about {_duration(prog.estimate())} of measuring left")

    def failure(got: TaskFailed) -> None:
        digest = got.task.args[1]
        kept, slot = measured_before(got, runner.slots())
        for size, records in sorted(kept.items()) if slot is not None else ():  # (sequential: stored already)
            store.put(digest, size, records, meta(slot), visit=visit_of[got.task.key], visits=visits)
        broken.add(digest)
        failed.append(got)
        prog.drop(digest)
        say(f"{got.task.label}: failed ({stage_of(got.error)}): {' '.join(str(got.error).split())[:200]}; the other "
            f"items go on")

    runner.run(tasks(), done, failure, on_partial=partial)
    return failed


def check_models(models: list[str] | None) -> list[str]:
    """The predictors to run (None: every registered one); an unknown name is a UserError."""
    names = registry.names() if models is None else list(models)
    if not names:
        raise UserError(f"no model given: choose from {', '.join(registry.names())}")
    for name in names:
        registry.get(name)
    return names


def run(runner: Runner | Any, suite: str, outdir: Path, profile=None, models: list[str] | None = None,
        quick: bool = False, fresh: bool = False, say: Callable[[str], None] = lambda m: None,
        items: list[str] | None = None, spec_sizes: bool = False, isolate: bool | None = False,
        kind: str | None = None, after_measuring: Callable[[Any], Any] | None = None) -> list[ItemResult]:
    """Measure and predict every item of the suite; returns per-item results (rows for predictions.csv).

    ``runner``: where the measurements run (a :class:`~gpuprofiler.measure.runners.base.Runner`; a backend: this
    process, on it, with ``isolate`` (None: unless ``GPUPROFILER_ISOLATION=off``) the launches in the device's
    worker process); on a cluster every measurement goes to a device of ``kind`` (default: the cluster's only kind).

    The small sizes of each item are those ``extrapolate`` recommends for its targets (hardware-aware, from the
    profile: :func:`~gpuprofiler.models.fractal.regimes.recommended_small`), or with ``spec_sizes`` the item's
    own ``small`` list. ``after_measuring`` (the profile -> the profile) runs once the measuring is over, before
    the predictions: validate's own calibration has its gathered reads and streams drawn again
    (:mod:`gpuprofiler.calibrate.regather`)."""
    models = check_models(models)
    if not isinstance(runner, Runner):
        runner = SequentialRunner(runner, isolate)
    kind = kind or only_kind(runner)
    slot = next(s for s in runner.slots() if s.kind == kind)
    outdir.mkdir(parents=True, exist_ok=True)
    policy = VALIDATE_QUICK if quick else VALIDATE
    sequential = isinstance(runner, SequentialRunner)
    store = Store(outdir / "measurements.jsonl", slot.info if not sequential else runner.backend.info, fresh,
                  key=None if sequential else f"kind:{kind}")
    reused_before = set(store.groups)
    if store.reused:
        say(f"reusing {store.reused} finished measurement(s) from {store.log.path}")
    plan, unplanned = [], []
    for path in suite_paths(suite, items):
        item = load_target(path)
        name = getattr(item, "name", path.stem)
        small, notes = [], []
        if item.target:
            small, notes, _ = (list(item.small), [], "spec") if spec_sizes else recommended_small(
                item, item.target, profile)
        why = ("validate needs the item's default target sizes" if not item.target else
               f"validate needs at least two small sizes below the targets (got {small})"
               if len(small) < 2 or max(small) >= min(item.target) else None)
        if why is not None:  # this item cannot be validated: the others still are
            res = ItemResult(name, path, "app" if path.suffix == ".py" else "kernel")
            res.failure = ItemFailure(name, "plan", f"{path}: {why}")
            unplanned.append(res)
            continue
        plan.append((path, item, item_digest(path, item), small, notes))
    todo = [(d, s) for v in range(max(1, policy.visits)) for _, item, d, small, _ in plan
            for s in small + list(item.target) if not store.has(d, s, v)]
    prog = Progress(todo, say, guess_s=policy.budget_s * 3 + 1)
    where = slot.device_id if sequential else f"{len(runner.kinds()[kind])} device(s) of {runner.describe()}"
    say(f"{len(plan)} item(s), {len(todo)} measurement(s) to run on {where}")
    failed: dict[str, TaskFailed] = {}
    for got in measure_plan(runner, store, plan, policy, prog, kind, say):
        failed.setdefault(got.task.args[1], got)  # an item's first failure (a cluster may have run a later visit)
    if after_measuring is not None:
        profile = after_measuring(profile)
    jobs, results = [], list(unplanned)
    for path, item, digest, small, notes in plan:
        name = getattr(item, "name", path.stem)
        got = {s: store.get(digest, s) for s in small + list(item.target)}
        if digest in failed or any(v is None for v in got.values()):  # failed, or (a bug) not every size stored
            res = ItemResult(name, path, "app" if path.suffix == ".py" else "kernel")
            error = failed[digest].error if digest in failed else UserError("not every size was measured")
            res.failure = ItemFailure.of(name, error, where if sequential else f"kind:{kind}")
            results.append(res)
            continue
        sweep_recs = [r for s in small for r in got[s]]
        checks = {t: from_records(got[t]) for t in item.target}
        res = ItemResult(name, path, "app" if path.suffix == ".py" else "kernel", notes=list(notes))
        sizes = small + list(item.target)
        res.measurements = len(sizes)
        res.reused = sum(1 for s in sizes if (digest, s) in reused_before)
        jobs.append((res, item, from_records(sweep_recs), checks))
        results.append(res)
    bad = [r.name for r in results if r.failure]
    say(f"predicting {len(jobs)} item(s) with {', '.join(models)}"
        + (f" ({len(bad)} failed: {', '.join(bad)})" if bad else ""))
    predict_items(jobs, profile, models)  # fills each job's result, in place
    return results


def prediction_threads(jobs: int) -> int:
    """Threads that predict items at once: the host's cores (``GPUPROFILER_PREDICT_THREADS`` overrides), at most
    one per item. The cache analyses spend most of their time in numpy sorts, which release the GIL."""
    want = os.environ.get("GPUPROFILER_PREDICT_THREADS", "")
    try:
        n = int(want) if want else (os.cpu_count() or 1)
    except ValueError:
        raise UserError(f"GPUPROFILER_PREDICT_THREADS={want!r}: give a whole number of threads") from None
    return max(1, min(n, jobs))


def predict_items(jobs: list[tuple], profile, models: list[str], every_size: list | None = None) -> list[ItemResult]:
    """:func:`predict_item` for each ``(result, item, sweep, checks)`` job (``every_size``: each job's every
    measured size, a replay's), items on :func:`prediction_threads` threads once the measuring is over (no
    launch runs meanwhile): the same rows as one after another, in the jobs' order, in about half the time on
    two cores."""
    def one(k: int) -> ItemResult:
        res, item, sweep, checks = jobs[k]
        predict_item(res, item, sweep, checks, profile, models, None if every_size is None else every_size[k])
        return res

    threads = prediction_threads(len(jobs))
    if threads <= 1:
        return [one(k) for k in range(len(jobs))]
    # the apps first: each traces a whole program, the longest jobs, which started last held one thread alone
    order = sorted(range(len(jobs)), key=lambda k: jobs[k][0].kind != "app")
    with ThreadPoolExecutor(threads, thread_name_prefix="gpuprofiler-predict") as pool:
        done = dict(zip(order, pool.map(one, order)))
    return [done[k] for k in range(len(jobs))]


def only_kind(runner: Runner) -> str:
    """The runner's one kind of device (a UserError naming them where there are several)."""
    kinds = runner.kinds()
    if len(kinds) != 1:
        raise UserError(f"{runner.describe()} has devices of {len(kinds)} kinds: choose one with --device "
                        f"({', '.join(kinds)})")
    return next(iter(kinds))


def predict_item(res: ItemResult, item, sweep: Sweep | None, checks: dict[int, Sweep], profile, models: list[str],
                 every_size: dict[int, Sweep] | None = None) -> None:
    """Rows (kernel, size, model, predicted_s, measured_s, rel_error, interval) from every predictor that applies.

    A predictor fitted on the small-size ``sweep`` predicts the targets (``checks``); a static one predicts
    ``every_size`` where given (a replay has every size measured), else the targets. A prediction that
    carries per-phase figures (``details["phases"]``: phase -> {predicted_s, interval_s}) is compared phase by
    phase, as ``item/phase`` rows.
    """
    for name in models:
        predictor = registry.create(name)
        verdict = predictor.applies_to(item, profile)
        if not verdict:
            res.refused[name] = verdict.reason
            continue
        measured = checks if predictor.needs_measurements or every_size is None else every_size
        try:
            predictor.fit(item, profile, sweep if predictor.needs_measurements else None)
            predictions = predictor.predict(list(measured))
            if not predictor.needs_measurements and sweep is not None:
                predictions = _anchor(predictor, predictions, sweep)
        except NotApplicable as exc:
            res.refused[name] = str(exc).removeprefix(f"{name}: ")
            continue
        except UserError as exc:
            res.notes.append(f"{name}: {exc}")
            continue
        try:
            rows = [row for p in predictions for row in _rows(res.name, name, p.check(), measured[int(p.size)])]
        except ValueError as exc:
            res.notes.append(f"{name}: not a prediction: {exc}")
            continue
        res.fitted[name] = predictor
        res.rows += rows
        res.baselines += [b for p in predictions for b in baseline_rows(res.name, name, p, measured[int(p.size)])]
        res.notes += [w for p in predictions for w in p.details.get("warnings", []) if isinstance(w, str)]
    res.notes = list(dict.fromkeys(res.notes))


def _anchor(predictor: Predictor, predictions: list[Prediction], sweep: Sweep) -> list[Prediction]:
    """Each static prediction with its interval also reaching the model's error at the largest small size measured
    below it (:func:`gpuprofiler.models.intervals.anchored`; that size predicted too where it was not)."""
    nearest = {int(p.size): max((s for s in sweep.sizes if s < p.size), default=None) for p in predictions}
    have = {int(p.size): p for p in predictions}
    missing = sorted({s for s in nearest.values() if s is not None} - set(have))
    if missing:
        try:
            have.update({int(p.size): p for p in predictor.predict(missing)})
        except (NotApplicable, UserError):
            pass
    out = []
    for p in predictions:
        s = nearest[int(p.size)]
        if s is None or s not in have:
            out.append(p)
            continue
        k = sweep.sizes.index(s)
        phases = {name: model_value(per_size[k]) for name, per_size in sweep.phases.items()}
        out.append(intervals.anchored(p, have[s], model_value(sweep.totals[k]), phases))
    return out


def _rows(item: str, model: str, p: Prediction, measured: Sweep) -> list[dict]:
    """The prediction against the measured run: one row, or one per measured phase it predicts."""
    phases = p.details.get("phases") if isinstance(p.details.get("phases"), dict) else None
    if not phases:
        total = measured.total_summary()
        row = _row(item, model, p.size, p.seconds, (p.low, p.high), total.model, p.summary)
        return [{**row, "measured_median_s": total.median, "measured_spread": spread(measured.totals[0]),
                 "measured_visit_spread": visit_spread(measured.totals[0], measured.records),
                 "features": p.details.get("features"),
                 "kernel_code": p.details.get("kernel_code"), **_calibration_columns(p.details)}]
    out = []
    for phase, got in phases.items():
        if phase not in measured.phases:
            continue
        lo, hi = got["interval_s"]
        if not (math.isfinite(got["predicted_s"]) and 0 <= lo <= got["predicted_s"] <= hi < math.inf):
            raise ValueError(f"{model}: phase {phase}: {got['predicted_s']!r} s outside [{lo!r}, {hi!r}]")
        seen = model_value(measured.phases[phase][0])
        if seen > 0:
            out.append({**_row(f"{item}/{phase}", model, p.size, got["predicted_s"], got["interval_s"], seen,
                               got.get("summary", p.summary)),
                        "measured_median_s": float(np.median(measured.phases[phase][0])),
                        "measured_spread": spread(measured.phases[phase][0]),
                        "measured_visit_spread": visit_spread(measured.phases[phase][0], measured.records),
                        "features": got.get("features"),
                        "kernel_code": got.get("kernel_code"), **_calibration_columns(got)})
    return out


def _calibration_columns(details: dict) -> dict:
    """What the interval calibration keys a case by (:mod:`gpuprofiler.models.intervals`), and the model's own
    interval beside the calibrated one."""
    own = details.get("model_interval_s") or [math.nan, math.nan]
    calibrated = details.get("calibrated_interval_s") or [math.nan, math.nan]
    return {"family": details.get("family"), "crossing": details.get("crossing"),
            "device_kind": details.get("device_kind"), "device_name": details.get("device_name"),
            "model_interval_low_s": own[0],
            "model_interval_high_s": own[1],
            "calibrated_low_s": calibrated[0], "calibrated_high_s": calibrated[1],
            "evidence_size": details.get("evidence_size"), "evidence_log_error": details.get("evidence_log_error")}


def visit_spread(samples, records: list[dict]) -> float:
    """How far apart the visits of a target put its modelling figure: the largest visit's over the smallest's
    (NaN for a target measured in one visit). ``samples`` are the target's pooled runs in visit order, split
    by the visits' sample counts in its records."""
    counts = next((r["visits"] for r in records if r.get("visits")), None)
    x = np.asarray(samples, dtype=float)
    if not counts or sum(int(v["samples"]) for v in counts) != len(x):
        return math.nan
    edges = np.cumsum([int(v["samples"]) for v in counts])[:-1]
    figures = [model_value(part) for part in np.split(x, edges) if len(part)]
    return max(figures) / min(figures) if len(figures) > 1 and min(figures) > 0 else math.nan


BASELINES = {"fractal_s": ("fractal", "fractal_interval_s"), "extrap": ("Extra-P", None)}


def baseline_rows(item: str, model: str, p: Prediction, measured: Sweep) -> list[dict]:
    """The laws a predictor fitted on the same sweep as its chosen one, against the same measured target: the
    chosen prediction, the paper's pure power law (``fractal_s``) and Extra-P's default model (``extrap``, where
    installed); none for a predictor that reports no baselines."""
    d = p.details
    if "fractal_s" not in d:
        return []
    seen = measured.total_summary().model
    out = [{"kernel": item, "size": int(p.size), "model": model, "law": "chosen", "predicted_s": p.seconds,
            "interval_low_s": p.low, "interval_high_s": p.high}]
    extrap = (d.get("baselines_s") or {}).get("extrap")
    for key, value in (("fractal_s", d["fractal_s"]), ("extrap", extrap)):
        law, iv = BASELINES[key]
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            lo, hi = d.get(iv, (math.nan, math.nan)) if iv else (math.nan, math.nan)
            out.append({"kernel": item, "size": int(p.size), "model": model, "law": law, "predicted_s": float(value),
                        "interval_low_s": float(lo), "interval_high_s": float(hi)})
    for row in out:
        row["measured_s"] = seen
        row["rel_error"] = (row["predicted_s"] - seen) / seen
    return out


def summarize_baselines(rows: list[dict]) -> list[dict]:
    """One row per law of the baseline rows: cases, median, mean and max |error|, inside interval and its width;
    each law over the cases where every law predicted, so that they are compared on the same targets."""
    keys = {(r["kernel"], r["size"]) for r in rows}
    laws = list(dict.fromkeys(r["law"] for r in rows))
    common = [k for k in keys if all(any((r["kernel"], r["size"]) == k and r["law"] == law for r in rows)
                                     for law in laws)]
    out = []
    for law in laws:
        mine = [r for r in rows if r["law"] == law and (r["kernel"], r["size"]) in common]
        if not mine:
            continue
        errs = np.abs([r["rel_error"] for r in mine])
        with_iv = [r for r in mine if math.isfinite(r["interval_low_s"]) and r["interval_low_s"] > 0]
        out.append({"law": law, "cases": len(mine), "mape": float(errs.mean()),
                    "median_abs_error": float(np.median(errs)), "max_abs_error": float(errs.max()),
                    "inside_interval": (float(np.mean([r["interval_low_s"] <= r["measured_s"] <= r["interval_high_s"]
                                                       for r in with_iv])) if with_iv else math.nan),
                    "median_interval_width": (float(np.median([r["interval_high_s"] / r["interval_low_s"]
                                                               for r in with_iv])) if with_iv else math.nan)})
    return out


def model_notes(results: list[ItemResult], models: list[str]) -> list[str]:
    """One run-level note for each model that predicted no item (why, with the items for each reason when they
    differ); the other models' refusals become notes of their items."""
    notes = []
    for name in models:
        if not results or any(name in res.fitted for res in results):
            continue
        why: dict[str, list[str]] = {}
        for res in results:
            if name in res.refused:
                why.setdefault(res.refused.pop(name), []).append(res.name)
        if len(why) == 1:
            notes.append(f"{name}: not run, {next(iter(why))}")
        elif why:
            notes.append(f"{name}: not run: " + "; ".join(f"{r} ({', '.join(items)})" for r, items in why.items()))
    for res in results:
        res.notes += [f"{name}: {reason}" for name, reason in res.refused.items()]
    return notes


def _row(kernel: str, model: str, size: int, predicted: float, interval, measured: float, detail: str) -> dict:
    lo, hi = interval
    return {"kernel": kernel, "size": int(size), "model": model, "predicted_s": float(predicted),
            "measured_s": float(measured), "rel_error": (float(predicted) - float(measured)) / float(measured),
            "interval_low_s": float(lo), "interval_high_s": float(hi), "detail": detail}


def correction_samples(rows: list[dict], model: str) -> list[dict]:
    """The cases of ``model`` as the learned correction takes them; none if the model reports no features."""
    mine = [r for r in rows if r["model"] == model]
    if not any(r.get("features") for r in mine):
        return []
    return [{"kernel": r["kernel"], "code": r.get("kernel_code"), "features": r.get("features") or {},
             "predicted_s": r["predicted_s"], "measured_s": r["measured_s"], "row": r} for r in mine]


def add_corrections(rows: list[dict]) -> list[str]:
    """Each model whose every case carries the correction's features gets, per row, the prediction corrected by
    a learned correction that never saw the row's kernel (``loko_corrected_s``, ``loko_rel_error``); the other
    rows get NaN. Returns notes on models left without one."""
    notes = []
    for r in rows:
        r.setdefault("loko_corrected_s", math.nan)
        r.setdefault("loko_rel_error", math.nan)
    for model in dict.fromkeys(r["model"] for r in rows):
        samples = correction_samples(rows, model)
        if not samples:
            continue
        why = correction.unavailable(samples)
        if why:
            notes.append(f"{model}: no learned correction ({why})")
            continue
        for s, corrected in zip(samples, correction.leave_one_kernel_out(samples, model)):
            s["row"]["loko_corrected_s"] = float(corrected)
            s["row"]["loko_rel_error"] = (float(corrected) - s["measured_s"]) / s["measured_s"]
    return notes


def _calibrated_band(row: dict) -> tuple[float, float]:
    """A row's calibrated interval before its own smaller sizes widened it (the interval where nothing did)."""
    low = row.get("calibrated_low_s", math.nan)
    return (low, row["calibrated_high_s"]) if low == low else (row["interval_low_s"], row["interval_high_s"])


def summarize(rows: list[dict]) -> list[dict]:
    """One row per model: cases, MAPE, median |error|, max |error|, share of measured times inside the interval,
    and the same errors after the leave-one-kernel-out correction where there is one."""
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        errs = np.abs([r["rel_error"] for r in mine])
        with_iv = [r for r in mine if math.isfinite(r["interval_low_s"])]
        inside = [r["interval_low_s"] <= r["measured_s"] <= r["interval_high_s"] for r in with_iv]
        widths = [r["interval_high_s"] / r["interval_low_s"] for r in with_iv
                  if r["interval_low_s"] > 0 and math.isfinite(r["interval_high_s"])]
        alone = [(*_calibrated_band(r), r["measured_s"]) for r in with_iv]
        alone_widths = [hi / lo for lo, hi, _ in alone if lo > 0 and math.isfinite(hi)]
        loko = np.abs([r.get("loko_rel_error", math.nan) for r in mine])
        has = bool(len(loko)) and bool(np.isfinite(loko).all())
        out.append({"model": model, "cases": len(mine), "mape": float(errs.mean()),
                    "median_abs_error": float(np.median(errs)), "max_abs_error": float(errs.max()),
                    "inside_interval": float(np.mean(inside)) if inside else math.nan,
                    "cases_with_interval": len(with_iv),
                    "median_interval_width": float(np.median(widths)) if widths else math.nan,
                    "inside_calibrated": (float(np.mean([lo <= m <= hi for lo, hi, m in alone])) if alone
                                          else math.nan),
                    "median_calibrated_width": float(np.median(alone_widths)) if alone_widths else math.nan,
                    "loko_corrected_mape": float(loko.mean()) if has else math.nan,
                    "loko_corrected_median_abs_error": float(np.median(loko)) if has else math.nan,
                    "loko_corrected_max_abs_error": float(loko.max()) if has else math.nan})
    return out
