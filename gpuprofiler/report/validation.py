"""The validation report files: predictions.csv, summary.csv, plots and report.md."""

from __future__ import annotations

import csv
import datetime as _dt
import math
import platform
from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler import __version__
from gpuprofiler.report.failures import markdown as failure_lines
from gpuprofiler.report.plots import plot_extrapolation, pyplot, save_figure

PREDICTION_COLUMNS = ("kernel", "size", "model", "predicted_s", "measured_s", "measured_median_s", "measured_spread",
                      "measured_visit_spread", "rel_error",
                      "interval_low_s", "interval_high_s", "model_interval_low_s", "model_interval_high_s",
                      "calibrated_low_s", "calibrated_high_s", "evidence_size", "evidence_log_error",
                      "loko_corrected_s", "loko_rel_error", "family", "crossing", "device_kind", "device_name", "detail")
BASELINE_COLUMNS = ("kernel", "size", "model", "law", "predicted_s", "measured_s", "rel_error", "interval_low_s",
                    "interval_high_s")
BASELINE_SUMMARY_COLUMNS = ("law", "cases", "mape", "median_abs_error", "max_abs_error", "inside_interval",
                            "median_interval_width")
SUMMARY_COLUMNS = ("model", "cases", "mape", "median_abs_error", "max_abs_error", "inside_interval",
                   "cases_with_interval", "median_interval_width", "inside_calibrated", "median_calibrated_width",
                   "loko_corrected_mape", "loko_corrected_median_abs_error", "loko_corrected_max_abs_error")


def write_csv(path: Path, rows: list[dict], columns) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if isinstance(r.get(k), float) and math.isnan(r[k]) else r.get(k, ""))
                        for k in columns})
    return path


def plot_scatter(rows: list[dict], path: Path) -> Path:
    """Predicted against measured, log-log, with the y = x line; one colour per model."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 6))
    models = list(dict.fromkeys(r["model"] for r in rows))
    for m in models:
        xs = [r["measured_s"] for r in rows if r["model"] == m]
        ys = [r["predicted_s"] for r in rows if r["model"] == m]
        ax.plot(xs, ys, "o", ms=5, label=m)
    vals = [v for r in rows for v in (r["measured_s"], r["predicted_s"]) if v > 0]
    lo, hi = min(vals) / 2, max(vals) * 2
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (s)")
    ax.set_ylabel("predicted (s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("predicted against measured", fontsize=10)
    return save_figure(fig, path)


def plot_errors(rows: list[dict], path: Path) -> Path:
    """Histogram of signed relative errors per model (log-spaced bins of |error| would hide the sign)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    errs = {m: [100 * r["rel_error"] for r in rows if r["model"] == m] for m in dict.fromkeys(r["model"] for r in rows)}
    allv = np.clip([v for vs in errs.values() for v in vs], -200, 200)
    bins = np.linspace(min(-50, allv.min()), max(50, allv.max()), 25)
    ax.hist([np.clip(v, -200, 200) for v in errs.values()], bins=bins, label=list(errs), alpha=0.8)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("relative error (%), (predicted - measured) / measured, clipped to +-200%")
    ax.set_ylabel("cases")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def largest_sizes(rows: list[dict]) -> list[str]:
    """A table of each kernel's error at its largest measured size, one column per model."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    top: dict[str, dict[str, dict]] = {}
    for r in rows:
        cur = top.setdefault(r["kernel"], {}).get(r["model"])
        if cur is None or r["size"] > cur["size"]:
            top[r["kernel"]][r["model"]] = r
    if not top:
        return []
    lines = ["", "## Largest size of each kernel", "", "| kernel | size | " + " | ".join(models) + " |",
             "|---|---|" + "---|" * len(models)]
    for kernel, by_model in top.items():
        size = max(r["size"] for r in by_model.values())
        cells = [f"{100 * by_model[m]['rel_error']:+.1f}%" if m in by_model else "-" for m in models]
        lines.append(f"| {kernel} | {size} | " + " | ".join(cells) + " |")
    return lines


def baseline_lines(summary: list[dict]) -> list[str]:
    """The extrapolator's chosen law against the laws it was compared with, on the same sweeps and targets."""
    if not summary:
        return []
    lines = ["", "## The extrapolation against its baselines", "",
             "On the same small-size sweeps and the same measured targets (baselines.csv): `chosen` is the law the "
             "fractal predictor picks by leave-one-out, `fractal` the pure power law of Escobar & Boppana, "
             "`Extra-P` Extra-P's default model (where installed) fitted to the same per-size figures.", "",
             "| law | cases | MAPE | median abs error | max abs error | inside interval | interval width |",
             "|---|---|---|---|---|---|---|"]
    for b in summary:
        inside = "-" if math.isnan(b["inside_interval"]) else f"{100 * b['inside_interval']:.0f}%"
        width = "-" if math.isnan(b["median_interval_width"]) else f"{b['median_interval_width']:.3g}x"
        lines.append(f"| {b['law']} | {b['cases']} | {100 * b['mape']:.1f}% | {100 * b['median_abs_error']:.1f}% | "
                     f"{100 * b['max_abs_error']:.1f}% | {inside} | {width} |")
    return lines


def write_report(outdir: Path, results: list[Any], rows: list[dict], summary: list[dict], meta: dict,
                 failures: list[Any] | None = None) -> Path:
    """report.md with the tables and the plots embedded, and every plot it names; ``failures``: the items that
    failed (:class:`~gpuprofiler.errors.ItemFailure`), listed after the summary."""
    plots = outdir / "plots"
    plots.mkdir(exist_ok=True)
    scatter = plot_scatter(rows, plots / "predicted_vs_measured.png") if rows else None
    if rows:
        plot_errors(rows, plots / "errors.png")
    sweeps = []
    for res in results:
        for model, predictor in res.fitted.items():
            ex = getattr(predictor, "extrapolation_", None)  # predictors fitted on a sweep show it
            records = [{"size": r["size"], "predicted_s": r["predicted_s"],
                        "interval_s": [r["interval_low_s"], r["interval_high_s"]], "measured_s": r["measured_s"],
                        "error": r["rel_error"]} for r in rows if r["kernel"] == res.name and r["model"] == model]
            if ex is not None and records:
                suffix = "" if model == "fractal" else f"_{model}"
                p = plot_extrapolation(ex, records, plots / f"sweep_{res.name}{suffix}.png",
                                       title=f"{res.name}: small-size sweep, fit and target ({model})")
                sweeps.append((res.name, p))
    lines = [f"# Validation on {meta['device_name']} ({meta['device_id']})", "",
             (f"gpuprofiler {__version__}; {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
              f"host {platform.node()}; suite `{meta['suite']}`{' (quick)' if meta['quick'] else ''}; "
              f"profile `{meta['profile']}`."), "", f"Command: `{meta['command']}`", "",
             *[f"- `{name}`: {what}" for name, what in meta.get("models", {}).items()], "",
             "## Summary", "",
             "Corrected: the static prediction times a learned correction (ridge regression of the log ratio on the "
             "model's own features) fitted without the case's kernel: leave-one-kernel-out, so no kernel's "
             "corrected figure has seen that kernel (a kernel is its code: an app's copy of a builtin kernel is left "
             "out with it).", "",
             "Interval width: the median over the cases of the interval's high end over its low end (1x: a point). "
             "A static model's interval also reaches its error on the kernel at the largest small size measured "
             "below the case, where that error lies outside its calibration; calibrated alone: the interval "
             "without that (the calibration's band only).",
             "",
             "| model | cases | MAPE | median abs error | max abs error | inside interval | interval width | "
             "calibrated alone: inside, width | corrected MAPE | corrected median | corrected max |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        inside = "-" if math.isnan(s["inside_interval"]) else f"{100 * s['inside_interval']:.0f}% of {s['cases_with_interval']}"
        width = s.get("median_interval_width", math.nan)
        inside += f" | {width:.3g}x" if math.isfinite(width) else " | -"
        alone = s.get("inside_calibrated", math.nan)
        inside += (f" | {100 * alone:.0f}%, {s['median_calibrated_width']:.3g}x" if math.isfinite(alone) else " | -")
        corr = ["-"] * 3 if math.isnan(s.get("loko_corrected_mape", math.nan)) else [
            f"{100 * s[k]:.1f}%" for k in ("loko_corrected_mape", "loko_corrected_median_abs_error",
                                          "loko_corrected_max_abs_error")]
        lines.append(f"| {s['model']} | {s['cases']} | {100 * s['mape']:.1f}% | {100 * s['median_abs_error']:.1f}% | "
                     f"{100 * s['max_abs_error']:.1f}% | {inside} | {' | '.join(corr)} |")
    lines += failure_lines(failures or [])
    lines += baseline_lines(meta.get("baselines") or [])
    lines += largest_sizes(rows)
    lines += ["", "## Predictions", "",
              "rel_error = (predicted - measured) / measured; measured is the run's modelling figure (the 10th percentile "
              "of its device times: the runs no other work slowed; its median is in predictions.csv); "
              "its spread is the run's own 90th over 10th percentile, and where it was measured in visits minutes apart "
              "the largest visit's 10th percentile over the smallest's (an error inside either may be noise, not "
              "model).",
              "",
              "| kernel | size | model | predicted (s) | measured (s) | spread | error | corrected error | "
              "interval (s) | detail |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        iv = "-" if math.isnan(r["interval_low_s"]) else f"[{r['interval_low_s']:.4g}, {r['interval_high_s']:.4g}]"
        loko = r.get("loko_rel_error", math.nan)
        corr = "-" if math.isnan(loko) else f"{100 * loko:+.1f}%"
        sp = r.get("measured_spread", math.nan)
        sp_text = f"{sp:.2f}x" if isinstance(sp, float) and math.isfinite(sp) else "-"
        vs = r.get("measured_visit_spread", math.nan)
        if isinstance(vs, float) and math.isfinite(vs):
            sp_text += f" (visits {vs:.2f}x)"
        lines.append(f"| {r['kernel']} | {r['size']} | {r['model']} | {r['predicted_s']:.4g} | {r['measured_s']:.4g} | "
                     f"{sp_text} | {100 * r['rel_error']:+.1f}% | {corr} | {iv} | {r['detail']} |")
    if scatter:
        lines += ["", "## Plots", "", "![predicted against measured](plots/predicted_vs_measured.png)", "",
                  "![errors](plots/errors.png)", ""]
    for name, p in sweeps:
        lines += [f"![{name}](plots/{p.name})", ""]
    notes = [(res.name, n) for res in results for n in dict.fromkeys(res.notes)]
    lines += ["## Notes and warnings", ""] + [f"- {n}" for n in meta.get("notes", [])]
    lines += [f"- {name}: {n}" for name, n in notes]
    path = outdir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
