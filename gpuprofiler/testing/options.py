"""The plugin's options, parsed and checked when pytest starts (standard library only: the plugin loads this
module in every pytest run)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

ALPHA = 0.01
DEFAULT_DIR = Path(".gpuprofiler") / "baselines"


def parse_fraction(text) -> float:
    """``"10%"`` or ``"0.1"`` (or a number) as 0.1; a clear ValueError for anything else (negative, not a number)."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"expected a fraction such as 10% or 0.1, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"expected a non-negative fraction such as 10% or 0.1, got {text!r}")
    return value


@dataclass
class Options:
    """The plugin's command-line options, parsed."""

    devices: list[str] = field(default_factory=lambda: ["default"])
    profile: str | None = None
    budget_s: float = 1.0
    save: str | None = None
    compare: str | None = None       # a baseline name, "" for the newest file in the directory
    compare_fail: float | None = None
    alpha: float = ALPHA
    directory: Path = DEFAULT_DIR
    json: Path | None = None
    plot: Path | None = None
    isolate: bool = False  # specs and apps timed in the device's worker process (a crash fails the test, not pytest)


def device_list(raw: str | None) -> list[str]:
    return [d.strip() for d in (raw or "default").split(",") if d.strip()] or ["default"]


def parse(get, environ_device: str | None, root: Path) -> Options:
    """Options from ``get(name)`` (pytest's ``config.getoption``); a ValueError says what is wrong."""
    try:
        budget = float(get("--gpu-budget"))
        alpha = float(get("--gpu-alpha"))
    except ValueError:
        raise ValueError("--gpu-budget and --gpu-alpha take numbers") from None
    if not (budget > 0 and math.isfinite(budget)) or not 0 < alpha < 0.5:
        raise ValueError("--gpu-budget must be a positive number of seconds and --gpu-alpha lie between 0 and 0.5")
    fail = None if get("--gpu-compare-fail") is None else parse_fraction(get("--gpu-compare-fail"))
    if fail is not None and get("--gpu-compare") is None:
        raise ValueError("--gpu-compare-fail needs --gpu-compare [NAME]")
    directory = Path(get("--gpu-baseline-dir")) if get("--gpu-baseline-dir") else root / DEFAULT_DIR
    return Options(devices=device_list(get("--gpu-device") or environ_device), profile=get("--gpu-profile"),
                   budget_s=budget, save=get("--gpu-save"), compare=get("--gpu-compare"), compare_fail=fail,
                   alpha=alpha, directory=directory, json=Path(get("--gpu-json")) if get("--gpu-json") else None,
                   plot=Path(get("--gpu-plot")) if get("--gpu-plot") else None, isolate=bool(get("--gpu-isolate")))
