"""Gantt charts of program timelines (measured and simulated side by side, on one time axis), as PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuprofiler.report.plots import pyplot, save_figure

COLOURS = {"copy": "#4c72b0", "kernel": "#dd8452", "host": "#8c8c8c"}


def gantt(timelines: list[tuple[str, list[dict[str, Any]]]], path: str | Path, title: str = "") -> Path:
    """One panel per timeline (rows: resources; bars: operations, coloured by kind, copies blue, kernels orange,
    host grey); the panels share the time axis in milliseconds."""
    plt = pyplot()
    heights = [max(1, len({r["resource"] for r in rows})) for _, rows in timelines]
    fig, axes = plt.subplots(len(timelines), 1, sharex=True, squeeze=False,
                             figsize=(11, 1.2 + 0.45 * sum(heights) + 0.5 * len(timelines)),
                             gridspec_kw={"height_ratios": heights})
    for ax, (name, rows) in zip(axes[:, 0], timelines):
        resources = sorted({r["resource"] for r in rows}, key=lambda r: (r != "host", r))
        lane = {r: k for k, r in enumerate(resources)}
        for kind, colour in COLOURS.items():
            for r in rows:
                if (r["kind"] if r["kind"] in COLOURS else "kernel") == kind:
                    ax.broken_barh([(r["start_s"] * 1e3, max(r["end_s"] - r["start_s"], 0) * 1e3)],
                                   (lane[r["resource"]] - 0.4, 0.8), facecolors=colour, edgecolor="white",
                                   linewidth=0.3)
        for r in rows:  # label the bars wide enough to hold a name
            span = (r["end_s"] - r["start_s"]) * 1e3
            end = max((x["end_s"] for x in rows), default=0) * 1e3
            if r["kind"] != "host" and end > 0 and span > end / 12:
                ax.text((r["start_s"] * 1e3) + span / 2, lane[r["resource"]], r["name"], ha="center",
                        va="center", fontsize=7, color="white", clip_on=True)
        ax.set_yticks(range(len(resources)), resources)
        ax.set_ylim(-0.6, len(resources) - 0.4)
        ax.invert_yaxis()
        total = max((r["end_s"] for r in rows), default=0.0) * 1e3
        ax.set_title(f"{name}: {total:.1f} ms", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time since the run's start (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    axes[0, 0].legend(handles, list(COLOURS), loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=7, ncol=3,
                      frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)
