"""Plots of sweeps and predictions (matplotlib, written to PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler.profile.hardware import view


def pyplot():
    """matplotlib's pyplot on the file backend (imported when a plot is drawn: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def plot_latency(profile: Any, path: str | Path) -> Path | None:
    """PNG of access latency against working-set size, with the detected cache levels."""
    hw = view(profile)
    curve = hw.latency_curve
    if not curve:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = [b for b, _ in curve]
    ys = [s * 1e9 for _, s in curve]
    ax.plot(xs, ys, "o-", ms=3, label="pointer chase")
    for c in hw.caches:
        ax.axvline(c.size_bytes, color="grey", ls="--", lw=0.8)
        ax.text(c.size_bytes, max(ys), f" L{c.level} {c.size_bytes / 1024:.0f} KiB", rotation=90, va="top", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("working set (bytes)")
    ax.set_ylabel("latency per access (ns)")
    ax.set_title(f"{hw.name}: memory latency ({str(profile.data.get('created', ''))[:10]})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def plot_extrapolation(ex: Any, records: list[dict], path: str | Path, title: str = "") -> Path:
    """Log-log: measured small-size points per major phase and in total, the fitted lines out to the targets,
    each target's prediction with its interval, and the measured target where checked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    sweep = ex.sweep
    sizes = np.asarray(sweep.sizes, float)
    used = np.asarray([sweep.sizes[i] for i in ex.used], float)
    tmax = max(r["size"] for r in records)
    grid = np.geomspace(used.min(), tmax, 60)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, p in enumerate(ex.phases):
        c = colors[k % len(colors)]
        med = [float(np.median(v)) for v in sweep.phases[p]]
        ax.plot(sizes, med, "o", color=c, ms=4, label=f"{p} (measured)")
        model = ex.fits[p].model
        ax.plot(grid, [model.predict_value(g) for g in grid], "-", color=c, lw=1,
                label=f"{p}: {model.name}")
    tot = [float(np.median(v)) for v in sweep.totals]
    if len(ex.phases) > 1 or ex.rest:
        ax.plot(sizes, tot, "s", color="black", ms=4, label="whole run (measured)")
    for r in records:
        lo, hi = r["interval_s"]
        ax.errorbar([r["size"]], [r["predicted_s"]], yerr=[[r["predicted_s"] - lo], [hi - r["predicted_s"]]],
                    fmt="D", color="tab:red", capsize=4, label="prediction (95% interval)")
        if "measured_s" in r:
            ax.plot([r["size"]], [r["measured_s"]], "*", color="black", ms=12,
                    label=f"measured ({r['error'] * 100:+.1f}%)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("size")
    ax.set_ylabel("device time per run (s)")
    ax.set_title(title or f"{sweep.name}: fractal extrapolation", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, l in zip(handles, labels):
        seen.setdefault(l, h)
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="upper left")
    return save_figure(fig, path)
