"""A calibration's gathered reads and streams drawn a second time once validate's measuring is over, each figure from
the fastest runs of both draws.

``bandwidth.gather_s`` and ``bandwidth.gather_llc_s`` price the lines no prefetcher brings (spmv_csr's gathered
vector, a column walk that crowds the L2's sets), from the fastest runs of two blocks a few seconds apart. On a
2-vCPU VM's PoCL a slow spell can hold both: E25's calibration read the far gather at 28.8 ms and the one the L3
serves at 4.1 ms, where E24's ten minutes before read 22.6 and 2.1 ms, and its spmv_csr and matmul_naive came out
+36% and +33% against -2% and +2%, while the kernels' own figures (the fastest runs of three visits minutes apart)
agreed within 5%. A second draw minutes later, once the measuring is over, gives each figure the same chance at
the machine's state the kernels' figures have: its far (or cached) reads and its near ones each at the fastest run
of either draw, as the first draw already takes the fastest of its two blocks. Of the bandwidth section only these
two figures are pooled: the faster draw of the whole memory sections (tried on E16-E19) changed the runs less than
they differ from each other.

The streams' times per work-item (``concurrency.*_item_s``, which max-plus prices a CPU's streaming regions with)
are drawn again with them and each kept from the faster draw: they are one short block each, and a slow spell
holds it as it holds a gather. E44's calibration read the guarded stream past the L3 at 1.50 ns a work-item, where
E42's and E43's read 1.20 and 1.28, and max-plus put copy, scale, triad and vadd 28-37% above their measured times
(the kernels' own figures within 11% of E42's and E43's); E44's measurements replayed with E43's concurrency figures
gave those four items' 36 cases 7.9% median error, against 25.8% with its own.
"""

from __future__ import annotations

import copy
import datetime as _dt
from pathlib import Path
from typing import Any, Callable

from gpuprofiler.calibrate.driver import sections_done
from gpuprofiler.errors import GpuProfilerError
from gpuprofiler.profile.file import Profile

FIGURES = ("gather_s", "gather_llc_s")
PLANNED = "gathers_planned"  # set on a profile validate calibrated: its gathers are to be drawn again
FAR = {"gather_s": "far_s", "gather_llc_s": "cached_s"}  # each figure's runs that carry the misses
STREAMS = ("unguarded_item_s", "guarded_item_s", "guard_skip_item_s", "unguarded_far_item_s", "guarded_far_item_s")
SECTIONS = ("memory", "bandwidth")  # drawn again: the streams are measured in the memory section


def _ok(node: Any) -> bool:
    return isinstance(node, dict) and node.get("status") == "ok" and isinstance(node.get("value"), (int, float)) \
        and node["value"] > 0


def planned(profile: Profile) -> bool:
    """Whether the profile's gathers are still to be drawn again (validate calibrated it, no second draw yet)."""
    return bool(profile.data.get(PLANNED)) and not profile.data.get("gather_draws")


def _runs(node: Any, key: str) -> tuple[float, float] | None:
    """A gathered-read figure's fastest far (or cached) and near runs, where it is ok and has both."""
    if not _ok(node):
        return None
    far, near = node.get(FAR[key]), node.get("near_s")
    ok = all(isinstance(v, (int, float)) and v > 0 for v in (far, near)) and far > near
    return (float(far), float(near)) if ok else None


def pooled(first: dict[str, Any], second: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The bandwidth node ``first`` with each of :data:`FIGURES` from the fastest runs of both draws: the far (or
    cached) and the near reads each at their faster draw's minimum, per read as the first draw counts them (its
    reads and the share of them that miss), the interval spanning both draws'; and where each run came from."""
    out, kept = copy.deepcopy(first), {}
    for key in FIGURES:
        a, b = _runs(first.get(key), key), _runs(second.get(key), key)
        if a is None and b is None:
            continue
        if a is None or b is None:
            node = copy.deepcopy(first.get(key) if b is None else second.get(key))
            kept[key] = "first" if b is None else "second"
            out[key] = node
            continue
        scale = (a[0] - a[1]) / first[key]["value"]  # reads x their share that misses
        far, near = min(a[0], b[0]), min(a[1], b[1])
        value = (far - near) / scale
        node = copy.deepcopy(first[key])
        los = [v for n in (first[key], second[key]) for v in (n.get("interval") or [])[:1]]
        his = [v for n in (first[key], second[key]) for v in (n.get("interval") or [])[1:2]]
        node.update(value=value, interval=[min(los + [value]), max(his + [value])], near_s=near)
        node[FAR[key]] = far
        if key == "gather_s":
            node["far_blocks_s"] = list(first[key].get("far_blocks_s") or []) + list(second[key].get(
                "far_blocks_s") or [])
        node["method"] = f"{first[key].get('method', '')}; pooled with a second draw after the measuring, the " \
                         "fastest runs of both"
        out[key] = node
        kept[key] = ("far from the " + ("first" if a[0] <= b[0] else "second") + ", near from the "
                     + ("first" if a[1] <= b[1] else "second"))
    return out, kept


def faster(first: dict[str, Any], second: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The concurrency node ``first`` with each of :data:`STREAMS` from the draw that measured it faster (each
    figure is its own kernel's fastest runs, so the faster draw's node is taken whole), and where each came
    from."""
    out, kept = copy.deepcopy(first), {}
    for key in STREAMS:
        a, b = _ok(first.get(key)), _ok(second.get(key))
        if not (a or b):
            continue
        take = "second" if b and (not a or second[key]["value"] < first[key]["value"]) else "first"
        node = copy.deepcopy((second if take == "second" else first)[key])
        if a and b:
            node["method"] = f"{node.get('method', '')}; the faster of two draws minutes apart"
            node["draws_s"] = [first[key]["value"], second[key]["value"]]
        out[key], kept[key] = node, take
    return out, kept


def regather(calibrate: Callable[..., Profile], profile: Profile, path: Path, quick: bool,
             say: Callable[[str], None] = lambda m: None) -> Profile:
    """The profile with its memory and bandwidth sections measured again (``calibrate(out, quick=, only=,
    resume=)``), its gathered-read figures from the fastest runs of both draws (:func:`pooled`) and its streams'
    times per work-item from the faster draw (:func:`faster`), the rest of the sections the first's; recorded
    under ``gather_draws`` and saved to ``path``. A failed second draw leaves the first as it was."""
    data = profile.data
    if "bandwidth" not in sections_done(data) or not isinstance(data.get("bandwidth"), dict):
        return profile
    record: dict[str, Any] = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "first_date": data.get("created")}
    again = tuple(s for s in SECTIONS if s in sections_done(data))
    base = copy.deepcopy({k: v for k, v in data.items() if k not in ("gather_draws", PLANNED, "bandwidth")})
    base["sections_done"] = [s for s in sections_done(data) if s not in again]
    scratch = path.with_name(path.stem + ".gathers.json")
    say("drawing the calibration's gathered reads and streams again (the fastest runs of both draws)")
    try:
        other = calibrate(scratch, quick=quick, only=again, resume=Profile(base)).data
        second = other.get("bandwidth") if isinstance(other.get("bandwidth"), dict) else {}
        streams = other.get("concurrency") if isinstance(other.get("concurrency"), dict) else {}
        errors = other.get("section_errors") or {}
        error = "; ".join(f"{s}: {errors[s]}" for s in again if errors.get(s))
    except GpuProfilerError as exc:
        second, streams, error = {}, {}, str(exc)
    finally:
        scratch.unlink(missing_ok=True)
    if error:
        record["error"] = error
        say(f"the second draw failed ({error}): the first calibration's figures stand")
    else:
        first_streams = data.get("concurrency") if isinstance(data.get("concurrency"), dict) else {}
        record["values_s"] = {k: [(data["bandwidth"].get(k) or {}).get("value"), (second.get(k) or {}).get("value")]
                              for k in FIGURES}
        data["bandwidth"], kept = pooled(data["bandwidth"], second)
        if "memory" in again and first_streams:
            record["values_s"].update({k: [(first_streams.get(k) or {}).get("value"),
                                           (streams.get(k) or {}).get("value")] for k in STREAMS})
            data["concurrency"], kept_streams = faster(first_streams, streams)
            kept.update(kept_streams)
        record["kept"] = kept
        say("drawn twice: " + "; ".join(f"{k}: {v} draw" for k, v in kept.items()))
    data["gather_draws"] = list(data.get("gather_draws") or []) + [record]
    data.pop(PLANNED, None)
    profile.save(path)
    return profile


def describe(profile: Profile) -> str | None:
    """A line for a report: which draw each gathered-read figure comes from (None where drawn once)."""
    draws = [r for r in profile.data.get("gather_draws") or [] if isinstance(r, dict)]
    if not draws:
        return None
    last = draws[-1]
    if last.get("error"):
        return (f"the calibration's gathered reads were drawn again and that failed ({last['error']}): the first "
                "draw stands")
    kept = "; ".join(f"{k}: {v}" for k, v in (last.get("kept") or {}).items())
    streams = any(k in STREAMS for k in last.get("kept") or {})
    return (f"the calibration's gathered reads{' and streams' if streams else ''} were drawn twice "
            f"({last.get('first_date')} and {last.get('date')}), each figure from the fastest runs of both draws "
            f"({kept})")
