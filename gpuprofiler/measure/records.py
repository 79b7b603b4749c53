"""The one shape of a measurement record: what was measured, its summary figures, and every raw sample.

``measure``, sweeps, apps and ``validate`` all store and print these records (see the README for the
keys); :mod:`gpuprofiler.measure.storage` adds the provenance when a record is written.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gpuprofiler.measure.engine import Timing
from gpuprofiler.measure.stats import (
    MODEL_DESCRIPTION,
    MODEL_QUANTILE,
    MODEL_STATISTIC,
    Summary,
    modes,
    spread,
    summarize,
)

KERNEL_METRIC = "device event time (kernel only); host_* = host round trip enqueue+finish"
PHASE_METRIC = "device event time summed per run; share = of the run's device time"


def figures(s: Summary) -> dict[str, Any]:
    """The summary figures of a record's samples (device time): the modelling figure (``model_s``, the statistic
    named by ``model_statistic``) with its interval, then the median with its interval and the other figures."""
    return {"model_s": s.model, "model_ci_low_s": s.model_ci_low, "model_ci_high_s": s.model_ci_high,
            "model_ci_coverage": s.model_ci_coverage, "model_statistic": MODEL_STATISTIC,
            "model_statistic_means": MODEL_DESCRIPTION,
            "median_s": s.median, "ci_low_s": s.ci_low, "ci_high_s": s.ci_high, "ci_coverage": s.ci_coverage,
            "min_s": s.minimum, "iqr_s": s.iqr, "cv": s.cv, "samples": s.n}


def host_figures(timing: Timing) -> dict[str, Any]:
    """The host round-trip figures and raw lists of a timing, beside its device figures."""
    h = timing.host
    return {"host_median_s": h.median, "host_min_s": h.minimum, "stop_reason": timing.stop_reason,
            "host_samples_s": list(timing.host_s), "warmup_s": list(timing.warmup_s),
            "contention": timing.contention}


def record(kind: str, kernel: str, phase: str, size: int, samples: Sequence[float], metric: str, spec: str,
           confidence: float = 0.95, **fields: Any) -> dict[str, Any]:
    """A record of one (kernel or app, phase, size): identity, figures of ``samples`` (with their modes, fastest
    first, and their p90/p10 spread: a mix of fast and slowed runs shows as several modes), ``fields``, then the
    raw samples, the metric's name and the spec or app file."""
    return {"kind": kind, "kernel": kernel, "phase": phase, "size": int(size),
            **figures(summarize(samples, confidence)), "modes": modes(samples), "spread": spread(samples), **fields,
            "samples_s": [float(x) for x in samples], "metric": metric, "spec": spec}


def repeat_table(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run-to-run reproducibility of records measured in independent blocks (``repeat_block``): per kernel, phase
    and size, the modelling figure and the median of each block, and the spread (largest over smallest) of each
    across the blocks."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in records:
        if "repeat_block" in r:
            groups.setdefault((r["kernel"], r["phase"], int(r["size"])), []).append(r)
    out = []
    for (kernel, phase, size), recs in groups.items():
        recs = sorted(recs, key=lambda r: r["repeat_block"])
        figs = [float(r["model_s"]) for r in recs]
        meds = [float(r["median_s"]) for r in recs]
        out.append({"kernel": kernel, "phase": phase, "size": size, "blocks": len(recs), "model_s": figs,
                    "median_s": meds, "model_spread": max(figs) / min(figs) if min(figs) > 0 else float("nan"),
                    "median_spread": max(meds) / min(meds) if min(meds) > 0 else float("nan")})
    return out


def pooled(visits: Sequence[Sequence[dict[str, Any]]], confidence: float = 0.95) -> list[dict[str, Any]]:
    """One size's records measured in several visits (each visit's records: one per phase) as one record per
    phase: the samples of every visit together and the figures recomputed on them, so that the modelling figure
    is the 10th percentile of all the visits' runs; ``visits`` lists each visit's date, sample count, modelling
    figure and median. An app's per-run totals (its phases' share, its run figures) are pooled alike."""
    if len(visits) == 1:
        return [dict(r) for r in visits[0]]
    phases: dict[str, list[dict[str, Any]]] = {}
    totals: list[float] = []
    for recs in visits:
        for r in recs:
            phases.setdefault(str(r["phase"]), []).append(r)
        runs = [np.asarray(r["samples_s"], float) for r in recs]
        if len({len(x) for x in runs}) == 1:
            totals += list(np.sum(runs, axis=0))
    out = []
    for recs in phases.values():
        samples = [float(x) for r in recs for x in r["samples_s"]]
        rec = dict(recs[0])
        rec.update(figures(summarize(samples, confidence)), modes=modes(samples), spread=spread(samples),
                   samples_s=samples, warmup_s=[float(x) for r in recs for x in r.get("warmup_s") or []],
                   checked=any(bool(r.get("checked")) for r in recs), placements=sum(int(r.get("placements") or 1)
                                                                                   for r in recs),
                   stop_reason=",".join(dict.fromkeys(str(r.get("stop_reason", "")) for r in recs)),
                   contended=any(bool(r.get("contended")) for r in recs),
                   contention=max((r["contention"] for r in recs if isinstance(r.get("contention"), dict)),
                                  key=lambda c: c.get("share", 0.0), default=None),
                   visits=[{"date": r.get("date"), "samples": len(r["samples_s"]), "model_s": r.get("model_s"),
                            "median_s": r.get("median_s")} for r in recs])
        if all("host_samples_s" in r for r in recs):
            host = [float(x) for r in recs for x in r["host_samples_s"]]
            rec.update(host_samples_s=host, host_median_s=float(np.median(host)), host_min_s=float(np.min(host)))
        for key, count in (("gflops", "flops"), ("gbps", "bytes")):
            if rec.get(key) is not None and rec.get(count) and rec["model_s"] > 0:
                rec[key] = rec[count] / rec["model_s"] / 1e9
        if rec.get("kind") == "app" and len(totals) == len(samples) and totals:
            t = np.asarray(totals)
            rec.update(share=float(np.median(np.asarray(samples) / t)), run_median_s=float(np.median(t)),
                       run_model_s=float(np.quantile(t, MODEL_QUANTILE)))
        out.append(rec)
    return out
