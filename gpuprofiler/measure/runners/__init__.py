"""Runners: where the measurement work of a command runs. ``sequential`` (the default: here, one task after the
other) or ``dask`` (a Dask distributed cluster, ``--cluster local[:N]`` or ``tcp://HOST:PORT``); each in its own
module with :class:`base.Runner` as the contract. Dask is an optional extra, imported only by a ``--cluster`` run."""

from __future__ import annotations

import os
import re

from gpuprofiler.errors import UserError
from gpuprofiler.measure.runners.base import local_devices

__all__ = ["ENV", "check_address", "cluster_address", "local_devices", "open_cluster"]

ENV = "GPUPROFILER_CLUSTER"


def cluster_address(given: str | None) -> str | None:
    """The cluster a command runs on: ``--cluster``, else ``$GPUPROFILER_CLUSTER``, else None (this process)."""
    got = given if given is not None else os.environ.get(ENV)
    got = (got or "").strip()
    return got or None


def check_address(address: str) -> tuple[bool, int | None]:
    """(local, workers) of a cluster address, checked without importing Dask or opening a device, so that a bad one
    fails at once: ``local`` (workers None: one per device), ``local:N`` (1 to 256) or a scheduler's address."""
    m = re.fullmatch(r"local(?::(\d+))?", address)
    if m:
        workers = int(m.group(1)) if m.group(1) else None
        if workers is not None and not 1 <= workers <= 256:
            raise UserError(f"--cluster {address}: from 1 to 256 local workers")
        return True, workers
    if re.fullmatch(r"(?:tcp|tls|ws|wss|ucx|inproc)://\S+", address):
        return False, None
    raise UserError(f"--cluster {address!r}: expected local, local:N (N worker processes on this machine) or a "
                    f"Dask scheduler's address such as tcp://HOST:8786 (tls://, ws://, ucx:// too; also ${ENV})")


def open_cluster(address: str, device_ids: list[str] | None = None):
    """The Dask runner of ``local`` (a worker process per device of this machine), ``local:N`` (N worker
    processes) or a scheduler's address (``tcp://HOST:PORT``, ``tls://``...)."""
    local, workers = check_address(address)
    if local:
        from gpuprofiler.measure.runners.dask import DaskRunner, import_distributed

        import_distributed()
        if device_ids is None:
            device_ids = local_devices()
        return DaskRunner.local(workers or max(1, len(device_ids)), device_ids)
    from gpuprofiler.measure.runners.dask import DaskRunner

    return DaskRunner(address)
