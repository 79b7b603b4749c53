"""Extra-P interchange: write sweeps in Extra-P's text input format, and run Extra-P's default model
(where the ``extrap`` command is installed) as a baseline."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from gpuprofiler.measure.stats import model_value
from gpuprofiler.workloads.safe_eval import evaluate
from gpuprofiler.workloads.sweep import Sweep


def text_format(sweeps: list[Sweep], parameter: str = "n", include_total: bool = True, figures: bool = False) -> str:
    """Extra-P text format: one REGION per phase (and the whole run), METRIC time, one DATA line per size
    holding every repeat (with ``figures``, only the modelling figure of the repeats, so that Extra-P fits the
    same numbers as the other laws). Sweeps must share their sizes."""
    sizes = sweeps[0].sizes
    lines = [f"PARAMETER {parameter}", "POINTS " + " ".join(f"( {s} )" for s in sizes)]
    for sw in sweeps:
        if sw.sizes != sizes:
            raise ValueError("Extra-P's text format needs the same sizes for every region")
        regions = dict(sw.phases)
        if include_total and (len(regions) > 1 or sw.kind == "app"):
            regions = {"total": sw.totals, **regions}
        for name, per_size in regions.items():
            region = re.sub(r"\s+", "_", f"{sw.name}/{name}" if len(sweeps) > 1 else name)
            lines += [f"REGION {region}", "METRIC time"]
            lines += ["DATA " + " ".join(f"{v:.9g}" for v in ([model_value(d)] if figures else np.asarray(d, float)))
                      for d in per_size]
    return "\n".join(lines) + "\n"


def extrap_command() -> list[str] | None:
    """The Extra-P command line: $EXTRAP, or ``extrap`` on PATH."""
    if os.environ.get("EXTRAP"):
        return os.environ["EXTRAP"].split()
    found = shutil.which("extrap")
    return [found] if found else None


_MODEL = re.compile(r"Model:\s*(.+)")


def extrap_models(sweep: Sweep, timeout: float = 300, figures: bool = True) -> dict[str, str] | None:
    """Extra-P's default model per region (``extrap --text``), as expression strings; None without Extra-P. With
    ``figures`` it is given each size's modelling figure, the numbers the other laws fit."""
    cmd = extrap_command()
    if cmd is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.txt"
        path.write_text(text_format([sweep], figures=figures))
        done = subprocess.run(cmd + ["--text", str(path)], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"Extra-P failed: {done.stderr.strip()[-500:]}")
    models, region = {}, None
    for line in done.stdout.splitlines():
        m = re.match(r"\s*Callpath:\s*(\S+)", line)
        if m:
            region = m.group(1)
        m = _MODEL.search(line)
        if m and region:
            models[region] = m.group(1).strip()
    return models


def evaluate_model(expression: str, parameter: str, value: float) -> float:
    """Value of an Extra-P model expression (``1.2 + 3.4 * n^(1) * log2(n)^(1)``) with the safe evaluator."""
    text = expression.replace("^", "**")
    return float(evaluate(text, {parameter: float(value)}, "Extra-P model"))
