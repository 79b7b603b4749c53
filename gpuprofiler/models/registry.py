"""Every predictor by name: the builtin ones, loaded only when asked for, those registered at run time
(:func:`register`), and those other packages declare under the ``gpuprofiler.predictors`` entry point
group. ``validate`` runs every name here; adding a predictor touches no other module."""

from __future__ import annotations

import importlib
from importlib import metadata

from gpuprofiler.errors import UserError
from gpuprofiler.models.base import Predictor

# name -> "module:Class", imported on first use (the models pull in scipy, sympy and the PTX tools)
BUILTIN = {
    "fractal": "gpuprofiler.models.fractal.predictor:FractalPredictor",
    "maxplus": "gpuprofiler.models.maxplus.predictor:MaxPlusPredictor",
    "pipeline": "gpuprofiler.models.pipeline.predictor:PipelinePredictor",
}
ENTRY_POINT_GROUP = "gpuprofiler.predictors"

_registered: dict[str, type[Predictor]] = {}


def register(cls: type[Predictor]) -> type[Predictor]:
    """Add a predictor class under its ``name`` (usable as a class decorator); a name is registered once."""
    if not (isinstance(cls, type) and issubclass(cls, Predictor)):
        raise TypeError(f"{cls!r} is not a Predictor subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{cls.__name__}.name must be an identifier, got {name!r}")
    if name in BUILTIN or _registered.get(name, cls) is not cls:
        raise ValueError(f"a predictor named {name!r} is already registered")
    _registered[name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a predictor registered at run time (builtins stay)."""
    _registered.pop(name, None)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """Every predictor's name: builtins first, then registered ones, then those of installed plugins."""
    out = list(BUILTIN) + [n for n in _registered if n not in BUILTIN]
    return out + [n for n in _entry_points() if n not in out]


def get(name: str) -> type[Predictor]:
    """The predictor class called ``name``; an unknown name is a UserError listing the known ones."""
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    if name in _registered:
        return _registered[name]
    eps = _entry_points()
    if name in eps:
        cls = eps[name].load()
        if not (isinstance(cls, type) and issubclass(cls, Predictor)):
            raise UserError(f"entry point {name!r} ({eps[name].value}) is not a Predictor subclass")
        return cls
    raise UserError(f"unknown model {name!r}: choose from {', '.join(names())}")


def describe(name: str) -> str:
    """One line on what the predictor ``name`` is: its ``description``, else its docstring's first line."""
    cls = get(name)
    return cls.description or (cls.__doc__ or name).strip().splitlines()[0]


def create(name: str, **params) -> Predictor:
    """A new predictor ``name`` with its parameters."""
    return get(name)(**params)
