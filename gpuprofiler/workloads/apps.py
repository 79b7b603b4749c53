"""Multi-kernel programs ("apps"): load ``run(ctx, n)`` from a Python file and measure it per phase.

An app file defines ``run(ctx, n)`` and may define ``NAME``, ``SMALL`` and
``TARGET`` (default sizes) and ``check(n, result)``, which raises
AssertionError when the result returned by ``run`` is wrong.
"""

from __future__ import annotations

import importlib.util
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
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(self.path)]
            where = f" (line {frames[-1].lineno})" if frames else ""
            raise UserError(f"{self.path}: {what} raised {type(exc).__name__}{where}: {exc}") from None


def load_app(path: str | Path) -> App:
    path = Path(path).resolve()
    if not path.is_file():
        raise UserError(f"app file not found: {path}")
    spec = importlib.util.spec_from_file_location(f"gpuprofiler_app_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{path}: cannot load the app: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "run", None)):
        raise UserError(f"{path}: an app must define run(ctx, n)")
    return App(path, module)


def measure_app(backend: Backend, app: App, sizes: Iterable[int], policy: TimingPolicy | None = None,
                check: bool = True, on_record: Callable[[dict], None] | None = None,
                progress: Callable[[str], None] | None = None) -> list[dict]:
    """Run the app repeatedly at each size; one record per phase per size (device event times summed per run)."""
    policy = policy or TimingPolicy()
    overhead = launch_overhead(backend)
    records = []
    for size in sizes:
        runs: list[dict[str, dict[str, Any]]] = []
        checked = False

        def once() -> float:
            nonlocal checked
            recorder = Recorder()
            first = not runs
            ctx = RunContext(backend, recorder, app.path.parent, poison=first and check)
            result = app.call("run", app.run_fn, ctx, int(size))
            backend.finish()
            if first and check and app.check_fn is not None:
                app.call("check", app.check_fn, int(size), result)
                checked = True
            phases = recorder.phase_times()
            runs.append(phases)
            return sum(p["total_s"] for p in phases.values())

        if progress:
            progress(f"{app.name}: size {size}: running")
        timing = Engine(policy).sample(once)
        timed = runs[len(timing.warmup_s):]
        totals = np.array(timing.device_s)
        names = sorted({name for run in timed for name in run},
                       key=lambda name: -np.median([run.get(name, {"total_s": 0.0})["total_s"] for run in timed]))
        for name in names:
            per_run = [run.get(name, {"total_s": 0.0, "calls": 0})["total_s"] for run in timed]
            calls = [run.get(name, {"calls": 0})["calls"] for run in timed]
            info = next(run[name] for run in timed if name in run)
            works = {run[name]["work"] for run in timed if name in run}
            median = float(np.median(per_run))
            rec = record("app", app.name, name, size, per_run, PHASE_METRIC, str(app.path), policy.confidence,
                         phase_kind=info["kind"], kernels=info["kernels"],
                         calls=int(np.median(calls)), mean_call_s=median / max(1, int(np.median(calls))),
                         # what the phase moved or launched per run, counted by the wrapper (None: mixed or unknown)
                         work=works.pop() if len(works) == 1 else None, work_unit=info["work_unit"],
                         share=float(np.median(np.array(per_run) / totals)),
                         run_median_s=float(np.median(totals)), run_host_median_s=timing.host.median,
                         stop_reason=timing.stop_reason,
                         wrapper_overhead_per_launch_s=overhead["overhead_per_launch_s"], checked=checked)
            records.append(rec)
            if on_record:
                on_record(rec)
    return records
