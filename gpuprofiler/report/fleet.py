"""A fleet's comparison for people: the table of each kind's figures with the outliers named, and a plot of every
device's deviation from its kind's median, figure by figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuprofiler.report.plots import pyplot, save_figure


def _value(key: str, v: float) -> str:
    if key.endswith("Bps"):
        return f"{v / 1e9:.4g} GB/s"
    if key.endswith("hz"):
        return f"{v / 1e6:.4g} MHz"
    if key.endswith("ops_per_s"):
        return f"{v / 1e9:.4g} Gop/s"
    if key.endswith("_s"):
        for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if v >= scale:
                return f"{v / scale:.4g} {unit}"
        return f"{v * 1e12:.4g} ps"
    return f"{v:.4g}"


def text(table: list[dict[str, Any]], flagged: dict[str, list[dict[str, Any]]], devices: int) -> str:
    """The per-kind table, then one line per outlier device with its worst figures."""
    lines = [f"{'kind':<34} {'figure':<38} {'devices':>7} {'median':>14} {'spread':>7} {'worst':>8}  outliers"]
    for r in table:
        lines.append(f"{r['kind'][:34]:<34} {r['figure']:<38} {r['devices']:>7} {_value(r['figure'], r['median']):>14} "
                     f"{100 * r['spread']:>6.2f}% {100 * r['worst_deviation']:>+7.2f}%  {len(r['outliers']) or '-'}")
    lines.append("")
    if not flagged:
        lines.append(f"no outlier among {devices} device(s)")
    for device, rows in flagged.items():
        worst = ", ".join(f"{r['figure']} {100 * r['deviation']:+.1f}% ({'slower' if r['slower'] else 'faster'}, "
                          f"{r['score']:.0f} spreads)" for r in rows[:4])
        lines.append(f"OUTLIER {device} ({rows[0]['kind']}): {worst}" + (f" and {len(rows) - 4} more" if len(rows) > 4
                                                                           else ""))
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Each figure a row of points, one per device: its deviation from its kind's median (outliers in red)."""
    plt = pyplot()
    keys = sorted({(r["kind"], r["figure"]) for r in rows})
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.32 * len(keys) + 1.2)))
    for y, (kind, key) in enumerate(keys):
        mine = [r for r in rows if (r["kind"], r["figure"]) == (kind, key)]
        ok = [100 * r["deviation"] for r in mine if not r["outlier"]]
        bad = [r for r in mine if r["outlier"]]
        ax.scatter(ok, [y] * len(ok), s=9, color="tab:blue", alpha=0.5, lw=0)
        ax.scatter([100 * r["deviation"] for r in bad], [y] * len(bad), s=30, color="tab:red", zorder=3)
        for r in bad:
            ax.annotate(Path(r["device"]).name, (100 * r["deviation"], y), fontsize=6, color="tab:red",
                        xytext=(3, 3), textcoords="offset points")
    kinds = len({k for k, _ in keys})
    ax.set_yticks(range(len(keys)), [f"{k[:18]}: {f}" if kinds > 1 else f for k, f in keys], fontsize=7)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("deviation from the kind's median (%)")
    ax.set_title("fleet: each device's figures against its siblings' (red: outlier)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)
