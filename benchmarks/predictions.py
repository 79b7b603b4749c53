"""Shared by the model benchmarks: every builtin kernel spec predicted at every size of its ``small`` and
``target`` lists with one profile, each prediction timed from scratch (fit + predict), a table sorted slowest
first, and whether all stayed within a limit."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuprofiler.profile.file import load_profile  # noqa: E402
from gpuprofiler.workloads.builtin import builtin_specs  # noqa: E402
from gpuprofiler.workloads.spec import load_spec  # noqa: E402

H100_PROFILE = REPO / "results" / "nvidia-h100-80gb-hbm3" / "profile.json"


def time_all(title: str, make: Callable[[], Any], profile_path: Path, limit: float, repeats: int) -> bool:
    """Times ``make().fit(spec, profile).predict([size])`` for every builtin spec and size (best of ``repeats``);
    prints the table and the slowest; True when every prediction took at most ``limit`` seconds."""
    profile = load_profile(profile_path)
    specs = [load_spec(p) for p in builtin_specs()]
    make().fit(specs[0], profile).predict([specs[0].small[0]])  # imports and first calls, not timed
    rows = []
    for spec in specs:
        for size in sorted(set(spec.small) | set(spec.target)):
            best, pred = float("inf"), None
            for _ in range(repeats):
                t0 = time.perf_counter()
                pred = make().fit(spec, profile).predict([size])[0]
                best = min(best, time.perf_counter() - t0)
            rows.append((best, spec.name, size, pred))
    rows.sort(key=lambda r: r[0], reverse=True)
    print(f"\n{title} ({profile_path}), fit + predict, best of {repeats}, slowest first:")
    print(f"{'kernel':<16} {'size':>10} {'time s':>8} {'predicted s':>12}  limited by")
    for secs, name, size, pred in rows:
        print(f"{name:<16} {size:>10} {secs:>8.3f} {pred.seconds:>12.4g}  {pred.details.get('limited_by', '?')}")
    secs, name, size, _ = rows[0]
    print(f"{len(rows)} predictions in {sum(r[0] for r in rows):.2f} s; slowest: {name} at {size}, {secs:.3f} s")
    over = [r for r in rows if r[0] > limit]
    for secs, name, size, _ in over:
        print(f"TOO SLOW: {name} at {size} took {secs:.3f} s (limit {limit:g} s)")
    return not over
