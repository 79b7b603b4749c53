"""Saved baselines: files a team can commit, one per name, each entry a kernel at a size on a device.

An entry is keyed by device (its slug: vendor, driver and model), kernel, size and package version, and holds
the raw device times beside the figure, so that a later run can test against the samples, not a single number.
``--gpu-save NAME`` merges the run's entries into ``DIR/NAME.json`` (other keys in the file are kept; a key saved
again keeps its last sessions, which tell the regression test how far the kernel moves between sessions).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprofiler import __version__
from gpuprofiler.errors import UserError
from gpuprofiler.measure.policy import LONGEST_S, SHORTEST_S, device_time
from gpuprofiler.textfile import read_text

FORMAT = 1
MAX_BYTES = 256 << 20
SESSIONS = 5  # sessions kept per entry
MAX_SAMPLES = 10_000  # device times per session: the regression test resamples each session this many times over


def key(device_slug: str, kernel: str, size: int | None, version: str = __version__) -> str:
    return f"{device_slug}|{kernel}|{'-' if size is None else int(size)}|{version}"


def path_for(directory: Path, name: str) -> Path:
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise UserError(f"a baseline name is a plain file name without slashes, got {name!r}")
    return Path(directory) / f"{name}.json"


def load(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of a baseline file (an absent file has none); a file that is not one, or a session whose device
    times are not a measurement (:func:`check_session`), is a UserError: a baseline the regression test cannot use
    is said, never compared as if it held too few samples."""
    path = Path(path)
    if not path.exists():
        return {}
    text = read_text(path, "baseline file", MAX_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not a gpuprofiler baseline (JSON error at line {exc.lineno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # a number too long to convert, nesting too deep to follow
        raise UserError(f"{path}: not a gpuprofiler baseline ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not (isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("entries"), dict)):
        raise UserError(f"{path}: not a gpuprofiler baseline of format {FORMAT} (save one with --gpu-save NAME)")
    entries = data["entries"]
    for k, e in entries.items():
        if not isinstance(e, dict):
            raise UserError(f"{path}: baseline entry {k!r} is not a table of fields")
        history = e.get("history", [])
        if not isinstance(history, list):
            raise UserError(f"{path}: baseline entry {k!r}: history is not a list of sessions")
        for n, one in enumerate([*history, e]):
            problem = check_session(one)
            if problem:
                which = "its last session" if n == len(history) else f"its earlier session {n + 1}"
                raise UserError(f"{path}: baseline entry {k!r}, {which}: {problem} (save the baseline again with "
                                "--gpu-save NAME)")
    return entries


def check_session(session: Any) -> str | None:
    """What makes one saved session unusable as a baseline, or None: its device times (``samples_s``) must be 1 to
    :data:`MAX_SAMPLES` numbers, each finite and between a picosecond and a day; its figure, where given, the
    same."""
    if not isinstance(session, dict):
        return "not a table of fields"
    samples = session.get("samples_s")
    if not isinstance(samples, list) or not samples:
        return "no list of device times (samples_s)"
    if len(samples) > MAX_SAMPLES:
        return f"{len(samples)} device times, more than the {MAX_SAMPLES} a session holds"
    for x in [*samples, *([session["figure_s"]] if session.get("figure_s") is not None else [])]:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return f"a device time {str(x)[:40]!r} is not a number"
        if not device_time(x):
            return f"a device time of {repr(x)[:40]} s is no measurement (outside {SHORTEST_S:g} .. {LONGEST_S:g} s)"
    return None


def _session(e: dict[str, Any]) -> dict[str, Any]:
    return {k: e.get(k) for k in ("figure_s", "samples_s", "date", "host", "test", "version")}


def sessions(e: dict[str, Any]) -> list[list[float]]:
    """The raw times of every session an entry holds, oldest first (its ``history`` and itself)."""
    return [h["samples_s"] for h in e.get("history", []) or []] + [e["samples_s"]]


def save(path: Path, entries: dict[str, dict[str, Any]]) -> int:
    """Merge ``entries`` into the file at ``path`` (written whole to a temporary file, then renamed over it);
    returns how many entries the file holds. A key saved before keeps its earlier sessions in ``history`` (the
    last ``SESSIONS`` in all): what moves the kernel between sessions, which the regression test then allows."""
    path = Path(path)
    old = load(path)
    for k, e in entries.items():
        if k in old:
            e["history"] = ([*(old[k].get("history") or []), _session(old[k])])[-(SESSIONS - 1):]
    merged = {**old, **entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".json.tmp{os.getpid()}")
    tmp.write_text(json.dumps({"format": FORMAT, "entries": dict(sorted(merged.items()))}, indent=1) + "\n")
    tmp.replace(path)
    return len(merged)


def entry(device: Any, kernel: str, size: int | None, samples: list[float], figure: float, statistic: str,
          test: str) -> dict[str, Any]:
    """One baseline entry, with its provenance."""
    return {"device_id": device.id, "device_name": device.name, "device_slug": device.slug, "kernel": kernel,
            "size": size, "version": __version__, "statistic": statistic, "figure_s": figure,
            "samples_s": [float(x) for x in samples], "test": test, "host": platform.node(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


@dataclass
class Found:
    """The baseline entry for a measurement, or None with the reason (shown when the comparison is skipped)."""

    entry: dict[str, Any] | None
    note: str = ""


def find(entries: dict[str, dict[str, Any]], device_slug: str, kernel: str, size: int | None,
         source: str) -> Found:
    """The entry of this kernel and size on this device: this package version's, else another version's (said so);
    none saved on this device, but on others, is said too: a baseline of another device is never compared."""
    exact = entries.get(key(device_slug, kernel, size))
    if exact is not None:
        return Found(exact)
    same = [e for e in entries.values() if e.get("kernel") == kernel and e.get("size") == size]
    here = [e for e in same if e.get("device_slug") == device_slug]
    if here:
        e = max(here, key=lambda e: str(e.get("date", "")))
        return Found(e, f"baseline saved with gpuprofiler {e.get('version')}, this is {__version__}")
    if same:
        others = sorted({str(e.get("device_name") or e.get("device_slug")) for e in same})
        return Found(None, f"{source} has {kernel} at size {size} only for another device ({', '.join(others)}); "
                           f"save one on this device with --gpu-save")
    return Found(None, f"{source} has no entry for {kernel} at size {size}: save one with --gpu-save")


def latest(directory: Path) -> Path | None:
    """The most recently written baseline file in ``directory`` (for ``--gpu-compare`` without a name)."""
    files = sorted(Path(directory).glob("*.json"), key=lambda p: p.stat().st_mtime) if Path(directory).is_dir() else []
    return files[-1] if files else None
