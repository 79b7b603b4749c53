"""The one typed view of a hardware profile that every model reads.

A model asks for a figure (``hw.figure("launch.event_s")``, ``hw.instruction("fma.rn.f32")``,
``hw.clock_hz``) and gets a :class:`Figure`: the value, its 95% interval where the profile has one,
and where it came from -- measured (``profile launch.event_s``), reported by the driver, a
documented default of a reference board, or missing (with the reason). A failed measurement is a
missing figure, never a number. The GPU architecture (``sm_90``) is derived here, once, from the
compute capability the CUDA driver reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuprofiler.profile.file import Profile, is_entry

# a guarded stream this much slower per work-item than the unguarded one: the compiler ran its work-items one at a
# time (PoCL 3.0 on a Zen 3 VM: 1.46 ns against 0.30-0.39 ns a work-item)
SCALAR_GUARD_RATIO = 1.5

# Reference boards per architecture (vendor data sheets): what a model may assume where nothing was measured.
REFERENCE_BOARDS: dict[str, dict[str, Any]] = {
    "sm_70": dict(board="Tesla V100 SXM2", sms=80, clock_hz=1.53e9, bandwidth_Bps=900e9, l2_bytes=6 << 20),
    "sm_75": dict(board="GeForce RTX 2080 Ti", sms=68, clock_hz=1.545e9, bandwidth_Bps=616e9, l2_bytes=5632 << 10),
    "sm_80": dict(board="A100 40GB", sms=108, clock_hz=1.41e9, bandwidth_Bps=1555e9, l2_bytes=40 << 20),
    "sm_86": dict(board="GeForce RTX 3090", sms=82, clock_hz=1.695e9, bandwidth_Bps=936e9, l2_bytes=6 << 20),
    "sm_89": dict(board="GeForce RTX 4090", sms=128, clock_hz=2.52e9, bandwidth_Bps=1008e9, l2_bytes=72 << 20),
    "sm_90": dict(board="H100 SXM5", sms=132, clock_hz=1.98e9, bandwidth_Bps=3.35e12, l2_bytes=50 << 20),
}


@dataclass(frozen=True)
class Figure:
    """A value with its interval and where it came from; ``value`` is None where nothing usable exists."""

    value: float | None
    source: str
    interval: tuple[float, float] | None = None
    measured: bool = False

    @property
    def ok(self) -> bool:
        return self.value is not None

    def bounds(self) -> tuple[float, float]:
        """The interval, or the value itself at both ends where there is none."""
        if self.value is None:
            raise ValueError(f"no value: {self.source}")
        return self.interval if self.interval is not None else (self.value, self.value)

    def or_default(self, value: float, source: str) -> "Figure":
        """This figure where it has a value, else ``value`` from ``source``."""
        return self if self.ok else Figure(float(value), source)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _interval(node: dict) -> tuple[float, float] | None:
    iv = node.get("interval")
    if isinstance(iv, (list, tuple)) and len(iv) == 2:
        lo, hi = _number(iv[0]), _number(iv[1])
        if lo is not None and hi is not None and lo <= hi:
            return lo, hi
    return None


def figure_of(node: Any, key: str) -> Figure:
    """A profile node (an entry or a plain number) as a :class:`Figure` named ``profile KEY``."""
    if is_entry(node):
        if node.get("status") != "ok":
            return Figure(None, f"profile {key} failed: {node.get('reason', 'no value')}")
        value = _number(node.get("value"))
        if value is None:
            return Figure(None, f"profile {key} has no value")
        return Figure(value, f"profile {key}", _interval(node), measured=True)
    value = _number(node)
    if value is None:
        return Figure(None, f"profile has no {key}")
    return Figure(value, f"profile {key}", measured=True)


@dataclass(frozen=True)
class Cache:
    """A cache level found as a knee of the latency curve (its latency, where the profile has it)."""

    level: int
    size_bytes: float
    latency_s: float | None


class HardwareView:
    """Typed, read-only access to one profile (or to none: every figure is then missing, and the GPU
    architecture is whatever the caller names)."""

    def __init__(self, profile: Profile | None = None):
        self.profile = profile
        self._data: dict[str, Any] = profile.data if profile is not None else {}
        device = self._data.get("device")
        self._device: dict[str, Any] = device if isinstance(device, dict) else {}

    # ---- the device --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return str(self._device.get("name", "?"))

    @property
    def kind(self) -> str:
        """``gpu``, ``cpu``, ``accelerator`` or ``other`` (``?`` without a profile)."""
        return str(self._device.get("type", "?")).lower()

    @property
    def backend(self) -> str | None:
        """``opencl`` or ``cuda``: the API the profile was measured through."""
        b = self._device.get("backend")
        return str(b) if b else None

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.kind == "gpu" and str(self._device.get("vendor", "")).upper().startswith("NVIDIA")

    @property
    def arch(self) -> str | None:
        """``sm_XY`` from the compute capability ``X.Y`` the CUDA driver reported; None for other devices."""
        cc = self._device.get("compute_capability")
        if not cc:
            return None
        return "sm_" + str(cc).strip().replace(".", "")

    @property
    def compute_units(self) -> Figure:
        v = _number(self._device.get("compute_units"))
        return Figure(v, "profile device.compute_units") if v else Figure(None, "no compute units")

    @property
    def clock_hz(self) -> Figure:
        """The clock cycles and seconds were converted with: measured at calibration, else the driver's."""
        clock = self._data.get("clock") if isinstance(self._data.get("clock"), dict) else {}
        hz = _number(clock.get("hz"))
        if hz and hz > 0:
            source = f"profile clock.hz ({clock.get('source', '')})".replace(" ()", "")
            return Figure(hz, source, _interval(clock), measured=True)
        mhz = _number(self._device.get("clock_mhz"))
        if mhz and mhz > 0:
            return Figure(mhz * 1e6, "profile device.clock_mhz (reported)")
        return Figure(None, "no clock in the profile")

    # ---- measured figures --------------------------------------------------------------------

    def figure(self, key: str) -> Figure:
        """The figure at a dotted key path (``memory.read_s``, ``bandwidth.streaming_llc_bytes``)."""
        node: Any = self._data
        for part in key.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return Figure(None, f"profile has no {key}")
        return figure_of(node, key)

    @property
    def bandwidth_layout(self) -> str:
        """How the profile's bandwidth kernels walked their arrays: ``contiguous`` (one vector per work-item, a
        CPU's since method version 2) or ``strided`` (PER sweeps per work-item, a GPU's and every older
        profile's)."""
        node = self._data.get("bandwidth")
        found = node.get("layout") if isinstance(node, dict) else None
        return "contiguous" if found == "contiguous" else "strided"

    def children(self, key: str) -> list[str]:
        """The names under a dotted key whose node is a table (``bandwidth.by_width.read`` -> ``1, 2, 4``)."""
        node: Any = self._data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return [str(k) for k in node] if isinstance(node, dict) else []

    def device_extra(self, name: str) -> float | None:
        """A number the driver reported beside the device's description (``l2_cache_bytes``)."""
        extra = self._device.get("extra")
        value = _number(extra.get(name)) if isinstance(extra, dict) else None
        return value if value is not None and value > 0 else None  # 0: the driver does not know

    @property
    def reported_llc_bytes(self) -> float | None:
        """The last-level cache the driver reports: a GPU's L2 (``l2_cache_bytes``), an OpenCL device's global memory
        cache (``global_mem_cache_bytes``); None where it reports none."""
        return self.device_extra("l2_cache_bytes") or self.device_extra("global_mem_cache_bytes")

    @property
    def page_run(self) -> int:
        """Pages the host's operating system hands a CPU device's buffers physically contiguous
        (``device.extra.page_run_pages``: Linux's per-CPU page batch); 1 (each page anywhere) elsewhere."""
        run = self.device_extra("page_run_pages") if self.kind == "cpu" else None
        return int(run) if run and run >= 1 else 1

    def reported_cache(self, level: int, size_bytes: float) -> tuple[int, int] | None:
        """(ways, sets) of the CPU cache the operating system reported (``device.extra.host_caches``) at the same
        level as a calibrated one of ``size_bytes``, within a factor of four (a latency knee on a shared host reads
        the L2 at 0.8 to 2.5 MiB for its 1 MiB); None off a CPU or where none is."""
        extra = self._device.get("extra")
        caches = extra.get("host_caches") if self.kind == "cpu" and isinstance(extra, dict) else None
        for c in caches if isinstance(caches, list) else []:
            lv, ways, sets, size = (_number(c.get(k)) if isinstance(c, dict) else None
                                    for k in ("level", "ways", "sets", "size_bytes"))
            if (lv == level and ways and sets and size and ways >= 1 and sets >= 1 and size > 0
                    and abs(math.log(size / size_bytes)) <= math.log(4)):
                return int(ways), int(sets)
        return None

    def instruction(self, name: str, what: str = "latency_s") -> Figure:
        """An instruction's figure (``latency_s``, ``latency_cycles``, ``throughput_ops_per_s``) by its profile
        name: OpenCL benchmarks (``float_fma``) or PTX opcodes (``fma.rn.f32``)."""
        node = self.instructions.get(name)
        key = f"instructions.{name}.{what}"
        if not isinstance(node, dict):
            return Figure(None, f"profile has no instructions.{name}")
        if node.get("status", "ok") != "ok":
            return Figure(None, f"profile instructions.{name} failed: {node.get('reason', '')}".rstrip(": "))
        if what not in node:
            return Figure(None, f"profile has no {key}")
        return figure_of(node[what], key)

    @property
    def instructions(self) -> dict[str, Any]:
        node = self._data.get("instructions")
        return node if isinstance(node, dict) else {}

    @property
    def caches(self) -> list[Cache]:
        """The cache levels found as knees of the latency curve, smallest first."""
        out = []
        for c in self._data.get("caches") or []:
            c = c if isinstance(c, dict) else {}
            size, lat = _number(c.get("size_bytes")), _number(c.get("latency_s"))
            if size and size > 0:
                level = _number(c.get("level"))
                out.append(Cache(int(level) if level else len(out) + 1, size, lat if lat and lat > 0 else None))
        return out

    def _curve(self, section: dict | None, key: str, value: str, by: str = "bytes") -> list[tuple[float, float]]:
        points = []
        for p in (section or {}).get(key) or []:
            x, y = _number((p or {}).get(by)), _number((p or {}).get(value))
            if x and x > 0 and y and y > 0:
                points.append((x, y))
        return sorted(points)

    @property
    def launch_points(self) -> list[tuple[float, float]]:
        """Empty-kernel event times of the launch section: (work-groups, seconds)."""
        launch = self._data.get("launch") if isinstance(self._data.get("launch"), dict) else {}
        out = []
        for p in launch.get("points") or []:
            threads, local, secs = (_number((p or {}).get(k)) for k in ("threads", "local", "event_s"))
            if threads and local and secs and secs > 0:
                out.append((float(-(-threads // local)), secs))
        return out

    def transfer_curve(self, key: str) -> list[tuple[float, float]]:
        """Host-device copy times of the transfer section (``key``: htod, dtoh, htod_pinned, dtoh_pinned): (bytes,
        fastest seconds), increasing bytes."""
        section = self._data.get("transfer")
        return self._curve(section if isinstance(section, dict) else None, f"{key}_curve", "min_s")

    @property
    def bandwidth_curve(self) -> list[tuple[float, float]]:
        """Read bandwidth against working set: (bytes, B/s), increasing bytes."""
        return self._curve(self._data.get("bandwidth") if isinstance(self._data.get("bandwidth"), dict) else None,
                           "working_set_curve", "Bps")

    @property
    def overlap_curve(self) -> list[tuple[float, float]]:
        """A CPU core's work-items in progress at once against their chain's length in operations:
        (operations, work-items), increasing operations (empty where not measured)."""
        section = self._data.get("concurrency")
        return self._curve(section if isinstance(section, dict) else None, "overlap_curve", "overlap", by="ops")

    @property
    def loopfree_curve(self) -> list[tuple[float, float]]:
        """The same for chains written out without a loop, which a CPU's compiler vectorises across work-items
        (empty where not measured)."""
        section = self._data.get("concurrency")
        return self._curve(section if isinstance(section, dict) else None, "loopfree_curve", "overlap", by="ops")

    @property
    def loopfree_floor_s(self) -> float | None:
        """The least time a CPU core took per work-item on the loop-free curve (a point's ``op_s`` x ``ops``): its
        fixed cost per work-item, which the shortest chains pay whatever their latency; None where not measured."""
        section = self._data.get("concurrency")
        times = [ops * op_s for ops, op_s in self._curve(section if isinstance(section, dict) else None,
                                                          "loopfree_curve", "op_s", by="ops")]
        return min(times) if times else None

    @property
    def guarded_item_s(self) -> float | None:
        """A CPU core's time per work-item of a stream whose loads and stores run under ``if (i < n)``
        (``concurrency.guarded_item_s``), where the compiler runs such regions a work-item at a time: the guarded
        stream took more than :data:`SCALAR_GUARD_RATIO` x the unguarded one's. None where it vectorises them, or
        where either was not measured."""
        guarded, plain = self.figure("concurrency.guarded_item_s"), self.figure("concurrency.unguarded_item_s")
        if self.kind != "cpu" or not (guarded.ok and plain.ok) or guarded.value <= SCALAR_GUARD_RATIO * plain.value:
            return None
        return float(guarded.value)

    @property
    def guarded_far_item_s(self) -> float | None:
        """As :attr:`guarded_item_s`, the stream's buffers past any last-level cache
        (``concurrency.guarded_far_item_s``): what a large launch's guarded stream takes from DRAM. None where the
        near figures say the compiler vectorises such regions, or where it was not measured."""
        fig = self.figure("concurrency.guarded_far_item_s")
        return float(fig.value) if self.guarded_item_s is not None and fig.ok and fig.value > 0 else None

    @property
    def guard_skip_item_s(self) -> float | None:
        """A CPU core's time per work-item of the guarded stream when no work-item takes the guard
        (``concurrency.guard_skip_item_s``); None where not measured."""
        fig = self.figure("concurrency.guard_skip_item_s")
        return float(fig.value) if self.kind == "cpu" and fig.ok else None

    @property
    def tlb_curve(self) -> list[tuple[float, float]]:
        """Translation's extra time per load against the pages a loop of loads cycles over: (pages, spread_s -
        packed_s, at least 0), increasing pages (empty where not measured, or where ``tlb.miss_s`` failed: a curve
        with a time at or below zero in it is a failed measurement)."""
        section = self._data.get("tlb") if isinstance(self._data.get("tlb"), dict) else {}
        if not self.figure("tlb.miss_s").ok:
            return []
        out = []
        for p in section.get("curve") or []:
            if not isinstance(p, dict):
                continue
            x, packed, spread = (_number(p.get(k)) for k in ("pages", "packed_s", "spread_s"))
            if x and x > 0 and packed is not None and spread is not None:
                out.append((x, max(spread - packed, 0.0)))
        return sorted(out)

    @property
    def latency_curve(self) -> list[tuple[float, float]]:
        """Pointer-chase latency against working set: (bytes, seconds), increasing bytes."""
        points = [p for p in self._data.get("latency_curve") or []
                  if not (isinstance(p, dict) and p.get("status") == "failed")]  # below one cycle
        return self._curve({"curve": points}, "curve", "latency_s")


def view(profile: Profile | HardwareView | None) -> HardwareView:
    """The view of ``profile`` (a view passes through)."""
    return profile if isinstance(profile, HardwareView) else HardwareView(profile)
