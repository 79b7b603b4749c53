"""Error classes that the CLI maps to exit codes: user errors 2, device errors 3."""


class GpuProfilerError(Exception):
    """Base of the errors the CLI reports without a traceback."""

    exit_code = 1


class UserError(GpuProfilerError):
    """Bad input: a spec field, an expression, an unknown device, a kernel that does not compile."""

    exit_code = 2


class DeviceError(GpuProfilerError):
    """The device failed: out of memory, launch failure, lost context."""

    exit_code = 3


class CheckError(UserError):
    """A kernel's output disagrees with the spec's numpy reference (a user error: exit 2)."""
