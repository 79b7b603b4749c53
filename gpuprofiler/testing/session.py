"""What one pytest session of GPU performance tests holds: its devices (opened once), the measurements its tests
made, their budgets' verdicts, and the baselines it reads and writes.

Kernel specs, builtins and apps are measured by the package's timing engine in the device's worker process
(:func:`gpuprofiler.workloads.isolated.measure`: a crashing runtime fails the test, not pytest); a user's callable
enqueues its kernels through the device's backend in this process, and is timed by the same engine from the
events of the launches it makes. Every result carries the modelling figure (the 10th percentile of the device
times), its interval, the median and every raw sample. A kernel that is refused, does not compile, fails its check or
crashes its worker fails its own test only, and is listed with the stage (``GpuSession.failures``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gpuprofiler import __version__
from gpuprofiler.errors import GpuProfilerError, ItemFailure, UserError, at_stage, stage, stage_of
from gpuprofiler.measure.engine import Engine
from gpuprofiler.measure.policy import MEASURE
from gpuprofiler.measure.stats import MODEL_STATISTIC, summarize
from gpuprofiler.testing import baseline as bl
from gpuprofiler.testing.decide import MIN_SAMPLES, Comparison, compare
from gpuprofiler.testing.options import Options, parse_fraction

BUDGET_KEYS = ("max_s", "max_slowdown", "predicted_within", "model")


class Skip(GpuProfilerError):
    """The test cannot run here (no device, no CUDA, no profile): pytest skips it with this reason."""


class Failed(GpuProfilerError):
    """A budget the test set is exceeded, or the test used the plugin wrongly: the test fails with this message."""


@dataclass
class GpuDevice:
    """A device the tests run on: its id and name, and its backend, opened once per session."""

    id: str
    name: str
    info: Any
    backend: Any

    @property
    def slug(self) -> str:
        return self.info.slug

    @property
    def kind(self) -> str:
        return self.info.backend


@dataclass
class GpuResult:
    """One measurement a test made: the modelling figure with its interval, the median, every raw sample, and what
    the test's budgets made of it."""

    test: str
    kernel: str
    size: int | None
    device_id: str
    device_name: str
    samples_s: list[float]
    figure_s: float
    low_s: float
    high_s: float
    median_s: float
    statistic: str = MODEL_STATISTIC
    baseline_s: float | None = None
    comparison: Comparison | None = None
    baseline_note: str = ""
    predicted_s: float | None = None
    predicted_low_s: float | None = None
    predicted_high_s: float | None = None
    model: str | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str = ""  # a budget that could not be judged here (the test was skipped)

    @property
    def interval(self) -> tuple[float, float]:
        return self.low_s, self.high_s

    @property
    def verdict(self) -> str:
        if self.failures:
            return "FAIL"
        if self.skipped:
            return "skipped"
        if self.comparison is not None:
            return self.comparison.verdict
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {"test": self.test, "kernel": self.kernel, "size": self.size, "device_id": self.device_id,
                "device_name": self.device_name, "statistic": self.statistic, "figure_s": self.figure_s,
                "interval_s": [self.low_s, self.high_s], "median_s": self.median_s,
                "baseline_s": self.baseline_s, "baseline_note": self.baseline_note or None,
                "change": None if c is None else c.change,
                "change_bounds": None if c is None else [c.low - 1.0, c.high - 1.0],
                "comparison": None if c is None else c.verdict,
                "predicted_s": self.predicted_s, "predicted_interval_s": (
                    None if self.predicted_s is None else [self.predicted_low_s, self.predicted_high_s]),
                "model": self.model, "verdict": self.verdict, "failures": self.failures, "notes": self.notes,
                "skipped": self.skipped or None,
                "samples_s": self.samples_s}


def _settable(spec) -> set[str]:
    """The names a spec's expressions read (its params and defines, and what its arguments and launch refer to),
    less its size: what ``set=`` may change."""
    from gpuprofiler.workloads.safe_eval import names_in

    exprs = [a.value for a in spec.args if a.value is not None]
    exprs += [x for a in spec.args if a.shape for x in a.shape] + list(spec.global_size) + list(spec.local_size or [])
    exprs += list(spec.params.values()) + list(spec.defines.values())
    found = set(spec.params) | set(spec.defines)
    for e in exprs:
        try:
            found |= names_in(e) if isinstance(e, str) else set()
        except UserError:
            continue
    return found - {spec.size}


def _fraction(value, what: str) -> float:
    """A budget given as a fraction (0.1) or a percentage string ("10%")."""
    try:
        return parse_fraction(value)
    except ValueError as exc:
        raise Failed(f"gpu_perf({what}=...): {exc}") from None


class _Recorder:
    """A backend whose launches are remembered (their events summed as the run's device time); everything else is
    the backend's own."""

    def __init__(self, backend):
        self._backend = backend
        self.events: list[Any] = []

    def launch(self, *args, **kwargs):
        event = self._backend.launch(*args, **kwargs)
        self.events.append(event)
        return event

    def __getattr__(self, name):
        return getattr(self._backend, name)


def _device_seconds(value, events) -> float:
    """What a user's callable returned (seconds, an event, a list of either) or, for None, its launches' events."""
    if value is None:
        if not events:
            raise Failed("the callable launched nothing through the backend it was given (gpu_measure passes it a "
                         "backend: call backend.launch(...), or return the device seconds or the events)")
        value = list(events)
    total = 0.0
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if hasattr(v, "seconds"):
            total += float(v.seconds())
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            total += float(v)
        else:
            raise Failed(f"the callable returned {value!r}: return None (its launches are timed), device seconds "
                         "(> 0), an event or a list of them")
    return total


class GpuSession:
    """The devices, results and baselines of one pytest session."""

    def __init__(self, options: Options):
        self.options = options
        self.results: list[GpuResult] = []
        self.failures: list[tuple[str, ItemFailure, int | None]] = []  # (test, kernel's failure, size)
        self._devices: dict[str, GpuDevice] = {}
        self._profiles: dict[str, Any] = {}
        self._baselines: dict[str, dict[str, Any]] | None = None
        self.baseline_source = ""
        self.notes_at_end: list[str] = []

    # ---- devices and profiles ----------------------------------------------------------------------------------
    def device(self, requested: str) -> GpuDevice:
        """The device ``requested`` ("default": first CUDA GPU, else first OpenCL GPU, else PoCL), opened once."""
        from gpuprofiler.device import cuda_available, default_device_id, open_backend

        if requested in self._devices:
            return self._devices[requested]
        if requested.startswith("cuda") and not cuda_available():
            raise Skip(f"device {requested}: CUDA needs pycuda (pip install 'gpuprofiler[cuda]' where the CUDA "
                       "toolkit is)")
        try:
            device_id = default_device_id() if requested == "default" else requested
        except UserError as exc:
            raise Skip(f"no GPU device here: {exc}") from None
        try:
            backend = open_backend(device_id)
        except UserError as exc:
            raise Failed(f"device {requested!r}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a driver that cannot open the device: say which and why
            raise Failed(f"device {device_id}: cannot be opened: {type(exc).__name__}: {exc}") from None
        dev = GpuDevice(backend.info.id, backend.info.name, backend.info, backend)
        self._devices[requested] = dev
        return dev

    def profile(self, device: GpuDevice, required: bool = True):
        """The device's hardware profile (``--gpu-profile``, else the stored one); without one, Skip saying how to
        make it (or None where not ``required``)."""
        from gpuprofiler.profile.locate import choose_profile

        if device.id not in self._profiles:
            try:
                self._profiles[device.id] = choose_profile(self.options.profile, device.info)
            except UserError as exc:
                raise Failed(f"--gpu-profile: {exc}") from None
        choice = self._profiles[device.id]
        if choice.profile is None and required:
            raise Skip(choice.message)
        return choice.profile

    def close(self) -> None:
        from gpuprofiler.workloads import isolated

        for dev in self._devices.values():
            try:
                dev.backend.close()
            except Exception:  # noqa: BLE001 - closing at the session's end must not hide the tests' outcome
                pass
        self._devices.clear()
        isolated.close_all()

    # ---- measuring -----------------------------------------------------------------------------------------------
    def measure(self, test: str, device: GpuDevice, budgets: dict[str, Any], target: Any, size: int | None = None,
                name: str | None = None, check: bool = True, overrides: dict[str, Any] | None = None,
                budget_s: float | None = None) -> GpuResult:
        """Time ``target`` (a spec or app path, a builtin's name, or a callable taking the backend) at ``size`` on
        ``device``, then hold the result to the test's budgets (:meth:`judge`)."""
        policy = MEASURE.but(budget_s=budget_s if budget_s is not None else self.options.budget_s)
        item = None
        if callable(target) and not isinstance(target, (str, Path)):
            kernel = name or getattr(target, "__name__", None) or test
        else:
            item = self._load(target, overrides)
            kernel = name or item.name
            size = self._size(item, size)
        try:
            samples = (self._time_callable(device, target, policy) if item is None else
                       self._time_item(device, item, size, policy, check, overrides))
        except Failed as exc:
            if exc.stage:  # the kernel failed (not the test's use of the plugin): listed at the session's end
                self.failures.append((test, ItemFailure(kernel, exc.stage, getattr(exc, "reason", str(exc)),
                                                        device.id), size))
            raise
        s = summarize(samples)
        result = GpuResult(test, kernel, size, device.id, device.name, [float(x) for x in samples], s.model,
                           s.model_ci_low, s.model_ci_high, s.median)
        self.results.append(result)
        self.judge(result, device, budgets, item, overrides, policy)
        return result

    @staticmethod
    def _load(target, overrides):
        from gpuprofiler.workloads.apps import load_app
        from gpuprofiler.workloads.builtin import resolve
        from gpuprofiler.workloads.spec import load_spec

        try:
            path = resolve(str(target))
            if path.suffix == ".py":
                if overrides:
                    raise UserError("set= applies to kernel specs, not apps")
                return load_app(path)
            spec = load_spec(path)
        except UserError as exc:
            raise Failed(str(exc)) from None
        unknown = sorted(set(overrides or {}) - _settable(spec))
        if unknown:
            raise Failed(f"{spec.name}: set= names {', '.join(unknown)}, which the spec does not use (it uses: "
                         f"{', '.join(sorted(_settable(spec))) or 'none'})")
        return spec

    @staticmethod
    def _size(item, size) -> int:
        if size is None:
            small = list(getattr(item, "small", []) or [])
            if not small:
                raise Failed(f"{item.name}: give gpu_measure a size (the spec has no small sizes to default to)")
            return int(max(small))
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise Failed(f"{item.name}: size must be a whole number of at least 1, got {size!r}")
        return int(size)

    def _records(self, device: GpuDevice, item, sizes: list[int], policy, check: bool, overrides) -> list[dict]:
        from gpuprofiler.workloads import isolated
        from gpuprofiler.workloads.bounds import check_sizes
        from gpuprofiler.workloads.spec import KernelSpec

        try:
            if isinstance(item, KernelSpec):
                with stage("bounds", UserError):
                    check_sizes(item, sizes, overrides)
            return isolated.measure(device.backend, item, sizes, policy, check=check, overrides=overrides or None,
                                    bounds=False, isolate=self.options.isolate)
        except GpuProfilerError as exc:
            failed = at_stage(Failed(f"{item.name} ({stage_of(exc)}): {exc}"), stage_of(exc))
            failed.reason = str(exc)
            raise failed from None

    def _time_item(self, device: GpuDevice, item, size: int, policy, check: bool, overrides) -> np.ndarray:
        records = [r for r in self._records(device, item, [size], policy, check, overrides) if r["size"] == size]
        if not records:
            raise Failed(f"{item.name}: size {size} gave no measurement")
        runs = [np.asarray(r["samples_s"], dtype=float) for r in records]
        return np.sum(runs, axis=0) if len(runs) > 1 else runs[0]  # an app: its phases summed run by run

    @staticmethod
    def _time_callable(device: GpuDevice, fn: Callable, policy) -> np.ndarray:
        recorder = _Recorder(device.backend)

        def once() -> float:
            recorder.events.clear()
            hooks = device.backend.launch_hooks()
            for hook in hooks:
                hook.before_launch()
            value = fn(recorder)
            for hook in reversed(hooks):
                hook.after_launch()
            device.backend.finish()
            return _device_seconds(value, recorder.events)

        try:
            timing = Engine(policy).sample(once)
        except (Failed, Skip):
            raise
        except GpuProfilerError as exc:
            raise at_stage(Failed(str(exc)), stage_of(exc)) from None
        return np.asarray(timing.device_s, dtype=float)

    # ---- budgets -------------------------------------------------------------------------------------------------
    def judge(self, result: GpuResult, device: GpuDevice, budgets: dict[str, Any], item, overrides, policy) -> None:
        """Hold ``result`` to an absolute budget (``max_s``), the saved baseline (``--gpu-compare``; the test's
        ``max_slowdown`` or ``--gpu-compare-fail``) and the models (``predicted_within``); failures are kept on
        the result and raised together."""
        unknown = set(budgets) - set(BUDGET_KEYS)
        if unknown:
            raise Failed(f"gpu_perf: unknown budget(s) {', '.join(sorted(unknown))} (known: {', '.join(BUDGET_KEYS)})")
        max_s = budgets.get("max_s")
        if max_s is not None:
            if not (isinstance(max_s, (int, float)) and max_s > 0):
                raise Failed(f"gpu_perf(max_s=...) must be a positive number of seconds, got {max_s!r}")
            # the figure's interval must lie below the budget: a figure only just under it is not yet a pass
            if result.low_s > max_s:
                result.failures.append(f"{result.kernel} size {result.size}: {result.statistic} "
                                       f"{result.figure_s * 1e3:.4g} ms [{result.low_s * 1e3:.4g}, "
                                       f"{result.high_s * 1e3:.4g}] exceeds the budget max_s = {max_s * 1e3:.4g} ms")
        skipped = []  # a budget that cannot be judged here skips the test, unless another one failed
        steps = []
        if self.options.compare is not None:
            steps.append(lambda: self._compare(result, device, budgets.get("max_slowdown")))
        within = budgets.get("predicted_within")
        if within is not None:
            steps.append(lambda: self._predict(result, device, item, _fraction(within, "predicted_within"),
                                               str(budgets.get("model", "fractal")), overrides, policy))
        for step in steps:
            try:
                step()
            except Skip as exc:
                skipped.append(str(exc))
                result.notes.append(str(exc))
        if result.failures:
            raise Failed("\n".join(result.failures))
        if skipped:
            result.skipped = "; ".join(skipped)
            raise Skip(result.skipped)

    def baselines(self) -> dict[str, dict[str, Any]]:
        if self._baselines is None:
            d = self.options.directory
            name = self.options.compare
            path = bl.latest(d) if name == "" else bl.path_for(d, name)
            if path is None or not path.exists():
                where = f"in {d}" if name == "" else f"at {path}"
                raise Skip(f"no saved baseline {where}: run once with --gpu-save NAME first")
            self._baselines = bl.load(path)
            self.baseline_source = str(path)
        return self._baselines

    def _compare(self, result: GpuResult, device: GpuDevice, max_slowdown) -> None:
        try:
            entries = self.baselines()
        except UserError as exc:
            raise Failed(str(exc)) from None
        found = bl.find(entries, device.slug, result.kernel, result.size, self.baseline_source)
        result.baseline_note = found.note
        if found.entry is None:
            raise Skip(found.note)
        threshold = self.options.compare_fail if max_slowdown is None else _fraction(max_slowdown, "max_slowdown")
        runs = bl.sessions(found.entry)
        cmp = compare(found.entry["samples_s"], result.samples_s, threshold, self.options.alpha,
                      sessions=runs if len(runs) > 1 else None)
        figures = [float(h.get("figure_s") or 0.0) for h in found.entry.get("history", []) or []]
        result.baseline_s, result.comparison = float(np.median([*figures, found.entry["figure_s"]])), cmp
        if len(runs) > 1:
            result.notes.append(f"baseline of {len(runs)} sessions (figure: their median)")
        if cmp.verdict == "too few samples" and threshold is not None:  # the check asked for cannot run: said
            result.failures.append(f"{result.kernel} size {result.size}: the regression test against the baseline "
                                   f"needs {MIN_SAMPLES} device times on each side, the baseline's "
                                   f"{'sessions have' if len(runs) > 1 else 'session has'} "
                                   f"{', '.join(str(len(r)) for r in runs)} and this run {len(result.samples_s)}: "
                                   "save the baseline again with more (--gpu-budget)")
        elif cmp.verdict == "regressed":
            result.failures.append(f"{result.kernel} size {result.size}: {result.statistic} "
                                   f"{result.figure_s * 1e3:.4g} ms, baseline {result.baseline_s * 1e3:.4g} ms: "
                                   f"{cmp.sentence()}")
        elif found.note:
            result.notes.append(found.note)

    def _predict(self, result: GpuResult, device: GpuDevice, item, within: float, model: str, overrides,
                 policy) -> None:
        from gpuprofiler.models import registry
        from gpuprofiler.models.fractal.regimes import recommended_small
        from gpuprofiler.workloads.sweep import from_records

        if item is None:
            raise Failed("predicted_within needs a kernel spec, builtin or app: a callable has nothing to model")
        if not within > 0:
            raise Failed(f"gpu_perf(predicted_within=...) must be a positive fraction, got {within!r}")
        if overrides:
            raise Failed("predicted_within: the models predict the spec as written; drop set=... or the budget")
        try:
            cls = registry.get(model)
        except UserError as exc:
            raise Failed(f"gpu_perf(model=...): {exc}") from None
        profile = self.profile(device, required=not cls.needs_measurements)
        predictor = cls()
        verdict = predictor.applies_to(item, profile)
        if not verdict:
            raise Skip(f"the {model} model does not apply on {device.name}: {verdict.reason}")
        sweep = None
        if cls.needs_measurements:
            small, _, _ = recommended_small(item, [result.size], profile)
            small = sorted(s for s in small if s < result.size)
            if len(small) < 3:
                raise Failed(f"{item.name}: too few small sizes below {result.size} to extrapolate from ({small})")
            sweep = from_records(self._records(device, item, small, policy, False, None))
        try:
            prediction = predictor.fit(item, profile, sweep).predict([result.size])[0]
        except UserError as exc:
            raise Skip(f"the {model} model cannot predict {item.name} at {result.size}: {exc}") from None
        result.model, result.predicted_s = model, float(prediction.seconds)
        result.predicted_low_s, result.predicted_high_s = (float(v) for v in prediction.interval)
        error = result.figure_s / result.predicted_s - 1.0
        text = (f"{item.name} size {result.size}: {result.statistic} {result.figure_s * 1e3:.4g} ms, {model} "
                f"predicted {result.predicted_s * 1e3:.4g} ms [{result.predicted_low_s * 1e3:.4g}, "
                f"{result.predicted_high_s * 1e3:.4g}]: measured {error:+.1%} from the prediction")
        if abs(error) > within:
            result.failures.append(f"{text}, outside predicted_within = {within:.0%}")
        else:
            result.notes.append(text)

    # ---- the session's end -------------------------------------------------------------------------------------
    def save_baselines(self) -> tuple[Path, int] | None:
        """Merge this session's results into ``--gpu-save NAME``; a result whose budgets failed is saved too (a
        baseline records what the kernel does, not whether it passed)."""
        if not self.options.save or not self.results:
            return None
        entries = {}
        for r in self.results:
            dev = next((d for d in self._devices.values() if d.id == r.device_id), None)
            if dev is None:
                continue
            entries[bl.key(dev.slug, r.kernel, r.size)] = bl.entry(dev, r.kernel, r.size, r.samples_s, r.figure_s,
                                                                   r.statistic, r.test)
        path = bl.path_for(self.options.directory, self.options.save)
        bl.save(path, entries)
        return path, len(entries)

    def report(self) -> dict[str, Any]:
        return {"gpuprofiler": __version__, "statistic": MODEL_STATISTIC, "baseline": self.baseline_source or None,
                "compare_fail": self.options.compare_fail, "alpha": self.options.alpha,
                "results": [r.to_dict() for r in self.results],
                "failed": [{"test": test, "kernel": f.item, "size": size, "device_id": f.device, "stage": f.stage,
                            "reason": f.reason} for test, f, size in self.failures]}

    def write_json(self, path: Path) -> None:
        from gpuprofiler.measure.storage import json_ready

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(json_ready(self.report()), indent=1) + "\n")

    def plot(self, folder: Path) -> list[Path]:
        """One histogram per result: its samples (and the baseline's on its device, where compared), the figures
        marked."""
        from gpuprofiler.report.plots import pyplot, save_figure

        plt = pyplot()
        out = []
        entries = self._baselines or {}
        for i, r in enumerate(self.results):
            fig, ax = plt.subplots(figsize=(6, 3.2))
            bins = np.geomspace(min(r.samples_s), max(r.samples_s) * 1.0001, 40)
            base = next((e for e in entries.values() if e.get("kernel") == r.kernel and e.get("size") == r.size
                         and e.get("device_id") == r.device_id), None)
            if base is not None:
                b = np.asarray(base["samples_s"], dtype=float)
                bins = np.geomspace(min(b.min(), bins[0]), max(b.max(), bins[-1]) * 1.0001, 40)
                ax.hist(b * 1e3, bins=bins * 1e3, alpha=0.5, label="baseline")
                ax.axvline(float(base["figure_s"]) * 1e3, ls="--", color="C0")
            ax.hist(np.asarray(r.samples_s) * 1e3, bins=bins * 1e3, alpha=0.6, label="this run", color="C1")
            ax.axvline(r.figure_s * 1e3, color="C1", label=f"{r.statistic} (the figure compared)")
            ax.set_xscale("log")
            ax.set_xlabel("device time (ms)")
            ax.set_title(f"{r.kernel} size {r.size} on {r.device_name}: {r.verdict}", fontsize=9)
            ax.legend(fontsize=7)
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{i:03d}_{r.kernel}_{r.size}")
            out.append(save_figure(fig, Path(folder) / f"{safe}.png"))
        return out
