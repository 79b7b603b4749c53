"""A tuning space: named parameter values (``"S=1,2,4;Nt=64,128"``) and restrictions over them.

Values and restrictions go through the safe evaluator (a restriction such as ``Nt % S == 0 and S <= 16`` is
data, never ``eval``). A restriction that cannot be evaluated for a configuration (an unknown name, a division
by zero) does not stop the tune: that configuration is reported with the reason and not measured.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from gpuprofiler.errors import UserError
from gpuprofiler.workloads.safe_eval import evaluate, parse
from gpuprofiler.workloads.spec import is_c_identifier

MAX_CONFIGS = 100_000


@dataclass
class Space:
    """Parameter names in order, each with its values, and the restrictions' texts."""

    params: dict[str, list[Any]]
    restrictions: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(self.params)

    def configs(self) -> list[dict[str, Any]]:
        """Every combination, the last parameter varying fastest."""
        return [dict(zip(self.params, values)) for values in itertools.product(*self.params.values())]

    def verdict(self, config: dict[str, Any]) -> str | None:
        """None where every restriction holds; else why not (a restriction false, or one that failed)."""
        for text in self.restrictions:
            try:
                ok = evaluate(text, config, f"--restrict {text!r}")
            except UserError as exc:
                return f"invalid restriction: {exc}"
            if not ok:
                return f"restricted: {text}"
        return None


def parse_space(text: str, restrictions: list[str] | None = None) -> Space:
    """``NAME=V1,V2,...;NAME=...`` (values are numbers or expressions of numbers); a UserError on anything else."""
    params: dict[str, list[Any]] = {}
    if not text or not text.strip():
        raise UserError('--space: empty (expected e.g. "S=1,2,4,8;Nt=64,128,256")')
    for part in text.split(";"):
        if not part.strip():
            continue
        name, sep, values = part.partition("=")
        name = name.strip()
        if not sep or not is_c_identifier(name):
            raise UserError(f"--space: {part.strip()[:80]!r} is not NAME=V1,V2,... (NAME letters, digits and _)")
        if name in params:
            raise UserError(f"--space: {name} given twice")
        got = []
        for v in values.split(","):
            if not v.strip():
                raise UserError(f"--space: {name}: an empty value in {values.strip()[:80]!r}")
            value = evaluate(v.strip(), {}, f"--space {name}")
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if value in got:
                raise UserError(f"--space: {name}: the value {value} twice")
            got.append(value)
        params[name] = got
    if not params:
        raise UserError('--space: no parameter (expected e.g. "S=1,2,4,8;Nt=64,128,256")')
    total = 1
    for values in params.values():
        total *= len(values)
    if total > MAX_CONFIGS:
        raise UserError(f"--space: {total} configurations; at most {MAX_CONFIGS} are tuned")
    checked = []
    for text in restrictions or []:
        text = text.strip()
        if not text:
            raise UserError("--restrict: empty")
        parse(text, f"--restrict {text[:80]!r}")  # syntax now; names and values per configuration
        checked.append(text)
    return Space(params, checked)


def config_key(config: dict[str, Any]) -> str:
    """A configuration as stable text (``S=4;Nt=128``): the store's key and the table's label."""
    return ";".join(f"{k}={v}" for k, v in config.items())
