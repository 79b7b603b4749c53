"""The tune's resumable store: one JSON line per finished configuration (measured, or failed and why), appended
and fsynced as it finishes; a rerun with the same device, spec contents, matrix and size reuses every measured line
and tries the failed ones again (a later line of a key replaces its failed one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuprofiler.measure.storage import MeasurementLog, read_records


def tune_key(device_id: str, digest: str, matrix: str | None, size: int, config: str, stage: str) -> str:
    return json.dumps([device_id, digest, matrix, int(size), config, stage])


class TuneStore:
    """Finished configurations by key (:func:`tune_key`); a key is written once, or again after it failed."""

    def __init__(self, path: Path, device: Any):
        self.log = MeasurementLog(Path(path), device)
        self.found: dict[str, dict] = {}
        if self.log.path.exists():
            for r in read_records(self.log.path):
                if isinstance(r.get("tune_key"), str) and r.get("tune_status") != "failed":
                    self.found.setdefault(r["tune_key"], r)
        self.reused = 0

    def get(self, key: str) -> dict | None:
        got = self.found.get(key)
        if got is not None:
            self.reused += 1
        return got

    def put(self, key: str, record: dict) -> dict:
        record = {**record, "tune_key": key}
        self.log.append(record)
        self.found[key] = record
        return record
