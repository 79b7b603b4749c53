"""Search strategies, one module each, named in :data:`BUILTIN` (a name -> class registry as for the models)."""

from __future__ import annotations

from gpuprofiler.errors import UserError
from gpuprofiler.tune.strategies.base import Strategy
from gpuprofiler.tune.strategies.brute import Brute
from gpuprofiler.tune.strategies.model import ModelGuided
from gpuprofiler.tune.strategies.random import RandomOrder

BUILTIN: dict[str, type[Strategy]] = {"brute": Brute, "random": RandomOrder, "model": ModelGuided}


def create(name: str, **params) -> Strategy:
    if name not in BUILTIN:
        raise UserError(f"--strategy {name!r}: choose from {', '.join(BUILTIN)}")
    return BUILTIN[name](**params)
