"""The table at the end of a pytest run: every measurement, its figure and interval, baseline, change, verdict; then
the kernels that failed (stage and reason)."""

from __future__ import annotations

from gpuprofiler.report import failures as report


def _ms(value) -> str:
    return "-" if value is None else f"{value * 1e3:.4g}"


def lines(session) -> list[str]:
    """The summary table of ``session`` (a :class:`~gpuprofiler.testing.session.GpuSession`), then its notes."""
    head = ("kernel", "size", "device", "p10 ms", "interval ms", "baseline ms", "change", "predicted ms", "verdict")
    rows = []
    for r in session.results:
        c = r.comparison
        change = "-" if c is None or c.ratio != c.ratio else f"{c.change:+.1%}"
        predicted = "-" if r.predicted_s is None else f"{_ms(r.predicted_s)} ({r.model})"
        rows.append((r.kernel, "-" if r.size is None else str(r.size), r.device_id, _ms(r.figure_s),
                     f"{_ms(r.low_s)} .. {_ms(r.high_s)}", _ms(r.baseline_s), change, predicted, r.verdict))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    out = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip() for row in (head, *rows)] if rows else []
    alpha = session.options.alpha
    if session.options.compare is not None:
        fail = session.options.compare_fail
        out.append(f"baseline: {session.baseline_source or 'none found'}; p10 = the 10th percentile of the device "
                   f"times; change bounds by bootstrap at {1 - alpha:.0%} one-sided"
                   + (f"; regressed = slower than +{fail:.0%} with that confidence" if fail is not None else
                      "; no --gpu-compare-fail: reported, never failed"))
    failed = [f for _, f, _ in getattr(session, "failures", [])]
    if failed:
        out += ["", f"{len(failed)} kernel(s) failed (each failed its own test):", *report.table(failed, "kernel")]
    out += list(getattr(session, "notes_at_end", []))
    return out
