"""Plots of sweeps and predictions (matplotlib, written to PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler.measure.stats import model_value
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


def plot_repeats(records: list[dict], path: str | Path) -> Path | None:
    """PNG of ``measure --repeat`` blocks: per kernel and size, every sample of every block (log time) with the
    block's 10th percentile (the modelling figure) and median, so one sees which figure holds still."""
    from gpuprofiler.measure.records import repeat_table

    rows = [r for r in repeat_table(records) if r["blocks"] > 1]
    if not rows:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(len(rows), 1, figsize=(8, 2.6 * len(rows) + 0.6), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        recs = sorted((r for r in records if "repeat_block" in r and (r["kernel"], r["phase"], int(r["size"]))
                       == (row["kernel"], row["phase"], row["size"])), key=lambda r: r["repeat_block"])
        for i, r in enumerate(recs):
            t = np.asarray(r.get("samples_s") or [], float) * 1e3
            ax.scatter(np.full(len(t), i) + np.random.default_rng(i).uniform(-0.3, 0.3, len(t)), t, s=4,
                       color="0.6", alpha=0.5, label="samples" if i == 0 else None)
        x = np.arange(len(recs))
        ax.plot(x, np.asarray(row["median_s"]) * 1e3, "s-", color="tab:red",
                label=f"median (spread {row['median_spread']:.2f}x)")
        ax.plot(x, np.asarray(row["model_s"]) * 1e3, "o-", color="tab:blue",
                label=f"10th percentile (spread {row['model_spread']:.2f}x)")
        ax.set_yscale("log")
        ax.set_xticks(x, [str(i + 1) for i in x])
        ax.set_xlabel("block")
        ax.set_ylabel("device time (ms)")
        ax.set_title(f"{row['kernel']} {row['phase']} size {row['size']}: {row['blocks']} independent blocks",
                     fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    return save_figure(fig, path)


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
        med = [model_value(v) for v in sweep.phases[p]]
        ax.plot(sizes, med, "o", color=c, ms=4, label=f"{p} (measured)")
        model = ex.fits[p].model
        # a law whose every point is an analysis (the cache-miss law) is drawn through the sizes it was evaluated at
        pts = np.unique(np.concatenate([used, [r["size"] for r in records]])) if getattr(model, "costly", False) \
            else grid
        ax.plot(pts, [model.predict_value(g) for g in pts], "-", color=c, lw=1, label=f"{p}: {model.name}")
    tot = list(sweep.figures())
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


def plot_miss_ratio(analysis: Any, path: str | Path, title: str = "") -> Path:
    """Miss ratio against cache size (LRU, from the sampled reuse distances) for a unit's own stream and for the
    units' interleaved stream, with the device's cache levels marked."""
    from gpuprofiler.models.cache.statcache import miss_ratio_curve

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    line = analysis.order.line_bytes
    top = max([lv.lines for lv in analysis.levels] + [1 << 16]) * 8
    for label, dist, cold in (("one unit's stream (private levels)", analysis.private_distances,
                               analysis.private_cold),
                              ("all units interleaved (shared levels)", analysis.shared_distances,
                               analysis.shared_cold)):
        if len(dist):
            sizes, ratios = miss_ratio_curve(dist, top, cold=cold)
            ax.plot(sizes * line, ratios, "-", lw=1.5, label=label)
    for lv in analysis.levels:
        ax.axvline(lv.size_bytes, color="grey", ls="--", lw=0.8)
        ax.plot([lv.size_bytes], [lv.miss_ratio], "o", color="black", ms=4)  # with the level's sets
        ax.text(lv.size_bytes, 0.98, f" {lv.name}: {lv.miss_ratio:.2f}", fontsize=7, ha="left", va="top",
                transform=ax.get_xaxis_transform(), bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_xscale("log")
    ax.set_ylim(0, 1.12)
    ax.set_xlabel("cache size (bytes)")
    ax.set_ylabel("miss ratio (LRU; dots: each level with its sets)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(title or "miss-ratio curve", fontsize=10)
    return save_figure(fig, path)


def plot_tune(rows: list[dict], names: list[str], path: str | Path, title: str = "",
              values: dict[str, list] | None = None) -> Path:
    """PNG of a tuning space: with two parameters a grid (colour: the modelling figure; x: failed; blank:
    restricted or not measured; the axes in the order of ``values``, the space's own); otherwise every measured
    configuration's figure with its interval, fastest first."""
    plt = pyplot()
    ok = [r for r in rows if r["status"] == "ok"]
    if len(names) == 2:
        xs = list((values or {}).get(names[0]) or dict.fromkeys(r[names[0]] for r in rows))
        ys = list((values or {}).get(names[1]) or dict.fromkeys(r[names[1]] for r in rows))
        grid = np.full((len(ys), len(xs)), np.nan)
        for r in ok:
            grid[ys.index(r[names[1]]), xs.index(r[names[0]])] = r["seconds"] * 1e3
        fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(xs), 1.2 + 0.6 * len(ys)))
        im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
        fig.colorbar(im, ax=ax, label="10th percentile (ms)")
        for r in rows:
            x, y = xs.index(r[names[0]]), ys.index(r[names[1]])
            if r["status"] == "ok":
                ax.text(x, y, f"{r['seconds'] * 1e3:.3g}", ha="center", va="center", fontsize=7, color="white")
            elif r["status"] == "failed":
                ax.text(x, y, "x", ha="center", va="center", color="red")
        best = min(ok, key=lambda r: r["seconds"]) if ok else None
        if best:
            ax.add_patch(plt.Rectangle((xs.index(best[names[0]]) - 0.5, ys.index(best[names[1]]) - 0.5), 1, 1,
                                       fill=False, edgecolor="red", linewidth=2))
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    else:
        ok = sorted(ok, key=lambda r: r["seconds"])
        fig, ax = plt.subplots(figsize=(7, 1.5 + 0.22 * len(ok)))
        y = np.arange(len(ok))
        t = np.array([r["seconds"] for r in ok]) * 1e3
        lo = np.array([r["ci_low_s"] for r in ok]) * 1e3
        hi = np.array([r["ci_high_s"] for r in ok]) * 1e3
        ax.errorbar(t, y, xerr=[np.maximum(t - lo, 0), np.maximum(hi - t, 0)], fmt="o", ms=3)
        ax.set_yticks(y, [r["config"] for r in ok], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("10th percentile (ms), 95% interval")
    ax.set_title(title, fontsize=9)
    return save_figure(fig, path)
