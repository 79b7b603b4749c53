"""The max-plus model as a predictor: the kernel's data graph, built from its source at each size, timed with
the hardware profile's memory and operation figures (Antonyuk & Mikheev)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from gpuprofiler.errors import UserError
from gpuprofiler.kernelcode.source import parameter_names
from gpuprofiler.models.base import (
    APPLIES,
    STILL_APPLIES,
    Applicability,
    NotApplicable,
    Prediction,
    Predictor,
    refuse,
)
from gpuprofiler.models.cache.analysis import analyse
from gpuprofiler.models.cache.streams import Launch, spec_launch
from gpuprofiler.models.identity import family, spec_code
from gpuprofiler.models.intervals import calibrate_all
from gpuprofiler.models.maxplus.builder import BuildError, TooLarge, build, build_spec
from gpuprofiler.models.maxplus.cut import predict_cut
from gpuprofiler.models.maxplus.models import DEFAULT_MODEL, MODELS, parameters, predict
from gpuprofiler.models.programs import bind, predict_program
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.apps import App
from gpuprofiler.workloads.spec import KernelSpec
from gpuprofiler.workloads.trace import TracedLaunch, trace_app

ANALYSIS_BUDGET = 1 << 21  # sampled accesses per window of a launch's cache analysis


class MaxPlusPredictor(Predictor):
    """One kernel's time from its max-plus graph (the overlap model by default).

    Parameters: ``model`` (naive, ops, serial, cache, overlap), ``batches`` (sequential or pipelined for the
    paper's models; the model's default when None), ``n`` (work-items at once; the profile's concurrency, or
    for overlap the occupancy, when None), ``line_bytes``
    (bytes a strided access fetches; 64 on a CPU, 32 on a GPU when None), ``backend`` (which source of the
    spec to read; the profile's API when None), ``cache`` (the overlap model's DRAM and cache traffic from the
    kernel's sampled address stream's predicted misses, :mod:`gpuprofiler.models.cache`; else the footprint and
    reuse rules), ``trips`` (iterations per entry of loops the builder cannot count, by source line, as the loop
    profiler counted them on the device: :func:`gpuprofiler.workloads.loops.profile_loops`).
    """

    name = "maxplus"
    description = "max-plus model of the kernel's data graph, timed with the profile (Antonyuk & Mikheev)"

    def __init__(self, model: str = DEFAULT_MODEL, batches: str | None = None, n: int | None = None,
                 line_bytes: int | None = None, backend: str | None = None, cache: bool = True,
                 trips: dict[int, float] | None = None, calibrated: bool = True):
        self.model = model
        self.batches = batches
        self.n = n
        self.line_bytes = line_bytes
        self.backend = backend
        self.cache = cache
        self.trips = trips
        self.calibrated = calibrated

    def applies_to(self, item: Any, profile: Any) -> Applicability:
        if not isinstance(item, (KernelSpec, App)):
            return refuse(f"it models kernels and programs of kernels, not a {type(item).__name__}")
        if profile is None:
            return refuse("it needs a hardware profile (`gpuprofiler calibrate`)")
        if self.model not in MODELS:
            return refuse(f"unknown model {self.model!r}: choose from {', '.join(MODELS)}")
        return APPLIES

    def fit(self, item: Any, profile: Any = None, measurements: Any = None) -> "MaxPlusPredictor":
        """Builds the graph once at the item's first small size, so a kernel the builder refuses (a loop whose
        length depends on data) is refused here, with the builder's reason."""
        self._refuse_unless(item, profile)
        self.spec_ = item
        self.profile_ = profile
        self.kind_ = self.backend or view(profile).backend or "opencl"
        self.graphs_: dict[int, Any] = {}
        probe = (item.small or item.target or [16])[0]
        try:
            if isinstance(item, App):  # every kernel the program launches must build
                for launch in trace_app(item, probe, self.kind_):
                    self._launch_kernel(launch)
            else:
                try:
                    self._build(probe)
                except TooLarge as exc:  # a loop too long to unroll: the graph with it cut must build
                    self._cut(probe, exc)
        except UserError as exc:
            raise NotApplicable(f"maxplus: {exc}; {STILL_APPLIES}") from None
        self.fitted_ = True
        return self

    def _launch_kernel(self, launch: TracedLaunch, groups=None, items=None):
        """The graph of one traced launch of a program, its arguments bound to the kernel's parameters (``groups``,
        ``items``: followed at those work-groups' work-items, for its address stream)."""
        k = launch.kernel
        where = str(k.path or k.name)
        bound = bind(parameter_names(k.source, k.name, where, k.defines), launch.args)
        return build(k.source, k.name, bound.scalars, list(launch.local_size) if launch.local_size else None,
                     where, k.defines, list(launch.global_size), {n: f for n, (f, _) in bound.contents.items()},
                     bound.buffers, groups=groups, items=items)

    def _predict_launch(self, launch: TracedLaunch) -> Prediction:
        kernel = self._launch_kernel(launch)
        misses = None
        if self.cache and self.model == "overlap":
            stream = Launch(lambda groups, items=None: self._launch_kernel(launch, groups, items),
                            tuple(launch.global_size), tuple(launch.local_size) if launch.local_size else None)
            misses = self._analysis(stream, kernel)
        return self._time(kernel, launch.global_size, math.prod(launch.global_size), misses)

    def _time(self, kernel, global_size, size: int, misses=None) -> Prediction:
        """A graph's prediction with the profile's parameters, for a launch of ``global_size``."""
        params = parameters(self.profile_, kernel, self.n, self.line_bytes)
        return predict(kernel, params, math.prod(global_size), size, self.model, self.batches, misses)

    def _misses(self, inst, kernel):
        """The launch's cache analysis (None where its accesses cannot be followed: the rules apply)."""
        return self._analysis(spec_launch(inst, self.kind_, self.trips), kernel)

    def _analysis(self, launch, kernel):
        """A launch's cache analysis, or None where its accesses cannot be followed."""
        per_item = sum(1 for g in kernel.fragments for a in g.arcs if a.kind in ("read", "write"))
        try:
            return analyse(launch, self.profile_, budget=ANALYSIS_BUDGET, count=2, backend=self.kind_, per_item=per_item)
        except (UserError, ValueError):
            return None

    def _build(self, size: int):
        """The spec instance and kernel graph at ``size`` (built once per size)."""
        if size not in self.graphs_:
            inst = self.spec_.instantiate(size)
            self.graphs_[size] = (inst, build_spec(inst, self.kind_, trips=self.trips))
        return self.graphs_[size]

    def predict(self, sizes: Sequence[int]) -> list[Prediction]:
        self._fitted()
        out = []
        if isinstance(self.spec_, App):
            return [self._calibrated(predict_program(self.spec_, int(size), self.kind_, self.name,
                                                     self._predict_launch)) for size in sizes]
        for size in sizes:
            try:
                try:
                    inst, kernel = self._build(int(size))
                except TooLarge as exc:  # the graph of a larger size can exceed what the builder unrolls
                    kernel, pred = self._cut(int(size), exc)
                else:
                    misses = self._misses(inst, kernel) if self.cache and self.model == "overlap" else None
                    pred = self._time(kernel, inst.global_size, int(size), misses)
            except BuildError as exc:
                raise NotApplicable(f"maxplus: at {self.spec_.size}={size}: {exc}; {STILL_APPLIES}") from None
            pred.details["notes"] = list(kernel.notes)
            pred.details["kernel_code"] = spec_code(self.spec_, self.kind_)
            out.append(self._calibrated(pred))
        return out

    def _cut(self, size: int, exc: TooLarge):
        """(kernel, prediction) at ``size`` with its longest loops cut (:mod:`~gpuprofiler.models.maxplus.cut`);
        their addresses are not followed, so the traffic comes from the footprint and reuse rules."""
        inst = self.spec_.instantiate(size)
        return predict_cut(lambda caps: build_spec(inst, self.kind_, trips=self.trips, caps=caps),
                           lambda kernel: self._time(kernel, inst.global_size, size), exc)

    def _calibrated(self, pred: Prediction) -> Prediction:
        """The interval from the model's out-of-sample errors (:mod:`gpuprofiler.models.intervals`)."""
        if not self.calibrated:
            return pred
        hw = view(self.profile_)
        return calibrate_all(pred, hw.kind, family(self.spec_, self.kind_), device=hw.name)
