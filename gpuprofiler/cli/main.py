"""The ``gpuprofiler`` command line. Exit codes: 0 ok, 2 user error, 3 device error, 4 items failed, 130 interrupted."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Sequence

from gpuprofiler import __version__
from gpuprofiler.cli import (
    cache,
    calibrate,
    devices,
    export,
    extrapolate,
    generate,
    intervals,
    loops,
    maxplus,
    measure,
    pipeline,
    profile,
    simulate,
    tune,
    validate,
)
from gpuprofiler.errors import DeviceError, GpuProfilerError

# one module per command, in the order `gpuprofiler --help` lists them
COMMANDS = (devices, measure, extrapolate, export, calibrate, profile, maxplus, pipeline, cache, loops, validate,
            intervals, tune, generate, simulate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuprofiler", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"gpuprofiler {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command. ``argv`` None: the process's command line; the command done, its measuring workers are ended
    and a Ctrl-C while the process ends (the device runtimes unloading) is ignored, so that the exit status stays
    the command's. Called with ``argv`` (in-process, a test or a fuzzer), the workers stay for the next call."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "min_samples", 5) < 5:
        parser.error("--min-samples must be at least 5")
    code = _run(args)
    if argv is None:
        try:
            _stop_workers()
        except KeyboardInterrupt:
            print("gpuprofiler: interrupted", file=sys.stderr)
            code = 130
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


def _run(args: argparse.Namespace) -> int:
    try:
        return args.func(args)
    except GpuProfilerError as exc:
        kind = "device error" if isinstance(exc, DeviceError) else "error"
        print(f"gpuprofiler: {kind}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuprofiler: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("gpuprofiler: device error: out of host memory", file=sys.stderr)
        return 3
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _stop_workers() -> None:
    """End the worker processes a command measured in (:mod:`gpuprofiler.workloads.isolated`), where it started
    any, before the command returns."""
    isolated = sys.modules.get("gpuprofiler.workloads.isolated")
    if isolated is not None:
        isolated.close_all()
