"""The hardware profile: one versioned JSON file of measured device parameters, read by every model.

Every value is an *entry*: ``{"value", "unit", "interval": [low, high], "method", "status"}``;
a measurement that failed or is physically impossible has ``"status": "failed"``, a
``"reason"`` and ``"value": null`` -- never a number. ``Profile.get("launch.fixed_s")`` returns
the value of an entry by its dotted key path (or the object at that path). The schema is
:data:`SCHEMA_DOC` (``gpuprofiler profile show --schema``).
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.measure.policy import LONGEST_S
from gpuprofiler.textfile import read_text

SCHEMA = "gpuprofiler.profile"
SCHEMA_VERSION = 1

# Figures whose measuring method changed, with the version of the method now used and what it is. A profile
# records the versions it was measured with in ``method_versions``; a figure missing there (every figure of a
# profile written before this table existed) was measured with version 1, the old method.
CHANGED_METHODS: dict[str, tuple[int, str]] = {
    "launch.back_to_back_s": (2, "device time per launch of many empty launches queued back to back, between two "
                                 "device timestamps (v1: host wall time per launch of the package's timed launch, "
                                 "which measured Python)"),
    "launch.round_trip_s": (2, "host time per launch + finish from a tight loop of such pairs, arguments marshalled "
                               "once, no events or hold kernel (v1: the timing engine's host time of one timed "
                               "launch, with the CUDA hold kernel in it)"),
    "instructions.add.s32": (2, "chain x = b - x, one IADD3 per link (v1: x = x + b, which ptxas splits between "
                                "IADD3 and VIADD)"),
    "instructions.add.u32": (2, "as add.s32"),
    "instructions.sub.s32": (2, "chain x = b - x, one IADD3 per link (v1: x = x - b, split between IADD3 and "
                                "VIADD)"),
    "instructions.sub.u32": (2, "as sub.s32"),
    "instructions.ld.global.ca.u64": (2, "ring walked once before the clock starts (v1: cold L1 misses in the "
                                         "timed chain broke the k / 2k ratio check)"),
    "instructions.ld.global.cg.u64": (2, "ring walked once before the clock starts (these loads skip L1: little "
                                         "change expected)"),
    "instructions.ld.global.cv.u64": (2, "as ld.global.cg.u64"),
    "caches": (2, "every level has a name from the device type: a GPU's plateau after L2 is 'L2 far' (v1: level "
                  "numbers only, shown as L1, L2, L3)"),
    "bandwidth.by_width": (2, "on a CPU one vector per work-item (layout contiguous); every kind and width in "
                              "alternation, each the 10th percentile of its runs (v1: 16 vectors per work-item "
                              "strided by the global size on a CPU too, each kernel the minimum of its own runs: "
                              "9.6 GB/s float4 reads on a Zen 4 VM whose contiguous reads ran 33-47)"),
    "bandwidth.working_set_curve": (2, "on a CPU contiguous float16 reads summed in halves, every size in "
                                       "two passes, each size its fastest run (v1: strided float4 whose 15-add "
                                       "sums held every size to 30 GB/s: no cache seen below 128 MiB)"),
    "bandwidth.streaming_llc_bytes": (2, "the working-set curve's knee among sets at most 1.25x the cache the "
                                         "driver reports (v1: any set, so a burst of a shared memory's fast state "
                                         "at 64 MiB put a 32 MiB L3 at 64 MiB)"),
    "concurrency.loopfree_curve": (2, "the one-chain-at-a-time reference is a looped chain of 1024 operations timed "
                                      "in the same rounds as the straight chains (v1: the overlap curve's, timed "
                                      "before: a tenant holding a core through the straight chains halved the "
                                      "curve)"),
    "instructions.barrier": (2, "time per barrier from the fastest runs (10th percentile) of k and 2k steps, a "
                                "kernel's modelling figure (v1: their medians; a work-group's runs on a CPU are "
                                "bimodal, and where the slow mode held most of them a Zen 4 VM's scalar barrier read "
                                "98-126 ns against 69-74 by the fastest runs of the same rounds)"),
    "instructions.barrier_scalar": (2, "as instructions.barrier"),
    "tlb.curve": (2, "the buffer its loads read is written first (v1: never written, so its pages could all map "
                     "one shared zero page: on a Zen 4 VM 3.1-3.2 ns extra per load at 16384 pages against 6.2 "
                     "written, 1.0 against 3.5-3.9 at 4096)"),
    "tlb.miss_s": (2, "as tlb.curve"),
    "tlb.reach_pages": (2, "as tlb.curve"),
    "concurrency.guarded_item_s": (3, "2^22 work-items, 16 MiB a buffer, written before the streams read it (v2: "
                                      "never written, so its reads could come from one shared zero page: on a Zen 4 "
                                      "VM the guarded stream past the L3 read 0.83 ns a work-item against 1.12 "
                                      "written; v1: 2^20, 4 MiB, which a core's caches nearly hold: the guarded "
                                      "figure read 0.73 and 1.57 ns in two calibrations on a Zen 3 VM)"),
    "concurrency.unguarded_item_s": (3, "as concurrency.guarded_item_s"),
    "concurrency.guard_skip_item_s": (3, "as concurrency.guarded_item_s"),
    "concurrency.guarded_far_item_s": (2, "as concurrency.guarded_item_s v3, 128 MiB a buffer (v1: never written)"),
    "concurrency.unguarded_far_item_s": (2, "as concurrency.guarded_far_item_s"),
    "latency_curve": (4, "every chase covers its whole cycle after an untimed pass, its two lengths in alternation, "
                         "the modelling figure; the sizes from a sixteenth of the last level to half its size pooled "
                         "over three passes (v3: to its size, whose chase never fit beside a VM's other tenants and "
                         "took the longest; v2: from a quarter: on a day a Zen 4 VM's other tenants evicted a 4 MiB "
                         "chase's lines in four passes of five, the L3 read 54-64 ns or went unseen; v1: chases "
                         "shorter than the cycle found part of it cold in the shorter run only: latencies below zero "
                         "at 8-16 MiB, an L3 knee anywhere from 7.5 to 22 MiB)"),
}
# the OpenCL instruction benchmarks' ops (microbench.instructions_cl.OPS; the profile file comes before them)
CHANGED_METHODS.update({f"instructions.{op}": (2, "throughput from 8 independent chains of 8 ops per loop iteration "
                                                  "(v1: 32, whose code the compilers handled unlike a kernel's: on a "
                                                  "Zen 4 VM the pip PoCL 3.0 read int_add at 7.2 Gop/s against 24.5 "
                                                  "at 8 and float_div 2.9 against 5.6, Debian's PoCL 3.1 native_exp "
                                                  "0.45 against 0.75); latency chains of 16 and 32 ops (v1: 32 and "
                                                  "64, the same latencies)")
                        for op in ("float_add", "float_mul", "float_mad", "float_fma", "float_div", "float_sqrt",
                                   "native_sin", "native_exp", "native_recip", "double_add", "double_mul",
                                   "double_fma", "double_div", "int_add", "int_mul", "int_mad24", "atomic_add")})


def method_version_of(key: str) -> int:
    """The version of the method this gpuprofiler measures the figure ``key`` with (1 unless it changed)."""
    return CHANGED_METHODS.get(key, (1, ""))[0]


def method_version(data: dict[str, Any], key: str) -> int:
    """The version of the method the profile ``data`` measured ``key`` with: 1 where it records none."""
    versions = data.get("method_versions") if isinstance(data, dict) else None
    found = versions.get(key) if isinstance(versions, dict) else None
    return int(found) if isinstance(found, int) and not isinstance(found, bool) and found >= 1 else 1


def superseded(data: dict[str, Any]) -> list[str]:
    """The figures ``data`` holds that it measured with an older method than this gpuprofiler's (a profile
    calibrated before the method changed): the models read them as the new method's figures, so they are stale."""
    return [k for k, v in method_versions_present(data).items() if method_version(data, k) < v]


def method_versions_present(data: dict[str, Any]) -> dict[str, int]:
    """The current method versions of the changed figures that ``data`` holds: what a calibration that
    measured them all records as ``method_versions``."""
    out = {}
    for key, (version, _) in CHANGED_METHODS.items():
        section, _, name = key.partition(".")
        node = data.get(section)
        if (name and isinstance(node, dict) and name in node) or (not name and node):
            out[key] = version
    return out


def _changed_methods_doc() -> str:
    return "\n".join(textwrap.fill(f"v{version}: {text}", 112, initial_indent=f"  {key:<32}",
                                    subsequent_indent=" " * 34) for key, (version, text) in CHANGED_METHODS.items())


SCHEMA_DOC = """\
gpuprofiler hardware profile, schema version 1 (JSON)
  schema, schema_version, gpuprofiler_version, created, host, command, duration_s, quick
  method_versions     {figure key: version} of the figures whose measuring method changed (below); a key
                      that is missing (every key, in profiles written before it existed) means version 1
  device              DeviceInfo of the calibrated device (id, name, vendor, type, clock_mhz, ...); its extra
                      holds what the driver reports beside (global_mem_cache_bytes, ...) and, for a CPU device,
                      what the operating system does: host_caches[] (level, size_bytes, ways, sets, line_bytes of
                      the data caches) and page_run_pages (pages handed out physically contiguous)
  clock               {hz, source}: the clock used for cycles <-> seconds, read at run time
  gather_draws        [{date, first_date, values_s, kept | error}]: validate's second draw of its own
                      calibration's gathered reads and streams, pooled with the first (gathers_planned: still to be drawn)
  launch              fixed_s, per_thread_s (fit l = a*nt + b with interval), per_block_s (the same event
                      times over work-groups: dispatch),
                      back_to_back_s (device time per launch of many launches queued back to back),
                      event_s (device event of an empty kernel),
                      round_trip_s (host time of launch + finish, tight loop, arguments marshalled once),
                      queue_to_start_s (profiling start - queued; clpeak's launch latency),
                      points[] (threads, local, event_s, engine_host_s: the engine's host time per timed launch)
  memory              read_s (t), write_s (T), read_step_s (dt), write_step_s (dT), cached_read_s,
                      dram_latency_s (latency past the last cache level), points[] (n, read_s, write_s)
  bandwidth           read_Bps, write_Bps, copy_Bps, triad_Bps (best over vector widths),
                      by_width{kind: {width: entry}}, array_bytes, peak_Bps (where the API tells it),
                      layout ("strided": PER sweeps per work-item, a GPU's and every profile before it was
                      recorded; "contiguous": one vector per work-item, a CPU's),
                      working_set_curve[] (bytes, Bps), streaming_llc_bytes (where reads fall to memory speed),
                      gather_s (a read at a random address far beyond the caches over the same read near: the
                      cost of a gathered line's miss with the device full of them), gather_llc_s (CPU: the same
                      reads over a span the last-level cache holds but a core's private levels do not, per read
                      that misses them); on a CPU streams (sequential
                      streams a core follows at the speed of one) and stream_curve[] (streams, tile_s, row_s,
                      ratio)
  transfer            htod_Bps, dtoh_Bps (pageable), htod_pinned_Bps, dtoh_pinned_Bps (where the API
                      allows), latency_s (smallest copy)
  caches              [{level, name, size_bytes, latency_s, latency_cycles}] detected as knees of latency_curve;
                      level counts from 1 (smallest); name: L1, L2, L3 on a CPU, L1, L2, L2 far on a GPU
  latency_curve       [{bytes, latency_s}] pointer chase over a random cyclic permutation of cache lines; a point
                      below one cycle carries status "failed" and its reason (listed in failed, left out of
                      every use)
  local_memory        latency_s, latency_cycles
  tlb                 reach_pages (pages of 4 KiB a core's loads reach without a TLB miss), miss_s (extra time of an
                      independent load whose page misses the TLB), curve[] (pages, packed_s, spread_s: time per
                      load of that many lines packed or one per page), page_bytes, method
  instructions        {op: {latency_s, latency_cycles, throughput_ops_per_s, chain_ratio, method, status,
                      method_version?}}
  concurrency         work_items (entry: how many work-items run at once, and how it was found);
                      overlap_curve[] (CPU: ops, overlap: work-items whose dependent chains of that many
                      operations a core runs at once), overlap_method; loopfree_curve[] (CPU: the same for
                      chains written out without a loop, which the compiler vectorises across work-items),
                      loopfree_method; guarded_item_s, unguarded_item_s, guard_skip_item_s (CPU entries: a core's
                      time per work-item of y[i] = x[i] * a + b with and without if (i < n) around it, and guarded
                      with every work-item skipping it); guarded_far_item_s, unguarded_far_item_s (the same
                      streams on buffers past any last-level cache)
  failed              [{key, reason}] every measurement recorded as failed
Entries: {value, unit, interval: [low, high], method, status: ok|failed, reason?, n?, method_version?}
Checked on load (a UserError names the key): JSON of at most 32 levels, every number finite, integers within
2^63; a section that is present has its type (a missing one reads as missing figures); an ok entry's value is
a positive number and its interval two numbers, low <= high; a failed entry's value is null; clock.hz > 0;
device figures >= 0 (0: not reported); curve points and caches have positive sizes.
Figures whose method changed (method_versions; v1 is the old method):
""" + _changed_methods_doc() + "\n"


def entry(value: float | None, unit: str, method: str, interval: tuple[float, float] | None = None,
          **extra: Any) -> dict[str, Any]:
    """A measured value with its unit, interval and method. Every figure a profile holds is a time, a rate, a
    size, a count or a clock: a value that is not positive and finite is recorded as failed, with the reason
    (so that :func:`load_profile`, which refuses such values, reads every profile calibrate writes)."""
    ok = value is not None and math.isfinite(value) and value > 0
    out = {"value": float(value) if ok else None, "unit": unit,
           "interval": [float(interval[0]), float(interval[1])] if (ok and interval and all(
               v is not None and math.isfinite(v) for v in interval) and interval[0] <= interval[1]) else None,
           "method": method, "status": "ok" if ok else "failed"}
    if not ok:
        default = "no value" if value is None or not math.isfinite(value) else f"{value:.3g} {unit} is not positive"
        out["reason"] = extra.pop("reason", default)
    out.update(extra)
    return out


def failed(unit: str, method: str, reason: str, **extra: Any) -> dict[str, Any]:
    """A measurement that did not give a physically possible value: kept with its reason, never as a value."""
    return {"value": None, "unit": unit, "interval": None, "method": method, "status": "failed",
            "reason": reason, **extra}


def is_entry(obj: Any) -> bool:
    return isinstance(obj, dict) and "status" in obj and "value" in obj and "unit" in obj


@dataclass
class Profile:
    """A hardware profile in memory; :meth:`save` / :func:`load_profile` round-trip it."""

    data: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def get(self, key: str, default: Any = KeyError) -> Any:
        """The value at a dotted key path; an entry gives its value, a failed entry raises KeyError."""
        node: Any = self.data
        for part in key.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                if default is KeyError:
                    raise KeyError(f"profile has no {key!r}")
                return default
        if is_entry(node):
            if node["status"] != "ok":
                if default is KeyError:
                    raise KeyError(f"profile {key!r} failed: {node.get('reason')}")
                return default
            return node["value"]
        return node

    def entry(self, key: str) -> dict[str, Any]:
        node: Any = self.data
        for part in key.split("."):
            node = node[part]
        return node

    def failures(self) -> list[dict[str, str]]:
        """Every failed entry with its key path and reason."""
        out = []

        def walk(node: Any, path: str) -> None:
            if is_entry(node):
                if node["status"] != "ok":
                    out.append({"key": path, "reason": node.get("reason", "")})
                return
            if isinstance(node, dict) and node.get("status") == "failed" and "bytes" in node:  # a failed curve point
                out.append({"key": path, "reason": str(node.get("reason", ""))})
                return
            if isinstance(node, dict):
                for k, v in node.items():
                    if k != "failed":
                        walk(v, f"{path}.{k}" if path else k)
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{path}.{i}")

        walk(self.data, "")
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.data["failed"] = self.failures()
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, allow_nan=False) + "\n")
        tmp.replace(path)
        self.path = path
        return path


MAX_PROFILE_BYTES = 64 << 20   # a profile is a few hundred KiB; a larger file is refused before it is parsed
MAX_PROFILE_DEPTH = 32          # levels of nesting (a profile has 6); deeper JSON is refused


def _name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# the largest a measured figure can physically be, by its key's ending: a cache or array past 1 TiB, a clock past
# 10 GHz, a time past a day, a bandwidth past 1 PB/s is no measurement of a device
LIMITS = (("_per_s", 1e18, "1e18 per second"), ("_bytes", 2.0 ** 40, "1 TiB"), ("bytes", 2.0 ** 40, "1 TiB"),
          ("hz", 1e10, "10 GHz"), ("_s", LONGEST_S, "a day"), ("_Bps", 1e15, "1 PB/s"), ("Bps", 1e15, "1 PB/s"))


CACHE_LIMIT = (2.0 ** 34, "16 GiB")  # a cache level (the largest built hold about 1 GiB)


def _limit(key: str) -> tuple[float, str] | None:
    """The physical limit of the figure at ``key`` (its last name, or the entry's name for ``.value``), or None."""
    parts = [p for p in key.split(".") if p and not p.isdigit()]
    name = parts[-2] if len(parts) > 1 and parts[-1] == "value" else (parts[-1] if parts else "")
    if name.endswith("bytes") and ("caches" in parts[:1] or "llc" in name or "cache" in name):
        return CACHE_LIMIT
    return next(((high, what) for end, high, what in LIMITS if name.endswith(end)), None)


class _Validator:
    """The profile's schema (:data:`SCHEMA_DOC`) checked on load: every failure names the key. Sections and keys
    that are missing are allowed (a partial profile reads as figures missing); those present must have their
    types, every number must be finite, and measured figures must be physically possible (positive)."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, message: str) -> UserError:
        return UserError(f"{self.path}: {key or 'the top level'}: {message}")

    # -- every value ---------------------------------------------------------------------------
    def walk(self, node: Any, key: str, depth: int) -> None:
        """Numbers finite and integers within 2^63 anywhere; entries valid wherever they are; bounded depth."""
        stack = [(node, key, depth)]
        while stack:
            node, key, depth = stack.pop()
            if depth > MAX_PROFILE_DEPTH:
                raise self.fail(key, f"nested more than {MAX_PROFILE_DEPTH} levels deep")
            if isinstance(node, dict):
                if is_entry(node):
                    self.entry(node, key)
                stack.extend((v, f"{key}.{k}" if key else str(k), depth + 1) for k, v in node.items())
            elif isinstance(node, list):
                stack.extend((v, f"{key}.{i}", depth + 1) for i, v in enumerate(node))
            elif isinstance(node, float) and not math.isfinite(node):
                raise self.fail(key, f"{node} is not a finite number")
            elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > 2 ** 63:
                raise self.fail(key, "an integer larger than 2^63 in magnitude")

    def entry(self, node: dict, key: str) -> None:
        status = node.get("status")
        if status not in ("ok", "failed", "skipped"):
            raise self.fail(f"{key}.status", f"expected \"ok\" or \"failed\", got {status!r:.80}")
        if not isinstance(node.get("unit"), str):
            raise self.fail(f"{key}.unit", f"expected a string, got {_name(node.get('unit'))}")
        value = node.get("value")
        if status != "ok":
            if value is not None:
                raise self.fail(f"{key}.value", f"a {status} entry has value null, not {value!r:.80}")
            return
        self.positive(value, f"{key}.value", "an ok entry's value")
        interval = node.get("interval")
        if interval is not None:
            if (not isinstance(interval, list) or len(interval) != 2 or not all(_real(v) for v in interval)
                    or not all(math.isfinite(v) for v in interval)):
                raise self.fail(f"{key}.interval", f"expected [low, high] (two finite numbers) or null, got "
                                                   f"{interval!r:.80}")
            if interval[0] > interval[1]:
                raise self.fail(f"{key}.interval", f"low {interval[0]} is above high {interval[1]}")

    # -- typed keys ----------------------------------------------------------------------------
    def positive(self, value: Any, key: str, what: str = "the value") -> None:
        if not _real(value):
            raise self.fail(key, f"expected a number, got {_name(value)} {value!r:.80}")
        if not math.isfinite(value) or value <= 0:
            raise self.fail(key, f"{what} must be a positive finite number (a time, rate, size or clock), "
                                 f"got {value!r}")
        self.physical(value, key)

    def physical(self, value: Any, key: str) -> None:
        """A figure past what a device can physically have (:data:`LIMITS`) is refused, naming the key."""
        limit = _limit(key)
        if limit is not None and _real(value) and value > limit[0]:
            raise self.fail(key, f"{value!r:.40} is past {limit[1]}: no device measures that")

    def typed(self, table: dict, key: str, prefix: str, kind: str, optional_null: bool = True) -> Any:
        """``table[key]`` (absent: None) checked to be ``kind``: str, bool, dict, list, number, positive, int>=1."""
        if key not in table:
            return None
        value, full = table[key], f"{prefix}.{key}" if prefix else key
        if value is None and optional_null:
            return None
        checks = {"str": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
                  "dict": lambda v: isinstance(v, dict), "list": lambda v: isinstance(v, list),
                  "number": _real, "positive": _real, "nonnegative": _real,
                  "count": lambda v: isinstance(v, int) and not isinstance(v, bool),
                  "entry_or_number": lambda v: is_entry(v) or _real(v)}
        if not checks[kind](value):
            wanted = {"str": "a string", "bool": "true or false", "dict": "an object", "list": "a list",
                      "number": "a number", "positive": "a positive number", "nonnegative": "a number >= 0",
                      "count": "a whole number",
                      "entry_or_number": "an entry {value, unit, interval, method, status} or a number"}[kind]
            raise self.fail(full, f"expected {wanted}, got {_name(value)} {value!r:.80}")
        if kind == "positive" or (kind == "entry_or_number" and _real(value)):
            self.positive(value, full)
        if kind in ("count", "nonnegative") and value < 0:
            raise self.fail(full, f"expected {'a whole number' if kind == 'count' else 'a number'} >= 0, got {value}")
        return value

    def points(self, node: Any, key: str, positive: tuple[str, ...], numbers: tuple[str, ...]) -> None:
        """A list of objects (curve points, caches): ``positive`` keys positive numbers, ``numbers`` any number
        (raw measurements may be negative: the view leaves such points out), each may be null or absent."""
        if node is None:
            return
        if not isinstance(node, list):
            raise self.fail(key, f"expected a list, got {_name(node)}")
        for i, point in enumerate(node):
            if not isinstance(point, dict):
                raise self.fail(f"{key}.{i}", f"expected an object, got {_name(point)} {point!r:.80}")
            for name in positive:
                self.typed(point, name, f"{key}.{i}", "positive")
            for name in numbers:
                self.typed(point, name, f"{key}.{i}", "number")

    def check(self, data: Any) -> None:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise UserError(f"{self.path}: not a gpuprofiler hardware profile (no \"schema\": \"{SCHEMA}\")")
        version = data.get("schema_version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise self.fail("schema_version", f"expected a whole number, got {_name(version)} {version!r:.80}")
        if version > SCHEMA_VERSION:
            raise UserError(f"{self.path}: profile schema {version} is newer than this gpuprofiler "
                            f"({SCHEMA_VERSION}); upgrade gpuprofiler")
        self.walk(data, "", 0)
        for key in ("gpuprofiler_version", "created", "host", "command", "latency_pattern"):
            self.typed(data, key, "", "str")
        self.typed(data, "quick", "", "bool")
        self.typed(data, "complete", "", "bool")              # calibrate's completeness marker
        self.typed(data, "sections_done", "", "list")
        self.typed(data, "section_errors", "", "dict")
        for i, name in enumerate(data.get("sections_done") or []):
            if not isinstance(name, str):
                raise self.fail(f"sections_done.{i}", f"expected a section name, got {_name(name)} {name!r:.80}")
        self.typed(data, "duration_s", "", "number")
        for key in ("device", "clock", "launch", "memory", "bandwidth", "transfer", "local_memory", "concurrency",
                    "tlb", "instructions", "method_versions", "section_seconds"):
            self.typed(data, key, "", "dict", optional_null=False)
        for key in ("caches", "latency_curve", "sections", "failed"):
            self.typed(data, key, "", "list", optional_null=False)
        device = data.get("device") or {}
        for key in ("id", "backend", "name", "vendor", "type", "driver", "platform", "slug", "compute_capability"):
            self.typed(device, key, "device", "str")
        # what the driver reported: 0 where it does not know (the view reads 0 as missing), never negative
        for key in ("compute_units", "max_work_group_size", "warp_size", "global_mem_bytes", "local_mem_bytes"):
            self.typed(device, key, "device", "count")
        self.typed(device, "clock_mhz", "device", "nonnegative")
        extra = self.typed(device, "extra", "device", "dict") or {}
        for key, value in extra.items():
            if _real(value) and value < 0:
                raise self.fail(f"device.extra.{key}", f"expected a number >= 0, got {value!r}")
            if "cache" in str(key):  # what the driver says of its caches sizes the cache analysis
                self.physical(value, f"device.extra.{key}")
        clock = data.get("clock") or {}
        self.typed(clock, "hz", "clock", "positive")
        self.typed(clock, "reported_hz", "clock", "nonnegative")
        self.typed(clock, "source", "clock", "str")
        for section in ("launch", "memory", "bandwidth", "transfer", "local_memory", "concurrency", "tlb"):
            table = data.get(section) or {}
            for key, value in table.items():
                if key.endswith(("_s", "_Bps", "_bytes", "_cycles", "_pages")) or key in ("work_items",):
                    self.typed(table, key, section, "entry_or_number")
        self.typed(data.get("bandwidth") or {}, "by_width", "bandwidth", "dict")
        if self.typed(data.get("bandwidth") or {}, "layout", "bandwidth", "str") not in (None, "strided", "contiguous"):
            raise self.fail("bandwidth.layout", "expected 'strided' or 'contiguous'")
        for kind, widths in ((data.get("bandwidth") or {}).get("by_width") or {}).items():
            if not isinstance(widths, dict):
                raise self.fail(f"bandwidth.by_width.{kind}", f"expected an object, got {_name(widths)}")
            for width, node in widths.items():
                if not is_entry(node):
                    raise self.fail(f"bandwidth.by_width.{kind}.{width}", "expected an entry {value, unit, ...}")
        for op, record in (data.get("instructions") or {}).items():
            key = f"instructions.{op}"
            if not isinstance(record, dict):
                raise self.fail(key, f"expected an object, got {_name(record)} {record!r:.80}")
            self.typed(record, "status", key, "str")
            self.typed(record, "reason", key, "str")
            for name in ("latency_s", "latency_cycles", "throughput_ops_per_s", "throughput_ops_per_cycle_per_sm"):
                if record.get(name) is not None and not is_entry(record[name]):
                    raise self.fail(f"{key}.{name}", f"expected an entry {{value, unit, interval, method, status}}, "
                                                     f"got {_name(record[name])} {record[name]!r:.80}")
        self.points(data.get("caches"), "caches", ("size_bytes", "latency_s", "latency_cycles"), ())
        for i, cache in enumerate(data.get("caches") or []):
            self.typed(cache, "level", f"caches.{i}", "positive")
            self.typed(cache, "name", f"caches.{i}", "str")
        self.points(data.get("latency_curve"), "latency_curve", ("bytes",), ("latency_s",))
        bandwidth = data.get("bandwidth") or {}
        self.points(bandwidth.get("working_set_curve"), "bandwidth.working_set_curve", ("bytes",), ("Bps",))
        self.points((data.get("tlb") or {}).get("curve"), "tlb.curve", ("pages",), ("packed_s", "spread_s"))
        self.points(bandwidth.get("stream_curve"), "bandwidth.stream_curve", ("streams", "tile_s", "row_s"),
                    ("ratio",))
        for curve in ("overlap_curve", "loopfree_curve"):
            self.points((data.get("concurrency") or {}).get(curve), f"concurrency.{curve}",
                        ("ops", "overlap"), ("seconds", "op_s", "work_items"))
        self.points((data.get("launch") or {}).get("points"), "launch.points", ("threads", "local"),
                    ("event_s", "engine_host_s", "round_trip_s"))
        for key, value in (data.get("method_versions") or {}).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise self.fail(f"method_versions.{key}", f"expected a version number >= 1, got {value!r:.80}")
        for i, name in enumerate(data.get("sections") or []):
            if not isinstance(name, str):
                raise self.fail(f"sections.{i}", f"expected a section name, got {_name(name)} {name!r:.80}")
        for i, item in enumerate(data.get("failed") or []):
            if not isinstance(item, dict):
                raise self.fail(f"failed.{i}", f"expected an object {{key, reason}}, got {_name(item)}")


def validate_profile(data: Any, path: str | Path = "<profile>") -> None:
    """Check ``data`` against the profile's schema; a UserError names the first key that is wrong."""
    _Validator(Path(path)).check(data)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load_profile(path: str | Path) -> Profile:
    """Read a profile and check it against the schema; a missing file, bad JSON, another schema or a wrong
    value (type, NaN, a negative bandwidth) is a UserError that names the key."""
    path = Path(path)
    text = read_text(path, "profile", MAX_PROFILE_BYTES, hint=" (run `gpuprofiler calibrate`)")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"cannot read profile {path}: not valid JSON: {exc.msg} (at line {exc.lineno}, column "
                        f"{exc.colno})") from None
    except (RecursionError, MemoryError):
        raise UserError(f"cannot read profile {path}: JSON nested too deeply") from None
    except ValueError as exc:  # NaN / Infinity, or an integer of more than 4300 digits
        raise UserError(f"cannot read profile {path}: {exc}") from None
    validate_profile(data, path)
    return Profile(data, path)
