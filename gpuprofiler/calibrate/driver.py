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
    transfer,
)
from gpuprofiler.microbench.common import Workspace, device_clock
from gpuprofiler.profile.file import SCHEMA, SCHEMA_VERSION, Profile, method_versions_present

SECTIONS = ("launch", "latency", "memory", "bandwidth", "transfer", "instructions")


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


def calibrate(backend: Any, out_path: Path, quick: bool = False, only: Sequence[str] = SECTIONS,
              progress: Callable[[str], None] | None = None) -> Profile:
    """Measure the selected sections on ``backend`` and save the profile to ``out_path`` after each one."""
    started = time.perf_counter()
    info = backend.info
    profile = Profile({
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "gpuprofiler_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "command": command_line(),
        "quick": quick, "sections": list(only), "device": info.to_dict(),
    })
    say = progress or (lambda m: None)
    say(f"calibrating {info.id} ({info.name}); sections: {', '.join(only)}; profile: {out_path}")
    data = profile.data
    clock = _clock(backend, quick)
    if backend.kind == "cuda" and "instructions" in only:
        clock = None  # the PTX benchmarks measure the SM clock from %clock64 against events
    workspace = Workspace(backend)
    timings: dict[str, float] = {}
    llc_measured = None

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
        data["duration_s"] = time.perf_counter() - started
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
            data["latency_curve"] = res["latency_curve"]
            data["latency_pattern"] = res["pattern"]
            data["caches"] = caches
            data.setdefault("memory", {})["dram_latency_s"] = dram
            data["local_memory"] = res["local_memory"]
            if caches:
                llc_measured = caches[-1]["size_bytes"]
            data["latency_max_working_set_bytes"] = res["max_working_set_bytes"]
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
            data["bandwidth"] = bandwidth.measure(backend, quick, progress, llc_bytes=llc_measured)
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

    data["duration_s"] = time.perf_counter() - started
    profile.save(out_path)
    return profile
