"""The PTX pipeline model as a predictor: a kernel spec's CUDA source as PTX, its launch at each size, simulated
on one SM of the profile's NVIDIA GPU (Zhang, Chen and Ming's static model and the parts past it)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import (
    APPLIES,
    STILL_APPLIES,
    Applicability,
    NotApplicable,
    Prediction,
    Predictor,
    refuse,
)
from gpuprofiler.models.identity import family, spec_code
from gpuprofiler.models.intervals import calibrate_all
from gpuprofiler.models.pipeline.occupancy import normalise_arch
from gpuprofiler.models.pipeline.predict import DEFAULT_BUDGET, Options, predict
from gpuprofiler.models.pipeline.ptx_parser import parse_ptx
from gpuprofiler.models.pipeline.ptx_source import load_ptx
from gpuprofiler.models.pipeline.specs import spec_launch
from gpuprofiler.models.pipeline.values import Launch
from gpuprofiler.models.programs import bind, predict_program
from gpuprofiler.profile.hardware import view
from gpuprofiler.workloads.apps import App
from gpuprofiler.workloads.spec import KernelSpec
from gpuprofiler.workloads.trace import TracedLaunch, trace_app


class PipelinePredictor(Predictor):
    """One kernel launch's time from a one-SM pipeline simulation of its PTX.

    Parameters: ``arch`` (``sm_XX``; the profile's when None), ``budget`` (most warp-instructions simulated
    before extrapolating), ``trips`` (trip counts of loops not known statically, by label or line) and
    ``default_trip`` (for the others).
    """

    name = "pipeline"
    description = "static PTX pipeline simulation on one SM (Zhang, Chen and Ming), NVIDIA GPUs"

    def __init__(self, arch: str | None = None, budget: int = DEFAULT_BUDGET, trips: dict[str, int] | None = None,
                 default_trip: int = 1, calibrated: bool = True):
        self.arch = arch
        self.budget = budget
        self.trips = trips
        self.default_trip = default_trip
        self.calibrated = calibrated

    def applies_to(self, item: Any, profile: Any) -> Applicability:
        hw = view(profile)
        if not hw.is_nvidia_gpu:
            what = f"{hw.name} ({hw.backend}, {hw.kind})" if profile is not None else "no profile"
            return refuse(f"it models NVIDIA GPUs and the profile's device, {what}, is not one")
        if isinstance(item, App):
            return APPLIES  # each launch is checked when the program is traced
        if not isinstance(item, KernelSpec):
            return refuse(f"it models kernel launches and programs of them, not a {type(item).__name__}")
        if "cuda" not in item.sources:
            return refuse("the spec has no CUDA source")
        if item.local_size is None:
            return refuse("the spec gives no launch.local (the block size)")
        return APPLIES

    def fit(self, item: Any, profile: Any = None, measurements: Any = None) -> "PipelinePredictor":
        """Compiles the kernel to PTX (a committed fixture, nvcc or NVRTC) at the item's first small size, so a
        kernel the model cannot read is refused here."""
        self._refuse_unless(item, profile)
        self.spec_ = item
        self.profile_ = profile
        self.arch_ = normalise_arch(self.arch or view(profile).arch)
        self.ptx_: dict[tuple, tuple] = {}
        probe = (item.small or item.target or [1024])[0]
        try:
            if isinstance(item, App):  # every kernel the program launches must compile
                for launch in trace_app(item, probe, "cuda"):
                    self._launch(launch)
            else:
                spec_launch(item, probe, self.arch_)
        except UserError as exc:
            raise NotApplicable(f"pipeline: {exc}; {STILL_APPLIES}") from None
        self.fitted_ = True
        return self

    def _launch(self, traced: TracedLaunch) -> tuple:
        """PTX module, entry and launch of one traced launch of a program (its CUDA source compiled by nvcc)."""
        k = traced.kernel
        if k.path is None:
            raise UserError(f"kernel {k.name}: its source was not read from a file (ctx.source), so it cannot be "
                            "compiled to PTX")
        if traced.local_size is None:
            raise UserError(f"kernel {k.name} is launched without a block size")
        key = (str(k.path), tuple(sorted((str(a), str(b)) for a, b in k.defines.items())))
        if key not in self.ptx_:  # compiled and parsed once per source and defines, not per launch and size
            src = load_ptx(k.path, self.arch_, k.defines)
            self.ptx_[key] = (src, parse_ptx(src.text, f"{k.path} (PTX)"))
        src, module = self.ptx_[key]
        entry = module.entry(k.name)
        bound = bind(list(range(len(entry.params))), traced.args)
        block = list(traced.local_size)
        grid = [math.ceil(g / b) for g, b in zip(traced.global_size, block)]
        launch = Launch(grid, block, dict(bound.scalars), buffers=bound.buffers, contents=bound.contents)
        return module, entry, launch, src, float(bound.bytes)

    def _predict_launch(self, traced: TracedLaunch) -> Prediction:
        module, entry, launch, src, working_set = self._launch(traced)
        r = predict(module, entry.name, launch, self.profile_,
                    Options(arch=self.arch_, trips=dict(self.trips or {}), default_trip=self.default_trip,
                            working_set=working_set, budget=self.budget, ptx_text=src.text))
        lo, hi = r["interval_s"]
        return Prediction(math.prod(traced.global_size), r["predicted_s"], lo, hi, self.name,
                          f"PTX pipeline simulator, {r['arch']}", r)

    def predict(self, sizes: Sequence[int]) -> list[Prediction]:
        self._fitted()
        if isinstance(self.spec_, App):
            return [self._calibrated(predict_program(self.spec_, int(size), "cuda", self.name, self._predict_launch))
                    for size in sizes]
        out = []
        for size in sizes:
            sl = spec_launch(self.spec_, int(size), self.arch_)
            r = predict(sl.module, sl.entry.name, sl.launch, self.profile_,
                        Options(arch=self.arch_, trips=dict(self.trips or {}), default_trip=self.default_trip,
                                working_set=sl.working_set, budget=self.budget, ptx_text=sl.source.text))
            lo, hi = r["interval_s"]
            r["kernel_code"] = spec_code(self.spec_, "cuda")
            out.append(self._calibrated(Prediction(int(size), r["predicted_s"], lo, hi, self.name,
                                                   f"PTX pipeline simulator, {r['arch']}", r)))
        return out

    def _calibrated(self, pred: Prediction) -> Prediction:
        """The interval from the model's out-of-sample errors (:mod:`gpuprofiler.models.intervals`)."""
        if not self.calibrated:
            return pred
        hw = view(self.profile_)
        return calibrate_all(pred, hw.kind, family(self.spec_, "cuda"), device=hw.name)
