"""A calibration's memory sections drawn a second time, minutes after the first, each kept from the faster draw.

On a shared machine one calibration is one draw of the machine's state. On a 2-vCPU VM's PoCL one
``calibrate --quick`` put the 1-8 MiB read bandwidth anywhere from 28 to 73 GB/s, a guarded stream's work-item at
1.0 or 2.7 ns, and the L2 knee anywhere from 380 to 610 KiB, with a few minutes between the draws. ``validate``
measures each size in visits minutes apart and models its fastest runs (the runs no other tenant slowed); the
profile that prices its models gets the same treatment: once the measuring is over, the latency, memory and
bandwidth sections are measured again and, section by section, the draw whose figures are faster on geometric
average is kept whole (a section's figures come from one draw, so its knees and ratios stay its own).
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
# the profile's keys each section writes ("memory.dram_latency_s": the latency section's key in the memory node)
_KEYS = {"latency": ("latency_curve", "latency_pattern", "caches", "local_memory", "latency_max_working_set_bytes",
                     "tlb", "memory.dram_latency_s"),
         "memory": ("memory", "concurrency"),
         "bandwidth": ("bandwidth",)}
PLANNED = "draws_planned"  # set on a profile validate calibrated: its sections are to be drawn again
# a curve point's position, matched between the draws (the same sizes, operations, pages)
_POSITION = ("bytes", "ops", "pages", "n", "streams", "work_items")


def section_nodes(data: dict[str, Any], section: str) -> dict[str, Any]:
    """The figures ``section`` wrote into a profile's data, by key."""
    out = {}
    for key in _KEYS[section]:
        if key == "memory.dram_latency_s":
            node = (data.get("memory") or {}).get("dram_latency_s")
        elif key == "memory":
            node = {k: v for k, v in (data.get("memory") or {}).items() if k != "dram_latency_s"}
        else:
            node = data.get(key)
        if node is not None:
            out[key] = node
    return out


def _put(data: dict[str, Any], nodes: dict[str, Any]) -> None:
    """``section_nodes``' figures written into a profile's data."""
    for key, node in nodes.items():
        if key == "memory.dram_latency_s":
            data.setdefault("memory", {})["dram_latency_s"] = node
        elif key == "memory":
            kept = (data.get("memory") or {}).get("dram_latency_s")
            data["memory"] = dict(node, **({"dram_latency_s": kept} if kept is not None else {}))
        else:
            data[key] = node


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
                              "first_date": data.get("created"), "sections": {}}
    if not sections:
        return profile
    base = copy.deepcopy({k: v for k, v in data.items() if k not in ("redraws", PLANNED)})
    for s in sections:
        for key in _KEYS[s]:
            if key == "memory.dram_latency_s":
                (base.get("memory") or {}).pop("dram_latency_s", None)
            elif key == "memory":
                base["memory"] = {k: v for k, v in (base.get("memory") or {}).items() if k == "dram_latency_s"}
            else:
                base.pop(key, None)
    base["sections_done"] = [s for s in sections_done(data) if s not in sections]
    scratch = path.with_name(path.stem + ".second-draw.json")
    say(f"drawing the {', '.join(sections)} section(s) of the calibration again (the faster draw of each is kept)")
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
        score, count = compare(section_nodes(data, s), section_nodes(other, s)) if not failed else (0.0, 0)
        second = not failed and count > 0 and score > 0
        record["sections"][s] = {"mean_log_speed_ratio": score, "figures": count, "kept": "second" if second
                                 else "first", "seconds": (other.get("section_seconds") or {}).get(s),
                                 **({"error": failed} if failed else {})}
        if second:
            _put(data, copy.deepcopy(section_nodes(other, s)))
        kept.append(f"{s}: {'second' if second else 'first'} ({math.exp(score):.2f}x)")
    data["redraws"] = list(data.get("redraws") or []) + [record]
    data.pop(PLANNED, None)
    profile.save(path)
    if kept:
        say(f"kept the faster draw of each section (the second's speed over the first's): {'; '.join(kept)}")
    return profile


def describe(profile: Profile) -> str | None:
    """A line for a report: which draw of each section the profile holds (None where it was drawn once)."""
    draws = [r for r in profile.data.get("redraws") or [] if isinstance(r, dict)]
    if not draws:
        return None
    last = draws[-1]
    if last.get("error"):
        return f"the calibration's second draw failed ({last['error']}): its first draw prices the models"
    kept = "; ".join(f"{s} from the {r.get('kept')} (second over first: {math.exp(r.get('mean_log_speed_ratio', 0)):.2f}x "
                     f"faster over {r.get('figures')} figures)" for s, r in (last.get("sections") or {}).items())
    return (f"the calibration's {', '.join(last.get('sections') or {})} sections were drawn twice "
            f"({last.get('first_date')} and {last.get('date')}), each kept from its faster draw: {kept}")
