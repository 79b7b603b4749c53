"""Error classes that the CLI maps to exit codes: user errors 2, device errors 3; and the stage at which one item of
a run failed (a run goes on past it and exits :data:`SOME_FAILED`)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

# exit status of a command that completed but some of whose items (kernels, configurations, devices) failed: each is
# listed in its report with the stage and the reason
SOME_FAILED = 4

# where an item fails: not plannable (no targets, no small sizes below them), refused by the buffer bounds check, its kernel not compiling, its result wrong against the
# numpy reference, the device runtime crashing while running it, or stopped as hung
STAGES = ("plan", "bounds", "compile", "check", "device crash", "timeout")


class GpuProfilerError(Exception):
    """Base of the errors the CLI reports without a traceback."""

    exit_code = 1
    stage: str | None = None  # one of STAGES where known (set on the instance: it crosses process pipes with it)


class UserError(GpuProfilerError):
    """Bad input: a spec field, an expression, an unknown device, a kernel that does not compile."""

    exit_code = 2


class DeviceError(GpuProfilerError):
    """The device failed: out of memory, launch failure, lost context."""

    exit_code = 3


class CheckError(UserError):
    """A kernel's output disagrees with the spec's numpy reference (a user error: exit 2)."""

    stage = "check"


def at_stage(exc: BaseException, name: str) -> BaseException:
    """``exc`` marked as failing at stage ``name``, unless it already says where; returns it (``raise at_stage(...)``)."""
    if isinstance(exc, GpuProfilerError) and not getattr(exc, "stage", None):
        exc.stage = name
    return exc


@contextmanager
def stage(name: str, kinds: type | tuple = GpuProfilerError):
    """Errors of ``kinds`` raised inside the block are marked as failing at stage ``name`` (:func:`at_stage`)."""
    try:
        yield
    except kinds as exc:
        at_stage(exc, name)
        raise


def stage_of(exc: BaseException) -> str:
    """Where ``exc`` stopped an item: its marked stage, else ``device`` (a DeviceError) or ``error``."""
    got = getattr(exc, "stage", None)
    if got:
        return got
    return "device" if isinstance(exc, DeviceError) else "error"


@dataclass(frozen=True)
class ItemFailure:
    """One item of a run that failed while the rest went on: which, on which device, at which stage and why."""

    item: str
    stage: str
    reason: str
    device: str = ""

    @classmethod
    def of(cls, item: str, exc: BaseException, device: str = "") -> "ItemFailure":
        return cls(item, stage_of(exc), str(exc), device)

    def row(self) -> dict[str, str]:
        return {"item": self.item, "device": self.device, "stage": self.stage, "reason": self.reason}
