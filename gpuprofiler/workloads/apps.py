"""Multi-kernel programs ("apps"): load ``run(ctx, n)`` from a Python file and measure it per phase.

An app file defines ``run(ctx, n)`` and may define ``NAME``, ``SMALL`` and
``TARGET`` (default sizes) and ``check(n, result)``, which raises
AssertionError when the result returned by ``run`` is wrong.
"""

from __future__ import annotations

import importlib.util
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

import numpy as np

from gpuprofiler.device.base import Backend
from gpuprofiler.errors import CheckError, GpuProfilerError, UserError
from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import TimingPolicy
from gpuprofiler.measure.records import PHASE_METRIC, record
from gpuprofiler.measure.stats import model_value
from gpuprofiler.workloads.wrapper import Recorder, RunContext, launch_overhead


class App:
    """A loaded app file."""

    def __init__(self, path: Path, module: ModuleType):
        self.path = path
        self.module = module
        self.name = str(getattr(module, "NAME", path.stem))
        self.small = list(getattr(module, "SMALL", []))
        self.target = list(getattr(module, "TARGET", []))
        self.run_fn = module.run
        self.check_fn = getattr(module, "check", None)

    def call(self, what: str, fn: Callable, *args) -> Any:
        """Call into the app; its own bugs become a UserError naming the file and line, not a traceback."""
        try:
            return fn(*args)
        except GpuProfilerError:
            raise
        except AssertionError as exc:
            raise CheckError(f"{self.path}: check failed: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - user code can raise anything
            raise UserError(f"{self.path}: {what} raised {type(exc).__name__}{line_in(exc, self.path)}: "
                            f"{exc}") from None


def line_in(exc: BaseException, path: Path) -> str:
    """" (line N)": the last line of the user's file ``path`` in the exception's traceback, else ""."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return f" (line {frames[-1].lineno})" if frames else ""


def load_module(path: str | Path, kind: str) -> tuple[Path, ModuleType]:
    """The user's Python file (an app, a loop nest) executed as a module; a missing file or one that raises is a
    UserError naming it."""
    path = Path(path).resolve()
    if not path.is_file():
        raise UserError(f"{kind} file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"gpuprofiler_{kind}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{path}: cannot load the {kind}: {type(exc).__name__}: {exc}") from None
    return path, module


def load_app(path: str | Path) -> App:
    path, module = load_module(path, "app")
    if not callable(getattr(module, "run", None)):
        raise UserError(f"{path}: an app must define run(ctx, n)")
    return App(path, module)


def measure_app(backend: Backend, app: App, sizes: Iterable[int], policy: TimingPolicy | None = None,
                check: bool = True, on_record: Callable[[dict], None] | None = None,
                progress: Callable[[str], None] | None = None, interleave: bool = True,
                on_size: Callable[[int, list[dict]], None] | None = None,
                on_stage: Callable[[str, list[int]], None] | None = None,
                on_timeline: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Run the app repeatedly at each size; one record per phase per size (device event times summed per run),
    each passed to ``on_record`` as soon as it is built, and the records of one size together to ``on_size``;
    ``on_stage("time", sizes)`` is told which sizes are about to run.

    With ``interleave`` the sizes run in rounds, one run of each size per round (each run allocates and frees
    its own buffers), so that a shared device's changing load falls on every size alike; the budget is the
    policy's per size. The app may use every device of ``backend.peers``; ``on_timeline(size, timeline)`` gets, at
    each size, the timed run whose host time is nearest the runs' median, operation by operation
    (:func:`timeline`)."""
    policy = policy or TimingPolicy()
    overhead = launch_overhead(backend)
    sizes = [int(s) for s in sizes]
    groups = [sizes] if interleave and sizes else [[s] for s in sizes]
    records = []
    for group in groups:
        runs: dict[int, list[dict[str, dict[str, Any]]]] = {size: [] for size in group}
        lines: dict[int, list[tuple[Recorder, tuple[int, int]]]] = {size: [] for size in group}
        checked: dict[int, bool] = {size: False for size in group}

        def once_at(size: int) -> Callable[[], float]:
            def once() -> float:
                recorder = Recorder()
                first = not runs[size]
                ctx = RunContext(backend, recorder, app.path.parent, poison=first and check, peers=backend.peers)
                t0 = time.perf_counter_ns()
                result = app.call("run", app.run_fn, ctx, size)
                ctx.finish()
                t1 = time.perf_counter_ns()
                if on_timeline:  # the timeline is built for one run, after the timing; each run kept as numbers
                    recorder.settle()
                    lines[size].append((recorder, (t0, t1)))
                if first and check and app.check_fn is not None:
                    app.call("check", app.check_fn, size, result)
                    checked[size] = True
                phases = recorder.phase_times()
                runs[size].append(phases)
                return sum(p["total_s"] for p in phases.values())
            return once

        if progress:
            progress(f"{app.name}: running size{'s' if len(group) > 1 else ''} {', '.join(map(str, group))}"
                     + (" in alternation" if len(group) > 1 else ""))
        if on_stage:
            on_stage("time", list(group))
        timings = Engine(policy).interleave([once_at(size) for size in group], budget_s=policy.budget_s * len(group))
        for size, timing in zip(group, timings):
            if on_timeline:
                timed = lines[size][len(timing.warmup_s):]
                lengths = np.array([t1 - t0 for _, (t0, t1) in timed], float)
                recorder, span = timed[int(np.argmin(np.abs(lengths - np.median(lengths))))]
                on_timeline(size, timeline(app, size, backend, recorder, span))
            mine = _phase_records(app, size, runs[size][len(timing.warmup_s):], timing, policy, overhead,
                                  checked[size], [s for s in group if s != size])
            for rec in mine:
                records.append(rec)
                if on_record:
                    on_record(rec)
            if on_size:
                on_size(size, mine)
    return records


def timeline(app: App, size: int, backend: Backend, recorder: Recorder, host_ns: tuple[int, int]) -> dict:
    """One run of the app as plain data: its devices, its operations in issue order (:meth:`Recorder.timeline`)
    and the host clock at its start and end."""
    return {"app": app.name, "path": str(app.path), "size": int(size),
            "devices": [peer.info.to_dict() for peer in backend.peers],
            "host_start_ns": host_ns[0], "host_end_ns": host_ns[1], "run_s": (host_ns[1] - host_ns[0]) * 1e-9,
            "operations": recorder.timeline()}


def _phase_records(app: App, size: int, timed: list[dict[str, dict[str, Any]]], timing, policy: TimingPolicy,
                   overhead: dict, checked: bool, interleaved_with: list[int]) -> list[dict]:
    """One record per phase of the timed runs at one size, largest phase first."""
    totals = np.array(timing.device_s)
    names = sorted({name for run in timed for name in run},
                   key=lambda name: -np.median([run.get(name, {"total_s": 0.0})["total_s"] for run in timed]))
    out = []
    for name in names:
        per_run = [run.get(name, {"total_s": 0.0, "calls": 0})["total_s"] for run in timed]
        calls = [run.get(name, {"calls": 0})["calls"] for run in timed]
        info = next(run[name] for run in timed if name in run)
        works = {run[name]["work"] for run in timed if name in run}
        median = float(np.median(per_run))
        out.append(record("app", app.name, name, size, per_run, PHASE_METRIC, str(app.path), policy.confidence,
                          phase_kind=info["kind"], kernels=info["kernels"],
                          calls=int(np.median(calls)), mean_call_s=median / max(1, int(np.median(calls))),
                          # what the phase moved or launched per run, counted by the wrapper (None: mixed or unknown)
                          work=works.pop() if len(works) == 1 else None, work_unit=info["work_unit"],
                          share=float(np.median(np.array(per_run) / totals)),
                          run_median_s=float(np.median(totals)), run_model_s=model_value(totals),
                          run_host_median_s=timing.host.median, run_host_model_s=timing.host.model,
                          stop_reason=timing.stop_reason,
                          interleaved_with=interleaved_with,
                          wrapper_overhead_per_launch_s=overhead["overhead_per_launch_s"], checked=checked))
    return out
