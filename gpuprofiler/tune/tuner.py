"""The tuner: every configuration the strategy picks is compiled, checked against the spec's reference and timed
by the package's engine at the target size (its modelling figure, the 10th percentile); a configuration that
fails to compile, launch or check is reported with the stage and the reason and the tune goes on (a rerun tries it
again)."""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from gpuprofiler.errors import GpuProfilerError, ItemFailure, UserError, stage_of
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.runners.base import Task
from gpuprofiler.models import registry
from gpuprofiler.models.base import NotApplicable
from gpuprofiler.tune.space import Space, config_key
from gpuprofiler.tune.store import TuneStore, tune_key
from gpuprofiler.workloads import isolated, sparse
from gpuprofiler.workloads.spec import KernelSpec
from gpuprofiler.workloads.sweep import item_digest

# the policy of a configuration at the target: as `measure`, one placement, a second of sampling
TUNE = TimingPolicy(warmup=2, warmup_s=0.1, min_samples=5, budget_s=1.0, rel_ci=0.02)
# a configuration at the ranking size (the model strategy's small-size sweep)
RANK = TimingPolicy(warmup=1, warmup_s=0.05, min_samples=5, budget_s=0.2, rel_ci=0.03)
RANK_FRACTION = 8  # the ranking size: the target over this, ...
LLC_FACTOR = 1.25  # ... or larger, so that its arrays exceed the last-level cache by this factor where the target's do


def table_columns(names: list[str]) -> list[str]:
    """The columns of a tune's table.csv: the parameters, then the figures."""
    return list(names) + ["status", "seconds", "ci_low_s", "ci_high_s", "median_s", "gbps", "samples", "rank_s",
                          "stage", "reason"]


def matrix_key(source: str | None) -> str | None:
    """A matrix as the store keys it: a family by name, a Matrix Market file by its path and contents' digest (an
    edited file is measured again)."""
    if source is None or not sparse.is_file_source(source):
        return source
    h = hashlib.sha256()
    with open(source, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return f"{source}#{h.hexdigest()[:16]}"


@dataclass
class Result:
    """One configuration: ``status`` ok (measured), failed (compile, launch or check; ``reason``), restricted or
    invalid (a restriction false or not evaluable; never run); the target's record where measured."""

    config: dict[str, Any]
    status: str
    reason: str = ""
    record: dict | None = None
    rank_record: dict | None = None
    reused: bool = False

    @property
    def key(self) -> str:
        return config_key(self.config)

    @property
    def seconds(self) -> float:
        return float(self.record["model_s"]) if self.record and self.status == "ok" else math.nan

    @property
    def stage(self) -> str:
        """Where a failed configuration failed (bounds, compile, check, device crash, timeout, ...); else empty."""
        return str((self.record or {}).get("stage") or "error") if self.status == "failed" else ""

    def row(self) -> dict[str, Any]:
        r = self.record or {}
        out = {**self.config, "config": self.key, "status": self.status, "stage": self.stage, "reason": self.reason,
               "seconds": self.seconds, "ci_low_s": r.get("model_ci_low_s", math.nan),
               "ci_high_s": r.get("model_ci_high_s", math.nan), "median_s": r.get("median_s", math.nan),
               "gbps": r.get("gbps") if r.get("gbps") is not None else math.nan, "samples": r.get("samples", 0),
               "reused": self.reused}
        if self.rank_record is not None:
            out["rank_s"] = self.rank_record.get("model_s", math.nan)
        return out


def measure_config(backend: Any, spec: KernelSpec, size: int, config: dict[str, Any], policy: TimingPolicy,
                   check: bool, isolate: bool | None) -> dict:
    """One configuration of ``spec`` measured at ``size`` (checked where ``check``): its record, or a failed one
    with the reason."""
    try:
        recs = isolated.measure(backend, spec, [size], policy, check=check, overrides=dict(config),
                                isolate=isolate)
        return {**recs[-1], "tune_status": "ok"}
    except GpuProfilerError as exc:
        return failed_record(spec, size, exc)


def failed_record(spec: KernelSpec, size: int, exc: BaseException) -> dict:
    """The stored record of a configuration that failed: the stage and the reason."""
    return {"kind": "tune", "kernel": spec.name, "size": int(size), "tune_status": "failed", "stage": stage_of(exc),
            "reason": str(exc)[:500], "error": type(exc).__name__}


def tune_task(ctx, spec: KernelSpec, size: int, config: dict[str, Any], policy: TimingPolicy, check: bool) -> dict:
    """A runner's task: one configuration measured on the task's device (the ranking run is not checked: a
    configuration is checked where it is measured at the target)."""
    return measure_config(ctx.backend(), spec, size, config, policy, check, ctx.isolate)


@dataclass
class Tuner:
    backend: Any
    spec: KernelSpec
    size: int
    space: Space
    store: TuneStore
    policy: TimingPolicy = field(default_factory=lambda: TUNE)
    rank_policy: TimingPolicy = field(default_factory=lambda: RANK)
    budget: int | None = None  # at most this many configurations measured at the target
    say: Callable[[str], None] = lambda m: None
    isolate: bool | None = None
    rank_size: int | None = None
    profile: Any = None  # the device's hardware profile: with one, a static predictor may rank (``ranker``)
    ranker: str = "sweep"  # "sweep": each configuration timed at ``rank_size``; else a static predictor's name
    runner: Any = None  # a cluster's runner: configurations measured on its devices of ``kind``, several at once
    kind: str | None = None

    def __post_init__(self):
        self.digest = item_digest(Path(self.spec.path), self.spec)
        self.matrix = matrix_key((self.spec.matrix or {}).get("source"))
        self.results: dict[str, Result] = {}
        self.candidates: list[dict[str, Any]] = []
        for config in self.space.configs():
            why = self.space.verdict(config)
            if why is None:
                self.candidates.append(config)
            else:
                status = "invalid" if why.startswith("invalid") else "restricted"
                self.results[config_key(config)] = Result(config, status, why)
        self.measure_s = 0.0
        self.rank_s = 0.0
        self._new: set[str] = set()
        if self.rank_size is None:
            self.rank_size = self.ranking_size()

    def choose_ranker(self, wanted: str) -> str:
        """``wanted``: "sweep", "auto" (the first static predictor that applies to the spec on the profile, else
        the sweep) or a static predictor's name (a UserError where it does not apply)."""
        if wanted == "sweep":
            return "sweep"
        names = [n for n in registry.names() if not registry.get(n).needs_measurements] if wanted == "auto" \
            else [wanted]
        if wanted != "auto" and registry.get(wanted).needs_measurements:
            raise UserError(f"--rank {wanted}: a predictor fitted on a sweep, not a static one")
        if self.profile is None:
            if wanted != "auto":
                raise UserError(f"--rank {wanted}: a static model needs the device's profile (--profile)")
            return "sweep"
        probe = self.configured(self.candidates[0]) if self.candidates else self.spec
        for name in names:
            verdict = registry.create(name).applies_to(probe, self.profile)
            if verdict:
                return name
            if wanted != "auto":
                raise UserError(f"--rank {wanted}: does not apply: {verdict.reason}")
        return "sweep"

    def ranking_size(self) -> int:
        """An eighth of the target, or more where that would leave the last-level cache's regime the target is in:
        a memory-bound kernel whose small arrays fit the cache ranks its configurations by what the cache hides
        (a padded SpMV format's extra bytes cost nothing there). At most half the target."""
        size = max(1, self.size // RANK_FRACTION)
        cache = float((self.backend.info.extra or {}).get("global_mem_cache_bytes") or 0)
        if cache > 0 and self.candidates:
            try:
                target_bytes = self.spec.instantiate(self.size, dict(self.candidates[0])).array_bytes
            except GpuProfilerError:
                target_bytes = 0
            if target_bytes > LLC_FACTOR * cache:
                size = max(size, math.ceil(self.size * LLC_FACTOR * cache / target_bytes))
        return self.spec.valid_size(min(size, max(1, self.size // 2)))

    @property
    def measured_count(self) -> int:
        return sum(1 for r in self.results.values() if r.status in ("ok", "failed"))

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.measured_count >= self.budget

    def _key(self, config: dict[str, Any], stage: str, size: int) -> str:
        where = f"kind:{self.kind}" if self.runner is not None else self.backend.info.id
        return tune_key(where, self.digest, self.matrix, size, config_key(config), stage)

    def _run(self, config: dict[str, Any], size: int, policy: TimingPolicy, stage: str) -> tuple[dict, bool]:
        """The stored record of (config, size, stage), or a new one measured (or failed) and stored."""
        key = self._key(config, stage, size)
        if key in self._new:  # measured by this run (a cluster's batch)
            return self.store.found[key], False
        got = self.store.get(key)
        if got is not None:
            return got, True
        if self.runner is not None:
            self._run_many([config], size, policy, stage)
            return self.store.found[key], False
        t0 = time.perf_counter()
        rec = measure_config(self.backend, self.spec, size, config, policy, stage == "target", self.isolate)
        self._stored(key, config, size, stage, rec, time.perf_counter() - t0)
        return self.store.found[key], False

    def _run_many(self, configs: list[dict[str, Any]], size: int, policy: TimingPolicy, stage: str) -> None:
        """Configurations not stored measured through the runner, each on a free device of the kind, stored as
        each comes back."""
        todo = {self._key(c, stage, size): c for c in configs if self._key(c, stage, size) not in self.store.found}
        tasks = [Task(key, tune_task, (self.spec, size, config, policy, stage == "target"), kind=self.kind,
                      label=f"{config_key(config)} at {size}") for key, config in todo.items()]
        def failed(failure) -> None:  # its worker died each try (a crashing configuration): stored as failed
            self._stored(failure.task.key, todo[failure.task.key], size, stage,
                         failed_record(self.spec, size, failure.error), 0.0)

        self.runner.run(tasks, lambda task, outcome: self._stored(task.key, todo[task.key], size, stage,
                                                                  {**outcome.value, "tune_device": outcome.slot.name},
                                                                  outcome.seconds), failed)

    def measure_many(self, configs: list[dict[str, Any]]) -> list[Result]:
        """Each configuration at the target size: on a cluster all at once over its devices, else one by one."""
        if self.runner is not None:
            self._run_many([c for c in configs if config_key(c) not in self.results or
                            self.results[config_key(c)].status not in ("ok", "failed")], self.size, self.policy,
                           "target")
        return [self.measure(c) for c in configs]

    def _stored(self, key: str, config: dict[str, Any], size: int, stage: str, rec: dict, spent: float) -> None:
        if stage == "target":
            self.measure_s += spent
        else:
            self.rank_s += spent
        rec.update(tune_config=dict(config), tune_stage=stage, tune_matrix=self.matrix, tune_seconds=spent)
        self.store.put(key, rec)
        self._new.add(key)

    def measure(self, config: dict[str, Any]) -> Result:
        """The configuration at the target size (stored result reused)."""
        key = config_key(config)
        if key in self.results and self.results[key].status in ("ok", "failed"):
            return self.results[key]
        rec, reused = self._run(config, self.size, self.policy, "target")
        previous = self.results.get(key)
        ok = rec.get("tune_status") == "ok"
        result = Result(config, "ok" if ok else "failed", "" if ok else rec.get("reason", ""), rec,
                        previous.rank_record if previous else None, reused)
        self.results[key] = result
        shown = (f"p10 {result.seconds * 1e3:.4g} ms" if ok else
                 f"failed ({result.stage}): {' '.join(result.reason.split())[:120]}")
        self.say(f"{key}: {shown}{' (stored)' if reused else ''}")
        return result

    def configured(self, config: dict[str, Any]) -> KernelSpec:
        """The spec with the configuration's values as its parameters' defaults (what a predictor reads)."""
        return replace(self.spec, params={**self.spec.params, **{k: str(v) for k, v in config.items()}})

    def static_rank(self, config: dict[str, Any]) -> dict:
        """The static predictor's figure for the configuration at the target size, stored like a measurement."""
        key = self._key(config, f"rank:{self.ranker}", self.size)
        got = self.store.get(key)
        if got is not None:
            return got
        t0 = time.perf_counter()
        try:
            predictor = registry.create(self.ranker).fit(self.configured(config), self.profile)
            [p] = predictor.predict([self.size])
            rec = {"kind": "tune", "kernel": self.spec.name, "size": int(self.size), "tune_status": "ok",
                   "model_s": float(p.seconds), "predicted_interval_s": [float(p.low), float(p.high)]}
        except (GpuProfilerError, NotApplicable, ValueError) as exc:
            rec = {"kind": "tune", "kernel": self.spec.name, "size": int(self.size), "tune_status": "failed",
                   "reason": str(exc)[:500], "error": type(exc).__name__}
        self.rank_s += time.perf_counter() - t0
        rec.update(tune_config=dict(config), tune_stage=f"rank:{self.ranker}", tune_matrix=self.matrix,
                   ranked_by=self.ranker, tune_seconds=time.perf_counter() - t0)
        return self.store.put(key, rec)

    def rank(self, config: dict[str, Any]) -> float:
        """The configuration's ranking figure: the static predictor's time at the target, or the modelling figure
        at the ranking size (NaN where it fails)."""
        key = config_key(config)
        if self.ranker != "sweep":
            rec = self.static_rank(config)
        else:
            rec, _ = self._run(config, self.rank_size, self.rank_policy, "rank")
        result = self.results.setdefault(key, Result(config, "pending"))
        result.rank_record = rec
        return float(rec["model_s"]) if rec.get("tune_status") == "ok" else math.nan

    def table(self) -> list[dict[str, Any]]:
        """Every configuration of the space: measured ones fastest first, then failed, pending, restricted."""
        order = {"ok": 0, "failed": 1, "pending": 2, "invalid": 3, "restricted": 4}
        rows = [r.row() for r in self.results.values()]
        for config in self.candidates:
            if config_key(config) not in self.results:
                rows.append(Result(config, "pending", "not measured").row())
        return sorted(rows, key=lambda r: (order.get(r["status"], 9), r["seconds"] if r["status"] == "ok" else 0))

    def failures(self, device: str = "") -> list[ItemFailure]:
        """The configurations that failed at the target size, with the stage and the reason."""
        return [ItemFailure(r.key, r.stage, r.reason, (r.record or {}).get("tune_device") or device)
                for r in self.results.values() if r.status == "failed"]

    def best(self) -> Result | None:
        ok = [r for r in self.results.values() if r.status == "ok"]
        return min(ok, key=lambda r: r.seconds) if ok else None
