"""Host <-> device transfer bandwidth and latency, from pageable and from pinned (or mapped) host memory.

Copies of 4 bytes to 64 MiB (quick: 16 MiB) in each direction; each size's minimum
event time over repeats. Bandwidth = largest size / its minimum time; latency = the
minimum time of the 4-byte copy. Pinned memory is page-locked (CUDA) or an
ALLOC_HOST_PTR buffer mapped into the host (OpenCL).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuprofiler.measure.engine import sample
from gpuprofiler.measure.policy import TimingPolicy, bench
from gpuprofiler.microbench.common import Progress, say
from gpuprofiler.profile.file import entry, failed


def _copy_times(backend, host: np.ndarray, buf, direction: str, policy: TimingPolicy):
    def once() -> float:
        if direction == "htod":
            _, event = backend.to_device(host, buf)
        else:
            event = backend.from_device(buf, host)
        backend.finish()
        return event.seconds()

    return sample(once, policy)


def measure(backend: Any, quick: bool = False, progress: Progress = None) -> dict[str, Any]:
    top = (16 if quick else 64) << 20
    sizes = [4] + [2**k for k in range(12, top.bit_length(), 4 if quick else 2)]
    policy = bench(quick, 0.2, 0.05)
    buf = backend.alloc(top)
    result: dict[str, Any] = {"sizes": sizes}
    memories = {"pageable": lambda n: np.random.default_rng(5).integers(0, 255, n, dtype=np.uint8)}
    try:
        backend.pinned_empty(4)
        memories["pinned"] = lambda n: _filled(backend.pinned_empty(n))
    except NotImplementedError:
        result["pinned"] = "not offered by this API"
    for memory, make in memories.items():
        for direction in ("htod", "dtoh"):
            curve = []
            for n in sizes:
                host = make(n)
                t = _copy_times(backend, host, buf, direction, policy).device
                curve.append({"bytes": n, "min_s": t.minimum, "median_s": t.median})
            suffix = "" if memory == "pageable" else "_pinned"
            big = curve[-1]
            method = f"{direction}, {memory} host memory, {big['bytes'] >> 20} MiB, bytes / minimum event time"
            result[f"{direction}{suffix}_Bps"] = (entry(big["bytes"] / big["min_s"], "B/s", method,
                                                        (big["bytes"] / big["median_s"], big["bytes"] / big["min_s"]))
                                                  if big["min_s"] > 0 else failed("B/s", method, "zero copy time"))
            result[f"{direction}{suffix}_curve"] = curve
            say(progress, f"transfer: {direction} {memory}: {big['bytes'] / big['min_s'] / 1e9:.2f} GB/s")
    lat = [result[k][0]["min_s"] for k in ("htod_curve", "dtoh_curve")]
    result["latency_s"] = entry(min(lat), "s", "minimum event time of a 4-byte pageable copy (either direction)",
                                (min(lat), max(lat)))
    return result


def _filled(array: np.ndarray) -> np.ndarray:
    array[:] = np.random.default_rng(5).integers(0, 255, array.size, dtype=np.uint8)
    return array
