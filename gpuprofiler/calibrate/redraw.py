"""A calibration's memory sections drawn a second time, minutes after the first; each figure kept from its faster draw.

On a shared machine one calibration is one draw of the machine's state. On a 2-vCPU VM's PoCL one
``calibrate --quick`` put the 1-8 MiB read bandwidth anywhere from 28 to 73 GB/s, a guarded stream's work-item at
1.0 or 2.7 ns, and the L2 knee anywhere from 380 to 610 KiB, with a few minutes between the draws. ``validate``
measures each size in visits minutes apart and models its fastest runs (the runs no other tenant slowed); the
profile that prices its models gets the same treatment: once the measuring is over, the latency, memory and
bandwidth sections are measured again and each microbenchmark's figures are kept from the draw in which they are
faster on geometric average (a microbenchmark's figures come from one draw: a curve with the knees read off it,
the kinds and widths timed in alternation, a guarded stream with the unguarded one it is compared with).
"""

from __future__ import annotations

import copy
import datetime as _dt
import math
from pathlib import Path
from typing import Any, Callable

from gpuprofiler.calibrate.driver import sections_done
from gpuprofiler.errors import GpuProfilerError
from gpuprofiler.profile.file import Profile

REDRAWN = ("latency", "memory", "bandwidth")
# where each section writes in the profile: top-level keys, or "X.*" for every key under X ("memory.dram_latency_s"
# is the latency section's key in the memory node)
_WRITES = {"latency": ("latency_curve", "latency_pattern", "caches", "local_memory", "latency_max_working_set_bytes",
                       "tlb", "memory.dram_latency_s"),
           "memory": ("memory.*", "concurrency.*"),
           "bandwidth": ("bandwidth.*",)}
# the figures one microbenchmark gives together (a curve and what is read off it; the kinds and widths timed in
# alternation), kept from one draw; every other key is a unit of its own
_UNITS = {
    "latency curve": ("latency_curve", "latency_pattern", "caches", "latency_max_working_set_bytes",
                      "memory.dram_latency_s"),
    "streams": ("bandwidth.by_width", "bandwidth.read_Bps", "bandwidth.write_Bps", "bandwidth.copy_Bps",
                "bandwidth.triad_Bps", "bandwidth.array_bytes", "bandwidth.peak_Bps", "bandwidth.layout"),
    "working-set curve": ("bandwidth.working_set_curve", "bandwidth.streaming_llc_bytes"),
    "stream curve": ("bandwidth.stream_curve", "bandwidth.streams"),
    "concurrency": ("concurrency.layouts", "concurrency.work_items", "concurrency.resident_capacity"),
    "overlap curve": ("concurrency.overlap_curve", "concurrency.overlap_method"),
    "loop-free curve": ("concurrency.loopfree_curve", "concurrency.loopfree_method"),
    "guarded stream": ("concurrency.unguarded_item_s", "concurrency.guarded_item_s", "concurrency.guard_skip_item_s"),
}
PLANNED = "draws_planned"  # set on a profile validate calibrated: its sections are to be drawn again
# a curve point's position, matched between the draws (the same sizes, operations, pages)
_POSITION = ("bytes", "ops", "pages", "n", "streams", "work_items")


def _get(data: dict[str, Any], path: str) -> Any:
    head, _, rest = path.partition(".")
    node = data.get(head)
    return node.get(rest) if rest and isinstance(node, dict) else (None if rest else node)


def _set(data: dict[str, Any], path: str, node: Any) -> None:
    head, _, rest = path.partition(".")
    if not rest:
        if node is None:
            data.pop(head, None)
        else:
            data[head] = node
    elif node is None:
        if isinstance(data.get(head), dict):
            data[head].pop(rest, None)
            if not data[head]:
                data.pop(head)
    else:
        if not isinstance(data.get(head), dict):
            data[head] = {}
        data[head][rest] = node


def section_paths(data: dict[str, Any], section: str) -> list[str]:
    """The keys (``X`` or ``X.Y``) a section wrote into a profile's data."""
    claimed = {k for s in _WRITES.values() for k in s if not k.endswith(".*")}
    out = []
    for key in _WRITES[section]:
        if key.endswith(".*"):
            node = data.get(key[:-2])
            out += [f"{key[:-2]}.{k}" for k in (node if isinstance(node, dict) else {})
                    if f"{key[:-2]}.{k}" not in claimed]
        elif _get(data, key) is not None:
            out.append(key)
    return out


def unit_of(path: str) -> str:
    """The microbenchmark whose figures ``path`` belongs to (kept from one draw with the rest of them)."""
    for unit, paths in _UNITS.items():
        if path in paths:
            return unit
    return "memory" if path.startswith("memory.") else path


def section_nodes(data: dict[str, Any], section: str) -> dict[str, Any]:
    """The figures ``section`` wrote into a profile's data, by key."""
    return {path: _get(data, path) for path in section_paths(data, section)}


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def speed_logs(a: Any, b: Any) -> list[float]:
    """log(speed of ``b`` / speed of ``a``) for every figure the two draws share: a figure in seconds (a time per
    operation, load or byte) is faster when smaller, one in B/s when larger; curves' points matched by position.
    Sizes, counts and derived ratios are not speeds and are left out."""
    out: list[float] = []
    if isinstance(a, dict) and isinstance(b, dict):
        if "value" in a and "unit" in a:
            ok = a.get("status", "ok") == "ok" and b.get("status", "ok") == "ok"
            if ok and a.get("unit") in ("s", "B/s") and _positive(a.get("value")) and _positive(b.get("value")):
                ratio = math.log(b["value"] / a["value"])
                out.append(ratio if a["unit"] == "B/s" else -ratio)
            return out
        for key in a.keys() & b.keys():
            if key.endswith(("_ci", "interval")):
                continue
            va, vb = a[key], b[key]
            if isinstance(va, (dict, list)):
                out += speed_logs(va, vb)
            elif (key.endswith("_s") or key in ("seconds", "Bps")) and _positive(va) and _positive(vb):
                ratio = math.log(vb / va)
                out.append(ratio if key.endswith("Bps") else -ratio)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for pa, pb in zip(a, b):
            if isinstance(pa, dict) and isinstance(pb, dict):
                if any(pa.get(k) != pb.get(k) for k in _POSITION if k in pa or k in pb):
                    continue  # not the same point (another sweep of sizes): not compared
                out += speed_logs(pa, pb)
    return out


def compare(first: dict[str, Any], second: dict[str, Any]) -> tuple[float, int]:
    """How much faster the second draw of a section is than the first: the mean log speed ratio over the figures
    both have (> 0: the second is faster), and how many figures that is."""
    logs = speed_logs(first, second)
    return (sum(logs) / len(logs) if logs else 0.0), len(logs)


def planned(profile: Profile) -> bool:
    """Whether the profile's memory sections are still to be drawn again (validate calibrated it, and no second
    draw is recorded yet)."""
    return bool(profile.data.get(PLANNED)) and not profile.data.get("redraws")


def redraw(calibrate: Callable[..., Profile], profile: Profile, path: Path, quick: bool,
           say: Callable[[str], None] = lambda m: None) -> Profile:
    """The profile with its latency, memory and bandwidth sections measured again (``calibrate(out, quick=, only=,
    resume=)``) and each kept from the faster draw; the comparison recorded under ``redraws`` and the profile saved
    to ``path``. A failed second draw leaves the first as it was."""
    data = profile.data
    errors = data.get("section_errors") if isinstance(data.get("section_errors"), dict) else {}
    sections = [s for s in REDRAWN if s in sections_done(data) and s not in errors]
    record: dict[str, Any] = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "first_date": data.get("created"), "sections": {}, "units": {}}
    if not sections:
        return profile
    base = copy.deepcopy({k: v for k, v in data.items() if k not in ("redraws", PLANNED)})
    for s in sections:
        for key in section_paths(data, s):
            _set(base, key, None)
    base["sections_done"] = [s for s in sections_done(data) if s not in sections]
    scratch = path.with_name(path.stem + ".second-draw.json")
    say(f"drawing the {', '.join(sections)} section(s) of the calibration again (each microbenchmark's faster draw "
        "is kept)")
    try:
        other = calibrate(scratch, quick=quick, only=tuple(sections), resume=Profile(base)).data
    except GpuProfilerError as exc:
        record["error"] = str(exc)
        say(f"the second draw failed ({exc}): the first calibration stands")
        other = None
    finally:
        scratch.unlink(missing_ok=True)
    kept = []
    for s in sections if other is not None else []:
        failed = (other.get("section_errors") or {}).get(s)
        record["sections"][s] = {"seconds": (other.get("section_seconds") or {}).get(s),
                                 **({"error": failed} if failed else {})}
        if failed:
            continue
        mine, theirs = section_nodes(data, s), section_nodes(other, s)
        units: dict[str, list[str]] = {}
        for key in dict.fromkeys([*mine, *theirs]):
            units.setdefault(unit_of(key), []).append(key)
        for unit, keys in units.items():
            first_nodes, second_nodes = {k: mine.get(k) for k in keys}, {k: theirs.get(k) for k in keys}
            score, count = compare(first_nodes, second_nodes)
            # figures only the second draw measured (the first failed or lacks them) are taken from it
            second = score > 0 if count else compare(second_nodes, second_nodes)[1] > compare(first_nodes,
                                                                                            first_nodes)[1]
            record["units"][unit] = {"section": s, "mean_log_speed_ratio": score, "figures": count,
                                     "kept": "second" if second else "first"}
            if second:
                for key in keys:
                    _set(data, key, copy.deepcopy(theirs.get(key)))
            if count:
                kept.append(f"{unit}: {'second' if second else 'first'} ({math.exp(score):.2f}x)")
    data["redraws"] = list(data.get("redraws") or []) + [record]
    data.pop(PLANNED, None)
    profile.save(path)
    if kept:
        say(f"kept each microbenchmark's faster draw (the second's speed over the first's): {'; '.join(kept)}")
    return profile


def describe(profile: Profile) -> str | None:
    """A line for a report: which draw each microbenchmark's figures come from (None where drawn once)."""
    draws = [r for r in profile.data.get("redraws") or [] if isinstance(r, dict)]
    if not draws:
        return None
    last = draws[-1]
    if last.get("error"):
        return f"the calibration's second draw failed ({last['error']}): its first draw prices the models"
    units = last.get("units") or {}
    second = [f"{u} ({math.exp(r.get('mean_log_speed_ratio', 0.0)):.2f}x faster)" if r.get("figures") else
              f"{u} (only the second measured it)" for u, r in units.items() if r.get("kept") == "second"]
    return (f"the calibration's {', '.join(last.get('sections') or {})} sections were drawn twice "
            f"({last.get('first_date')} and {last.get('date')}), each microbenchmark's figures kept from its faster "
            f"draw: {len(second)} of {len(units)} from the second" + (f" ({', '.join(second)})" if second else ""))
