"""Kernel specs -> PTX, launch and working set for the pipeline model (the spec form of ``pipeline``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuprofiler.errors import UserError
from gpuprofiler.models.pipeline.ptx_parser import Entry, Module, parse_ptx
from gpuprofiler.models.pipeline.ptx_source import PtxSource, load_ptx
from gpuprofiler.models.pipeline.values import Launch
from gpuprofiler.workloads.spec import KernelSpec, load_spec


@dataclass
class SpecLaunch:
    module: Module
    entry: Entry
    launch: Launch
    source: PtxSource
    working_set: float


def spec_launch(path: str | Path | KernelSpec, size: int, arch: str, overrides: dict[str, Any] | None = None,
                kernel: str | None = None) -> SpecLaunch:
    """The spec's CUDA kernel as PTX (fixture or nvcc), with its grid, block and scalar arguments at ``size``."""
    spec = path if isinstance(path, KernelSpec) else load_spec(path)
    path = spec.path
    inst = spec.instantiate(size, overrides)
    if inst.local_size is None:
        raise UserError(f"{path}: launch.local is needed for the pipeline model (the block size)")
    block = list(inst.local_size)
    grid = [math.ceil(g / b) for g, b in zip(inst.global_size, block)]
    cu = spec.source_for("cuda")
    src = load_ptx(cu, arch, inst.defines)
    module = parse_ptx(src.text, f"{cu} (PTX)")
    entry = module.entry(kernel or spec.kernel)
    if len(spec.args) != len(entry.params):
        raise UserError(f"{path}: the spec has {len(spec.args)} arguments, kernel {entry.name} has "
                        f"{len(entry.params)} parameters")
    values = {i: (float(inst.scalars[a.name]) if a.dtype.kind == "f" else int(inst.scalars[a.name]))
              for i, a in enumerate(spec.args) if a.is_scalar}
    buffers = {i: int(np.prod(inst.shapes[a.name])) * a.dtype.itemsize for i, a in enumerate(spec.args)
               if not a.is_scalar}
    contents = {i: (inst.elements(a.name), a.dtype) for i, a in enumerate(spec.args) if not a.is_scalar}
    return SpecLaunch(module, entry, Launch(grid, block, values, buffers=buffers, contents=contents), src,
                      float(inst.array_bytes))
