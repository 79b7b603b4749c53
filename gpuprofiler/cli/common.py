"""What the commands share: progress lines, option types, the timing and device options, ``--set``, and
finding the profile a command uses.

Command modules import the pipeline's stages inside their ``run`` function: ``gpuprofiler --help`` and
``gpuprofiler devices`` then load neither scipy nor sympy nor matplotlib.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from gpuprofiler.errors import SOME_FAILED, ItemFailure, UserError
from gpuprofiler.measure.policy import LONGEST_S, TimingPolicy


def progress(message: str) -> None:
    """A progress line on stderr, time-stamped."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    """A warning on stderr (stdout stays the result, JSON included)."""
    print(f"gpuprofiler: warning: {message}", file=sys.stderr, flush=True)


def end_with_failures(failures: Sequence[ItemFailure], csv_path, total: int, what: str = "item",
                      json_mode: bool = False) -> int:
    """A run that went on past failed items lists them (the table on stdout, on stderr where stdout is JSON; every
    reason in full in ``csv_path``, a failed.csv, removed when none failed) and returns its exit status: 0, or
    :data:`~gpuprofiler.errors.SOME_FAILED`."""
    from gpuprofiler.report import failures as report

    path = report.write(csv_path, failures)
    if not failures:
        return 0
    out = sys.stderr if json_mode else sys.stdout
    print(f"\n{len(failures)} of {total} {what}(s) failed:", file=out)
    for line in report.table(failures, what):
        print(line, file=out)
    if len(failures) == 1:  # the reason in full, as an error that stopped the command would say it
        f = failures[0]
        print(f"gpuprofiler: 1 of {total} {what}(s) failed: {f.item} ({f.stage}): {' '.join(f.reason.split())} "
              f"(listed in {path})", file=sys.stderr, flush=True)
    else:
        print(f"gpuprofiler: {len(failures)} of {total} {what}(s) failed (listed in {path}); the rest completed",
              file=sys.stderr, flush=True)
    return SOME_FAILED


def int_list(text: str) -> list[int]:
    """argparse type: comma-separated positive integers."""
    def one(x: str) -> int:
        try:
            return int(x)
        except ValueError:
            value = float(x)  # 1e6 (a float that is not whole, NaN or infinity is refused)
            if not value.is_integer():
                raise ValueError(x) from None
            return int(value)

    try:
        values = [one(x) for x in text.replace(" ", "").split(",") if x]
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text[:80]!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text[:80]!r}")
    if any(v > 2**63 for v in values):
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: sizes are limited to 2^63")
    return values


def name_list(text: str) -> list[str]:
    """argparse type: comma-separated names."""
    return [x.strip() for x in text.split(",") if x.strip()]


def parts(items: Sequence[str]):
    """The non-empty comma-separated parts of repeated options (``--x a=1,b=2 --x c=3``)."""
    for item in items:
        yield from (part.strip() for part in item.split(",") if part.strip())


def overrides(items: Sequence[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` options as spec parameter overrides (values through the safe evaluator)."""
    from gpuprofiler.workloads.safe_eval import evaluate

    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise UserError(f"--set {item!r}: expected NAME=VALUE")
        out[name] = evaluate(value, out, f"--set {name}")
    return out


def add_device(p: argparse.ArgumentParser, what: str = "device id, e.g. opencl:0:0 or cuda:0 (default: first CUDA "
                                                        "GPU, else first OpenCL GPU, else PoCL)") -> None:
    p.add_argument("--device", help=what)


def add_timing(p: argparse.ArgumentParser, base: TimingPolicy, budget_option: str = "--budget") -> None:
    """``--budget --min-samples --rel-ci --warmup``, their defaults from the command's policy (``budget_option``:
    another name for ``--budget`` where a command uses that for something else)."""
    p.add_argument(budget_option, dest="budget", type=float, default=base.budget_s,
                   help=f"seconds of sampling per measurement (default {base.budget_s:g})")
    p.add_argument("--min-samples", type=int, default=base.min_samples,
                   help=f"at least this many samples (default {base.min_samples})")
    p.add_argument("--rel-ci", type=float, default=base.rel_ci,
                   help=f"stop when the median's 95%% interval is within this fraction (default {base.rel_ci:g})")
    p.add_argument("--warmup", type=int, default=base.warmup, help=f"untimed warm-up runs (default {base.warmup})")
    p.add_argument("--timeout", type=float, default=base.timeout_s, metavar="SECONDS",
                   help=f"stop a kernel as hung when its measurement gives no result for this long: exit 3, the "
                        f"records before it kept (tune: a failed configuration, the others go on) (default "
                        f"{base.timeout_s:g}; 0: wait for ever)")
    p.set_defaults(timing_base=base, budget_option=budget_option)


# what the timing options may be: a budget up to a day, samples and warm-up runs a measurement can take
RANGES = {"budget": (0.0, LONGEST_S, "seconds"), "min_samples": (1, 100_000, "samples"),
          "warmup": (0, 100_000, "warm-up runs"), "rel_ci": (0.0, 1.0, "a fraction")}


def checked(value, option: str, low, high, what: str, above_low: bool = False):
    """``value`` where it is a finite number in [low, high] ((low, high] with ``above_low``); else a UserError naming
    ``option`` and the range."""
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (value > low if above_low else value >= low) \
        and value <= high
    if not ok:
        raise UserError(f"{option} {value}: expected {what} {'above' if above_low else 'from'} {low:g} "
                        f"{'up ' if above_low else ''}to {high:g}")
    return value


def output_dir(value: str | Path, option: str = "-o") -> Path:
    """A results folder checked before any work: created (with its parents) where missing, and a folder this process
    can write files in; else a UserError naming ``option``."""
    path = Path(value)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".gpuprofiler-write-check-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except FileExistsError:
        raise UserError(f"{option} {path}: exists and is not a folder: give a folder for the results") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{option} {path}: cannot write results there: {getattr(exc, 'strerror', None) or exc}") \
            from None
    return path


# the file formats matplotlib writes without extra packages
PLOT_FORMATS = ("png", "pdf", "svg", "svgz", "jpg", "jpeg", "eps", "ps", "tif", "tiff", "webp", "pgf", "raw", "rgba")


def plot_path(value: str | None, option: str = "--plot") -> str | None:
    """A plot's path checked before any work: a format matplotlib writes (its extension) and a file that can be
    written (:func:`~gpuprofiler.measure.storage.writable`); else a UserError naming ``option``."""
    if value is None:
        return None
    from gpuprofiler.measure.storage import writable

    suffix = Path(value).suffix.lower().lstrip(".")
    if suffix not in PLOT_FORMATS:
        raise UserError(f"{option} {value}: a plot is written as {', '.join('.' + f for f in PLOT_FORMATS[:4])} ... "
                        f"(the file's extension names the format), not {('.' + suffix) if suffix else 'no extension'}")
    writable(value, f"{option} file")
    return value


def policy(args: argparse.Namespace) -> TimingPolicy:
    """The timing policy of a command's options, each in its range (:data:`RANGES`)."""
    timeout = args.timeout
    if not (math.isfinite(timeout) and timeout >= 0):
        raise UserError(f"--timeout {timeout:g}: expected a number of seconds >= 0 (0: no limit)")
    for name, (low, high, what) in RANGES.items():
        value = getattr(args, name)
        if value is not None:
            option = getattr(args, "budget_option", "--budget") if name == "budget" else "--" + name.replace("_", "-")
            checked(value, option, low, high, what, above_low=name == "budget")
    return args.timing_base.but(warmup=args.warmup, min_samples=args.min_samples, budget_s=args.budget,
                                rel_ci=args.rel_ci, timeout_s=timeout or None)


def add_profile(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--profile", help=f"{what} (default: the device's stored profile, "
                                     "results/<device>/profile.json, where `gpuprofiler calibrate` writes it)")


def device_info(device_id: str | None):
    """The DeviceInfo of ``device_id`` (or of the default device) without opening it; None if there is none."""
    from gpuprofiler.device import default_device_id, list_devices

    devices = list_devices()
    if not devices:
        return None
    wanted = device_id or default_device_id(devices)
    for d in devices:
        if d.id == wanted:
            return d
    raise UserError(f"unknown device {wanted!r}: see `gpuprofiler devices`")


def find_profile(args: argparse.Namespace, device=None, required: bool = False):
    """``--profile``, else the stored profile of ``device`` (or of ``--device``, else the default device), saying
    which on stderr; with none: None, or with ``required`` a UserError saying how to make one."""
    from gpuprofiler.profile.locate import choose_profile

    if not args.profile and device is None:
        device = device_info(getattr(args, "device", None))
    choice = choose_profile(args.profile, device)
    if choice.profile is None and required:
        raise UserError(choice.message)
    if not choice.given:
        progress(choice.message)
    return choice


def add_cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="local[:N]|tcp://HOST:PORT",
                   help="run the measurements on a Dask cluster: local (a worker process per device of this machine), "
                        "local:N (N worker processes) or a scheduler's address; default $GPUPROFILER_CLUSTER, else "
                        "here. Needs pip install 'gpuprofiler[dask]'")


def open_runner(args: argparse.Namespace):
    """The Dask runner of ``--cluster`` (or ``$GPUPROFILER_CLUSTER``), None without one."""
    from gpuprofiler.measure.runners import cluster_address, open_cluster

    address = cluster_address(getattr(args, "cluster", None))
    if address is None:
        return None
    runner = open_cluster(address)
    try:
        progress(f"cluster: {runner.describe()}: " + ", ".join(
            f"{len(slots)} x {kind}" for kind, slots in runner.kinds().items()))
    except BaseException:
        runner.close()
        raise
    return runner


def cluster_device(runner, device: str | None):
    """The kind a cluster run measures on (:func:`cluster_kind`) and a stand-in for a backend of it: the kind's
    description (``info``) and ``close``, which gives the cluster back (it is closed here on a bad ``--device``)."""
    from types import SimpleNamespace

    from gpuprofiler.device.base import DeviceInfo

    try:
        kind = cluster_kind(runner, device)
    except BaseException:
        runner.close()
        raise
    return kind, SimpleNamespace(info=DeviceInfo.from_dict(runner.kinds()[kind][0].info), close=runner.close)


def cluster_kind(runner, device: str | None) -> str:
    """The kind of device a cluster run measures on: that of ``--device`` (a device id, a worker's ``HOST/ID`` or a
    kind's slug), else the cluster's only kind."""
    kinds = runner.kinds()
    if device is None:
        if len(kinds) == 1:
            return next(iter(kinds))
        raise UserError(f"the cluster has devices of {len(kinds)} kinds: choose one with --device "
                        f"({', '.join(kinds)})")
    if device in kinds:
        return device
    for slot in runner.slots():
        if device in (slot.device_id, slot.resource, slot.name):
            return slot.kind
    raise UserError(f"--device {device}: not a device of the cluster (kinds: {', '.join(kinds)}; devices: "
                    f"{', '.join(s.name for s in runner.slots()[:8])}{', ...' if len(runner.slots()) > 8 else ''})")
