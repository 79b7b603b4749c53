"""Calibration: run the microbenchmarks on a device and write its hardware profile.

Sections run in an order that lets later ones use earlier results (the latency sweep
finds the last-level cache that sizes the bandwidth arrays). The profile is saved after
every section, so an interrupted or failing calibration keeps what it measured.
"""

from __future__ import annotations

import datetime as _dt
import platform
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from gpuprofiler import __version__
from gpuprofiler.calibrate.caches import cache_figures
from gpuprofiler.errors import GpuProfilerError, UserError
from gpuprofiler.measure.storage import command_line
from gpuprofiler.microbench import (
    bandwidth,
    concurrency,
    instructions_cl,
    latency,
    launch,
    memory,
    ptx_instructions,
    tlb,
    transfer,
)
from gpuprofiler.microbench.common import Workspace, device_clock
from gpuprofiler.profile.file import SCHEMA, SCHEMA_VERSION, Profile, method_versions_present

SECTIONS = ("launch", "latency", "memory", "bandwidth", "transfer", "instructions")


def _reported_bytes(info, least: int, most: int) -> int | None:
    """The size of the highest data cache of levels ``least`` .. ``most`` that the operating system reports for a
    CPU device's host (``host_caches``), or None."""
    found = [c for c in (info.extra or {}).get("host_caches") or []
             if least <= c.get("level", 0) <= most and c.get("size_bytes")]
    return int(max(found, key=lambda c: c["level"])["size_bytes"]) if found else None


def _private_bytes(info, caches) -> int | None:
    """A CPU core's last private level (its L2): what the operating system reports, else the calibrated knee named
    L2; None on a GPU, whose L2 is shared."""
    if info.type != "cpu":
        return None
    reported = _reported_bytes(info, 2, 2)
    if reported:
        return reported
    for c in caches or []:
        if isinstance(c, dict) and c.get("name") == "L2" and c.get("size_bytes"):
            return int(c["size_bytes"])
    return None


def _shared_bytes(info, measured) -> int | None:
    """A CPU's last-level cache for the span of the gather it serves: what the operating system reports (the
    latency curve's last knee moves with the other tenants: 2.9 to 22.9 MiB of a 32 MiB L3 in one night's quick
    calibrations on a Zen 4 VM, and at 2.9 no span fits between it and the 1 MiB L2), else the calibrated one."""
    return _reported_bytes(info, 3, 99) or (int(measured) if measured else None)


def parse_only(text: str | None) -> tuple[str, ...]:
    if not text:
        return SECTIONS
    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise UserError(f"--only: unknown section(s) {', '.join(unknown)} (choose from {', '.join(SECTIONS)})")
    return tuple(s for s in SECTIONS if s in chosen)


def _clock(backend: Any, quick: bool) -> dict[str, Any]:
    if backend.info.type == "cpu" and backend.kind == "opencl":
        clock = instructions_cl.cpu_clock(backend, quick)
        clock["reported_hz"] = (backend.info.clock_mhz or 0) * 1e6
        return clock
    return device_clock(backend)


# what a section leaves in the profile, to tell the sections of a profile written before ``sections_done`` existed
_SECTION_KEYS = {"launch": ("launch",), "latency": ("caches", "latency_curve"), "memory": ("concurrency",),
                 "bandwidth": ("bandwidth",), "transfer": ("transfer",), "instructions": ("instructions",)}


def sections_done(data: dict[str, Any]) -> list[str]:
    """The sections a profile holds (finished, or failed and recorded in ``section_errors``): its
    ``sections_done``, else, for a profile written before that marker, those whose figures it has."""
    done = data.get("sections_done")
    if isinstance(done, list):
        return [s for s in SECTIONS if s in done]
    errors = data.get("section_errors") if isinstance(data.get("section_errors"), dict) else {}
    return [s for s in SECTIONS if s in errors or any(data.get(k) for k in _SECTION_KEYS[s])]


def missing_sections(data: dict[str, Any]) -> list[str]:
    """The sections a profile's calibration set out to measure (``sections``) and did not finish: an interrupted or
    killed calibration leaves them; empty for a complete profile."""
    planned = data.get("sections") if isinstance(data.get("sections"), list) else list(SECTIONS)
    done = set(sections_done(data))
    return [s for s in SECTIONS if s in planned and s not in done]


def calibrate(backend: Any, out_path: Path, quick: bool = False, only: Sequence[str] = SECTIONS,
              progress: Callable[[str], None] | None = None, resume: Profile | None = None) -> Profile:
    """Measure the selected sections on ``backend`` and save the profile to ``out_path`` after each one.

    The profile says how far it got: ``sections`` (what this calibration measures), ``sections_done`` (the sections
    finished so far, in the file after each one) and ``complete`` (true once every section is done), so a profile
    that an interruption or a kill left partial is never taken for a whole one (:func:`missing_sections`). With
    ``resume`` (a partial profile of the same device), only the sections it lacks among ``only`` are measured, into
    it; the clock and the cache sizes it has are used."""
    started = time.perf_counter()
    info = backend.info
    before_s = 0.0
    if resume is not None:
        profile = Profile(dict(resume.data))
        data = profile.data
        done = sections_done(data)
        only = tuple(s for s in only if s not in done)
        data["sections"] = [s for s in SECTIONS if s in set(data.get("sections") or []) | set(only)]
        data["sections_done"] = done
        data["complete"] = False
        before_s = float(data.get("duration_s") or 0.0)
        data["resumed"] = list(data.get("resumed") or []) + [{
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": command_line(),
            "sections": list(only)}]
    else:
        profile = Profile({
            "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "gpuprofiler_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "command": command_line(),
            "quick": quick, "sections": list(only), "sections_done": [], "complete": False,
            "device": info.to_dict(),
        })
        data = profile.data
    say = progress or (lambda m: None)
    say(f"calibrating {info.id} ({info.name}); sections: {', '.join(only) or 'none left'}; profile: {out_path}")
    clock = data.get("clock") if resume is not None and (data.get("clock") or {}).get("hz") else None
    if clock is None:
        clock = _clock(backend, quick)
    if backend.kind == "cuda" and "instructions" in only:
        clock = None  # the PTX benchmarks measure the SM clock from %clock64 against events
    workspace = Workspace(backend)
    timings: dict[str, float] = dict(data.get("section_seconds") or {}) if resume is not None else {}
    caches = data.get("caches") if resume is not None else None
    llc_measured = caches[-1].get("size_bytes") if isinstance(caches, list) and caches and isinstance(
        caches[-1], dict) else None

    def run(name: str, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        try:
            fn()
        except GpuProfilerError as exc:
            data.setdefault("section_errors", {})[name] = str(exc)
            say(f"{name}: failed: {exc}")
        timings[name] = time.perf_counter() - t0
        data["method_versions"] = method_versions_present(data)
        data["section_seconds"] = timings
        data["duration_s"] = before_s + time.perf_counter() - started
        data["sections_done"] = [s for s in SECTIONS if s in set(data.get("sections_done") or []) | {name}]
        data["complete"] = not missing_sections(data)
        profile.save(out_path)
        say(f"{name}: done in {timings[name]:.1f} s")

    if clock is not None:
        data["clock"] = clock
    hz = clock["hz"] if clock else None

    if "instructions" in only and backend.kind == "cuda":
        def ptx_section() -> None:
            res = ptx_instructions.measure(backend, quick=quick, progress=progress)
            if (res.get("clock") or {}).get("hz"):
                data["clock"] = res["clock"]
            else:
                data["clock"] = _clock(backend, quick)
                data["clock"]["sm_clock_failure"] = res.get("clock")
            data["instructions"] = res["instructions"]
        run("instructions", ptx_section)
        hz = data.get("clock", {}).get("hz")

    if "launch" in only:
        def launch_section() -> None:
            data["launch"] = launch.measure(backend, quick, progress)
        run("launch", launch_section)

    if "latency" in only:
        def latency_section() -> None:
            nonlocal llc_measured
            res = latency.measure(backend, quick, progress, clock_hz=hz, workspace=workspace)
            caches, dram = cache_figures(res, hz, device_type=info.type)
            bad = {p["bytes"]: p["reason"] for p in res.get("latency_curve_failed", [])}
            for point in res["latency_curve"]:  # a latency below one cycle is a failed measurement, not a value
                if point["bytes"] in bad:
                    point.update(status="failed", reason=bad[point["bytes"]])
            data["latency_curve"] = res["latency_curve"]
            data["latency_pattern"] = res["pattern"]
            data["caches"] = caches
            data.setdefault("memory", {})["dram_latency_s"] = dram
            data["local_memory"] = res["local_memory"]
            if caches:
                llc_measured = caches[-1]["size_bytes"]
            data["latency_max_working_set_bytes"] = res["max_working_set_bytes"]
            data["tlb"] = tlb.measure(backend, quick, progress, workspace.rng)
        run("latency", latency_section)

    if "memory" in only:
        def memory_section() -> None:
            top = data.get("latency_max_working_set_bytes")
            data.setdefault("memory", {}).update(memory.measure(backend, quick, progress, clock_hz=hz,
                                                                workspace=workspace, array_bytes=top))
            data["concurrency"] = concurrency.measure(backend, quick, progress)
        run("memory", memory_section)

    if "bandwidth" in only:
        def bandwidth_section() -> None:
            data["bandwidth"] = bandwidth.measure(backend, quick, progress, llc_bytes=llc_measured,
                                                  private_bytes=_private_bytes(info, data.get("caches")),
                                                  shared_bytes=_shared_bytes(info, llc_measured))
        run("bandwidth", bandwidth_section)

    if "transfer" in only:
        def transfer_section() -> None:
            data["transfer"] = transfer.measure(backend, quick, progress)
        run("transfer", transfer_section)

    if "instructions" in only and backend.kind == "opencl":
        def instructions_section() -> None:
            reference = "int_add" if str(data.get("clock", {}).get("source", "")).startswith("dependent int add") else None
            data["instructions"] = instructions_cl.measure(backend, quick, progress, clock_hz=hz,
                                                           clock_reference=reference)
        run("instructions", instructions_section)

    data["duration_s"] = before_s + time.perf_counter() - started
    data["complete"] = not missing_sections(data)
    profile.save(out_path)
    return profile
