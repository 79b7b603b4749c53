"""Where measurements go: one JSON line per record, appended and flushed as soon as it is finished.

Default file: ``results/<device-slug>/measurements.jsonl`` under the current
directory (or ``$GPUPROFILER_RESULTS``). Every line carries the device, the
package version, the date, the host and the command, so it stands alone.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any, Iterable

from gpuprofiler import __version__
from gpuprofiler.device.base import DeviceInfo


def results_root() -> Path:
    return Path(os.environ.get("GPUPROFILER_RESULTS", "results"))


def default_path(device: DeviceInfo, name: str = "measurements.jsonl") -> Path:
    return results_root() / device.slug / name


def provenance(device: DeviceInfo) -> dict[str, Any]:
    """Who measured what, where and when."""
    return {
        "device": device.to_dict(),
        "version": __version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "command": command_line(),
    }


def command_line() -> str:
    """The command that is running: ``gpuprofiler ARGS`` for the CLI, else the script and its arguments."""
    prog = sys.argv[0] if sys.argv else ""
    name = "gpuprofiler" if prog.endswith(("gpuprofiler", "__main__.py")) or not prog else f"python {prog}"
    return " ".join([name, *(shlex.quote(a) for a in sys.argv[1:])])


def json_ready(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MeasurementLog:
    """Append-only JSON-lines file; each record is written and fsynced before the next one starts."""

    def __init__(self, path: Path, device: DeviceInfo):
        self.path = Path(path)
        self.meta = provenance(device)
        self.written = 0

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")  # when this record was finished
        line = json.dumps(json_ready({**record, **self.meta, "date": stamp}), sort_keys=False)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.written += 1


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete record of a log (a torn last line from a crash is skipped)."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                records.append(json.loads(line))
            except (json.JSONDecodeError, RecursionError):
                continue
    return records


def to_frame(records: Iterable[dict[str, Any]]):
    """Tidy table, one row per sample: kernel, phase, size, rep, seconds, device (pandas imported on use)."""
    import pandas as pd

    rows = [
        {"kernel": r["kernel"], "phase": r["phase"], "size": r["size"], "rep": i, "seconds": s,
         "device": (r.get("device") or {}).get("id", "")}
        for r in records for i, s in enumerate(r.get("samples_s", []))
    ]
    return pd.DataFrame(rows, columns=["kernel", "phase", "size", "rep", "seconds", "device"])
