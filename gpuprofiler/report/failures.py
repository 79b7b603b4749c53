"""The items of a run that failed while the rest went on: ``failed.csv``, the terminal table and report.md's section.

Every command that goes on past a failing item (validate, tune, a fleet's measure and calibrate) lists each failed
item the same way: the item, the device, the stage (bounds, compile, check, device crash, timeout) and the reason.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from gpuprofiler.errors import ItemFailure

COLUMNS = ("item", "device", "stage", "reason")
FILE = "failed.csv"


def short(reason: str, width: int = 160) -> str:
    """The reason on one line (a compiler's log folded), cut to ``width`` characters."""
    text = " ".join(reason.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def write(path: Path, failures: Sequence[ItemFailure]) -> Path | None:
    """``path`` (a failed.csv) listing ``failures``, reasons in full; with none, a stale file of an earlier run
    removed (None)."""
    path = Path(path)
    if not failures:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        w.writeheader()
        for f in failures:
            w.writerow(f.row())
    return path


def table(failures: Sequence[ItemFailure], what: str = "item") -> list[str]:
    """The terminal table: one line per failed item (the reason on one line, shortened)."""
    if not failures:
        return []
    head = (what, "device", "stage", "reason")
    rows = [(f.item, f.device or "-", f.stage, short(f.reason)) for f in failures]
    widths = [max(len(r[k]) for r in (head, *rows)) for k in range(3)]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in (head, *rows)]


def markdown(failures: Sequence[ItemFailure], what: str = "item") -> list[str]:
    """report.md's section on the failed items (nothing where none failed)."""
    if not failures:
        return []
    lines = ["", "## Failed items", "",
             f"{len(failures)} {what}(s) failed and were left out of the predictions (the others were measured and "
             f"predicted); the full reasons are in {FILE}. A rerun tries them again.", "",
             f"| {what} | device | stage | reason |", "|---|---|---|---|"]
    lines += [f"| {f.item} | {f.device or '-'} | {f.stage} | {short(f.reason, 300).replace('|', '/')} |"
              for f in failures]
    return lines
