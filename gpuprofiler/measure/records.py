"""The one shape of a measurement record: what was measured, its summary figures, and every raw sample.

``measure``, sweeps, apps and ``validate`` all store and print these records (see the README for the
keys); :mod:`gpuprofiler.measure.storage` adds the provenance when a record is written.
"""

from __future__ import annotations

from typing import Any, Sequence

from gpuprofiler.measure.engine import Timing
from gpuprofiler.measure.stats import Summary, modes, spread, summarize

KERNEL_METRIC = "device event time (kernel only); host_* = host round trip enqueue+finish"
PHASE_METRIC = "device event time summed per run; share = of the run's device time"


def figures(s: Summary) -> dict[str, Any]:
    """The summary figures of a record's samples (device time)."""
    return {"median_s": s.median, "ci_low_s": s.ci_low, "ci_high_s": s.ci_high, "ci_coverage": s.ci_coverage,
            "min_s": s.minimum, "iqr_s": s.iqr, "cv": s.cv, "samples": s.n}


def host_figures(timing: Timing) -> dict[str, Any]:
    """The host round-trip figures and raw lists of a timing, beside its device figures."""
    h = timing.host
    return {"host_median_s": h.median, "host_min_s": h.minimum, "stop_reason": timing.stop_reason,
            "host_samples_s": list(timing.host_s), "warmup_s": list(timing.warmup_s)}


def record(kind: str, kernel: str, phase: str, size: int, samples: Sequence[float], metric: str, spec: str,
           confidence: float = 0.95, **fields: Any) -> dict[str, Any]:
    """A record of one (kernel or app, phase, size): identity, figures of ``samples`` (with their modes, fastest
    first, and their p90/p10 spread: a mix of fast and slowed runs shows as several modes), ``fields``, then the
    raw samples, the metric's name and the spec or app file."""
    return {"kind": kind, "kernel": kernel, "phase": phase, "size": int(size),
            **figures(summarize(samples, confidence)), "modes": modes(samples), "spread": spread(samples), **fields,
            "samples_s": [float(x) for x in samples], "metric": metric, "spec": spec}
