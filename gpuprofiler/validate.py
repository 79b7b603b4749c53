"""``gpuprofiler validate``: every applicable model on a suite of kernels, checked against real runs.

Steps: a hardware profile (given, reused from OUTDIR, or calibrated), each item's small-size sweep,
each target measured for real, then predictions from every model that applies, written as
``predictions.csv``, ``summary.csv``, ``report.md`` and plots (see :mod:`gpuprofiler.validate_report`).
Measurements go to ``OUTDIR/measurements.jsonl`` the moment each size finishes; a rerun reuses those
of the same device, item (same file contents) and size, so an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.timing import SWEEP_WARMUP_S, TimingPolicy

MODELS = ("fractal", "maxplus", "pipeline")
QUICK_POLICY = TimingPolicy(warmup=1, warmup_s=SWEEP_WARMUP_S, min_samples=5, budget_s=0.25)
FULL_POLICY = TimingPolicy(warmup=2, warmup_s=SWEEP_WARMUP_S, min_samples=5, budget_s=1.0)


def suite_paths(suite: str) -> list[Path]:
    """The specs (.toml) and apps (.py) of ``builtin`` or of a folder."""
    from gpuprofiler.builtin import builtin_apps, builtin_specs

    if suite == "builtin":
        return builtin_specs() + builtin_apps()
    folder = Path(suite)
    if not folder.is_dir():
        raise UserError(f"--suite {suite!r}: not 'builtin' and not a folder")
    paths = sorted(folder.glob("*.toml")) + sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not paths:
        raise UserError(f"--suite {suite}: no kernel specs (*.toml) or apps (*.py) in the folder")
    return paths


def item_digest(path: Path, item: Any) -> str:
    """A digest of the item's file and its kernel sources: a changed kernel is measured again."""
    h = hashlib.sha256(path.read_bytes())
    sources = getattr(item, "sources", None) or {}
    for key in sorted(sources):
        src = Path(sources[key])
        if src.is_file():
            h.update(src.read_bytes())
    for src in sorted(path.parent.glob(path.stem + ".c[lu]")) if path.suffix == ".py" else []:
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


class Store:
    """The run's measurements: one group of records per (device, item digest, size), appended when complete."""

    def __init__(self, path: Path, device: Any, fresh: bool = False):
        from gpuprofiler.storage import MeasurementLog, read_records

        self.log = MeasurementLog(path, device)
        self.device_id = device.id
        self.groups: dict[tuple[str, int], list[dict]] = {}
        if path.exists() and not fresh:
            by_group: dict[str, list[dict]] = {}
            for r in read_records(path):
                if r.get("device", {}).get("id") == device.id and "validate_group" in r:
                    by_group.setdefault(r["validate_group"], []).append(r)
            for recs in by_group.values():
                if len(recs) == recs[0].get("validate_group_size"):
                    self.groups[(recs[0]["validate_digest"], int(recs[0]["size"]))] = recs
        self.reused = len(self.groups)

    def get(self, digest: str, size: int) -> list[dict] | None:
        return self.groups.get((digest, size))

    def put(self, digest: str, size: int, records: list[dict]) -> None:
        group = uuid.uuid4().hex
        for r in records:
            self.log.append({**r, "validate_digest": digest, "validate_group": group,
                             "validate_group_size": len(records)})
        self.groups[(digest, size)] = records


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

    def finish(self, key: str, size: int) -> None:
        secs = time.perf_counter() - self._t0
        self.done += 1
        self.spent += secs
        self.rates[key] = secs / max(size, 1)
        if (key, size) in self.pending:
            self.pending.remove((key, size))


def _duration(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


@dataclass
class ItemResult:
    name: str
    path: Path
    kind: str
    rows: list[dict] = field(default_factory=list)
    extrapolation: Any = None
    records: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    measurements: int = 0
    reused: int = 0


def _measure(store: Store, backend, item, digest: str, size: int, policy: TimingPolicy, prog: Progress,
             label: str) -> list[dict]:
    from gpuprofiler.sweep import run_sweep

    have = store.get(digest, size)
    if have is not None:
        return have
    prog.start(digest, size, f"{label} size {size}")
    got: list[dict] = []
    run_sweep(backend, item, [size], policy, on_record=got.append)
    store.put(digest, size, got)
    prog.finish(digest, size)
    return got


def run(backend, suite: str, outdir: Path, profile=None, models: tuple[str, ...] = MODELS, quick: bool = False,
        fresh: bool = False, say: Callable[[str], None] = lambda m: None) -> list[ItemResult]:
    """Measure and predict every item of the suite; returns per-item results (rows for predictions.csv)."""
    from gpuprofiler.sweep import from_records, load_target

    outdir.mkdir(parents=True, exist_ok=True)
    policy = QUICK_POLICY if quick else FULL_POLICY
    store = Store(outdir / "measurements.jsonl", backend.info, fresh)
    reused_before = set(store.groups)
    if store.reused:
        say(f"reusing {store.reused} finished measurement(s) from {store.log.path}")
    plan = []
    for path in suite_paths(suite):
        item = load_target(path)
        if not item.small or not item.target:
            raise UserError(f"{path}: validate needs the item's default small and target sizes")
        plan.append((path, item, item_digest(path, item)))
    todo = [(d, s) for _, item, d in plan for s in list(item.small) + list(item.target) if store.get(d, s) is None]
    prog = Progress(todo, say, guess_s=policy.budget_s * 3 + 1)
    say(f"{len(plan)} item(s), {len(todo)} measurement(s) to run on {backend.info.id}")
    results = []
    for path, item, digest in plan:
        name = getattr(item, "name", path.stem)
        sweep_recs = [r for s in item.small for r in _measure(store, backend, item, digest, s, policy, prog,
                                                               f"{name} (small)")]
        checks = {t: from_records(_measure(store, backend, item, digest, t, policy, prog, f"{name} (target)"))
                  for t in item.target}
        res = ItemResult(name, path, "app" if path.suffix == ".py" else "kernel")
        sizes = list(item.small) + list(item.target)
        res.measurements = len(sizes)
        res.reused = sum(1 for s in sizes if (digest, s) in reused_before)
        predict_item(res, item, from_records(sweep_recs), checks, profile, models, backend)
        results.append(res)
    return results


def predict_item(res: ItemResult, item, sweep, checks: dict, profile, models, backend) -> None:
    """Rows (kernel, size, model, predicted_s, measured_s, rel_error, interval) for every applicable model."""
    from gpuprofiler.extrapolate import analyse, measured_total

    measured = {t: float(measured_total(s)[0]) for t, s in checks.items()}
    if "fractal" in models:
        ex, recs = analyse(item, sweep, list(checks), profile, checks=checks, use_extrap=False)
        res.extrapolation, res.records = ex, recs
        res.notes += ex.warnings
        for r in recs:
            res.rows.append(_row(res.name, r["size"], "fractal", r["predicted_s"], measured[r["size"]],
                                 r["interval_s"], r["model"]))
    if "maxplus" in models:
        if res.kind == "app":
            res.notes.append("maxplus: not applied to apps (it models one kernel)")
        elif profile is None:
            res.notes.append("maxplus: needs a profile")
        else:
            _maxplus(res, item, profile, measured, backend)
    if "pipeline" in models and backend.kind == "cuda":  # on other devices the report says so once
        if res.kind == "app":
            res.notes.append("pipeline: not applied to apps")
        else:
            _pipeline(res, item, profile, measured)


def _maxplus(res: ItemResult, item, profile, measured: dict, backend) -> None:
    from gpuprofiler.maxplus.builder import build_spec
    from gpuprofiler.maxplus.models import parameters, predict

    for t, m in measured.items():
        try:
            inst = item.instantiate(t)
            kernel = build_spec(inst, backend.kind)
            params = parameters(profile, kernel)
            p = predict(kernel, params, math.prod(inst.global_size), t, "serial")
        except UserError as exc:
            res.notes.append(f"maxplus: {exc}")
            return
        res.rows.append(_row(res.name, t, "maxplus", p.predicted_s, m, None, f"serial, {p.batches}, n={p.n}"))


def _pipeline(res: ItemResult, item, profile, measured: dict) -> None:
    from gpuprofiler.pipeline.specs import predict_spec

    for t, m in measured.items():
        try:
            p = predict_spec(item.path, t, profile)
        except UserError as exc:
            res.notes.append(f"pipeline: {exc}")
            return
        res.rows.append(_row(res.name, t, "pipeline", p["predicted_s"], m, None,
                             f"PTX pipeline simulator, {p.get('arch', '')}"))


def _row(kernel: str, size: int, model: str, predicted: float, measured: float, interval, detail: str) -> dict:
    lo, hi = (interval if interval else (math.nan, math.nan))
    return {"kernel": kernel, "size": int(size), "model": model, "predicted_s": float(predicted),
            "measured_s": float(measured), "rel_error": (float(predicted) - float(measured)) / float(measured),
            "interval_low_s": float(lo), "interval_high_s": float(hi), "detail": detail}


def summarize(rows: list[dict]) -> list[dict]:
    """One row per model: cases, MAPE, median |error|, max |error|, share of measured times inside the interval."""
    import numpy as np

    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        errs = np.abs([r["rel_error"] for r in mine])
        with_iv = [r for r in mine if math.isfinite(r["interval_low_s"])]
        inside = [r["interval_low_s"] <= r["measured_s"] <= r["interval_high_s"] for r in with_iv]
        out.append({"model": model, "cases": len(mine), "mape": float(errs.mean()),
                    "median_abs_error": float(np.median(errs)), "max_abs_error": float(errs.max()),
                    "inside_interval": float(np.mean(inside)) if inside else math.nan,
                    "cases_with_interval": len(with_iv)})
    return out
