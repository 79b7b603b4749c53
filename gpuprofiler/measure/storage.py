"""Where measurements go: one JSON line per record, appended and flushed as soon as it is finished.

Default file: ``results/<device-slug>/measurements.jsonl`` under the current
directory (or ``$GPUPROFILER_RESULTS``). Every line carries the device, the
package version, the date, the host and the command, so it stands alone.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
import shlex
import stat
import sys
import uuid
from pathlib import Path
from typing import Any, Iterable

from gpuprofiler import __version__
from gpuprofiler.device.base import DeviceInfo
from gpuprofiler.errors import UserError


def results_root() -> Path:
    return Path(os.environ.get("GPUPROFILER_RESULTS", "results"))


def default_path(device: DeviceInfo, name: str = "measurements.jsonl") -> Path:
    return results_root() / device.slug / name


def writable(path: str | Path, what: str = "output file") -> Path:
    """``path`` checked as an output before any work is done: an existing regular file that opens for appending, or
    a new one in a folder that can hold it (created empty now); a directory, a device, a pipe, a name too long or a
    folder that cannot be written is a UserError naming it, so that nothing is measured into a file that cannot
    take it."""
    path = Path(path)
    try:
        if path.exists():
            if not stat.S_ISREG(path.stat().st_mode):
                raise UserError(f"{what} {path} is not a regular file (a directory, a device or a pipe): give a file "
                                "name")
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    except OSError as exc:
        raise UserError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL byte in the name
        raise UserError(f"cannot write {what} {str(path)[:200]!r}: {exc}") from None
    return path


def fallback_path(path: Path) -> Path:
    """Where records go when ``path`` stops taking them: ``results/unsaved/<name>.<time>.<pid>.jsonl``."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    return results_root() / "unsaved" / f"{Path(path).stem[:100]}.{stamp}.{os.getpid()}.jsonl"


def provenance(device: DeviceInfo | dict[str, Any], host: str | None = None) -> dict[str, Any]:
    """Who measured what, where and when: ``device`` (its info, or the dict a worker described it by) and ``host``
    (default this one: a cluster's worker measures on its own)."""
    return {
        "device": device.to_dict() if isinstance(device, DeviceInfo) else dict(device),
        "version": __version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": host or platform.node(),
        "python": platform.python_version(),
        "command": command_line(),
    }


def command_line() -> str:
    """The command that is running: ``gpuprofiler ARGS`` for the CLI, else the script and its arguments."""
    prog = sys.argv[0] if sys.argv else ""
    name = "gpuprofiler" if prog.endswith(("gpuprofiler", "__main__.py")) or not prog else f"python {prog}"
    return " ".join([name, *(shlex.quote(a) for a in sys.argv[1:])])


def json_ready(value: Any) -> Any:
    """JSON-safe: numpy scalars and arrays to Python, NaN/inf to None, integers past 64 bits to floats (None past
    the float range), anything else JSON has no type for (a complex number) to its text."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist) and getattr(value, "ndim", 0):
        return json_ready(value.tolist())
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) < 2**63:
            return value
        try:
            value = float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


class MeasurementLog:
    """Append-only JSON-lines file; each record is written and fsynced before the next one starts.

    A record is one ``write`` of one complete line, under an exclusive lock; a line torn by a crash in the middle
    of a write (the last line without its newline) is cut off before the next append, so every line of the file
    stays a whole record."""

    def __init__(self, path: Path, device: DeviceInfo | dict[str, Any]):
        self.path = Path(path)
        self.meta = provenance(device)
        self.written = 0
        self.fallback_from: Path | None = None  # the file that stopped taking the records, where one did

    def line(self, record: dict[str, Any], meta: dict[str, Any] | None = None) -> bytes:
        """The record as one JSON line, with the provenance (``meta``: another device's, measured elsewhere) and the
        time it was finished."""
        return self._lines([record], meta)

    def _lines(self, records: list[dict[str, Any]], meta: dict[str, Any] | None) -> bytes:
        stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")  # when these records were finished
        tail = json_ready({**(meta or self.meta), "date": stamp})  # made JSON-safe once for the whole write
        return b"".join((json.dumps({**json_ready({k: v for k, v in r.items() if k not in tail}), **tail})
                         + "\n").encode() for r in records)

    def append(self, record: dict[str, Any]) -> None:
        self.append_many([record])

    def check(self) -> "MeasurementLog":
        """The file checked as an output before anything is measured (:func:`writable`); returns self."""
        writable(self.path, "measurements file")
        return self

    def append_many(self, records: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> None:
        """Several records in one write: a crash keeps all of them or none (``meta``: their provenance, where
        another device measured them). Where the file stops taking them (a full disk, a file replaced), they and
        the records after them go to :func:`fallback_path`, said once on stderr: nothing measured is lost."""
        data = self._lines(records, meta)
        try:
            self._write(data, len(records))
        except OSError as exc:
            if self.fallback_from is not None:
                raise UserError(f"cannot write the measurements to {self.path} either ({exc.strerror or exc})") \
                    from None
            self.fallback_from, failed = self.path, exc
            self.path = fallback_path(self.path)
            print(f"gpuprofiler: cannot write {self.fallback_from} ({failed.strerror or failed}): the measurements "
                  f"go to {self.path}", file=sys.stderr, flush=True)
            self.append_many(records, meta)

    def _write(self, data: bytes, count: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        start = None
        try:
            _lock(fd)
            _cut_torn_tail(fd)
            start = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            # counted by what reached the file, under the lock: a Ctrl-C landing anywhere after the last byte
            # (even before the count) still counts the records it kept
            try:
                if start is not None and os.fstat(fd).st_size >= start + len(data):
                    self.written += count
            finally:
                os.close(fd)  # releases the lock


class KeyedLog:
    """A measurement log of keyed groups: each group of records (a device's measurements of one spec at one size)
    is appended whole under its key (``store_key``) and never twice, so a rerun, or a task retried after its worker
    died, skips what is stored. A group counts as stored only when all its lines are (``store_group`` and
    ``store_group_size`` on each: a write cut short by a crash leaves a group a rerun measures again). Only a 16-byte
    digest per key stays in memory, whatever the records weigh."""

    def __init__(self, path: Path, device: DeviceInfo | dict[str, Any]):
        self.log = MeasurementLog(path, device)
        self.keys: set[bytes] = set()
        self.records = 0
        if self.log.path.exists():
            seen: dict[tuple[str, str], list[int]] = {}
            with open(self.log.path, "rb") as fh:
                for line in fh:
                    if not line.endswith(b"\n"):  # a torn last line: cut before the next append
                        continue
                    try:
                        r = json.loads(line)
                        key, group, size = r.get("store_key"), r.get("store_group"), r.get("store_group_size")
                    except (json.JSONDecodeError, RecursionError, AttributeError):
                        continue
                    if isinstance(key, str) and isinstance(group, str) and isinstance(size, int):
                        got = seen.setdefault((key, group), [0, size])
                        got[0] += 1
            self.keys = {_digest(k) for (k, _), (n, size) in seen.items() if n == size}
        self.stored = len(self.keys)

    def __contains__(self, key: str) -> bool:
        return _digest(key) in self.keys

    def put(self, key: str, records: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> bool:
        """Append ``records`` under ``key`` in one write (with ``meta``, the provenance of the device and host that
        measured them); False, and nothing written, where the key is stored already."""
        return bool(self.put_many([(key, records)], meta))

    def put_many(self, groups: list[tuple[str, list[dict[str, Any]]]], meta: dict[str, Any] | None = None) -> int:
        """Several groups (a task's sizes) in one write and one fsync, those stored already (and empty ones) left
        out; how many were written."""
        new, digests = [], set()
        for key, recs in groups:
            d = _digest(key)
            if recs and d not in self.keys and d not in digests:
                digests.add(d)
                new.append((key, recs))
        if not new:
            return 0
        lines = []
        for key, recs in new:
            group = uuid.uuid4().hex[:16]
            lines += [{**r, "store_key": key, "store_group": group, "store_group_size": len(recs)} for r in recs]
        self.log.append_many(lines, meta)
        self.keys |= digests
        self.records += len(lines)
        return len(new)


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def _cut_torn_tail(fd: int) -> None:
    """Cut a last line left without its newline (a write that a crash stopped half way) back to the last newline."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return
    at = size
    while at > 0:
        step = min(65536, at)
        chunk = os.pread(fd, step, at - step)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, at - step + cut + 1)
            return
        at -= step
    os.ftruncate(fd, 0)


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
