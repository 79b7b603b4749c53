"""Reading the text files the tool is given (specs, PTX, profiles) totally: as bytes, with a size limit, and
decoded as UTF-8 text; anything else is a :class:`~gpuprofiler.errors.UserError` that names the file and,
for a file that is not text, the line and column where it stops being text."""

from __future__ import annotations

import os
import re
from pathlib import Path

import gpuprofiler.kernels
from gpuprofiler.errors import UserError

# control characters that never occur in a text file (tab, newline, vertical tab, form feed and carriage
# return are allowed)
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _where(data: bytes | str, offset: int) -> tuple[int, int]:
    """Line and column (from 1) of ``offset`` in ``data``."""
    newline = b"\n" if isinstance(data, bytes) else "\n"
    line = data.count(newline, 0, offset) + 1
    column = offset - (data.rfind(newline, 0, offset) + 1) + 1
    return line, column


def decode(data: bytes, source: str, what: str) -> str:
    """``data`` as UTF-8 text without control characters; a UserError naming ``source`` and the line otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _where(data, exc.start)
        raise UserError(f"{source}:{line}:{column}: not UTF-8 text (byte 0x{data[exc.start]:02x}): a {what} must be "
                        "a text file") from None
    bad = _CONTROL.search(text)
    if bad is not None:
        line, column = _where(text, bad.start())
        raise UserError(f"{source}:{line}:{column}: control character {ord(bad.group()):#04x}: a {what} must be a "
                        "text file") from None
    return text


def read_text(path: str | Path, what: str, max_bytes: int, hint: str = "") -> str:
    """The text of the file ``path`` (a ``what``: "spec", "PTX file", "profile"), at most ``max_bytes`` long;
    ``hint`` follows the message of a missing file."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}{hint}") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path} is a directory, not a file") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a path with a NUL byte in it
        raise UserError(f"cannot read {what} {str(path)[:200]!r}: {exc}") from None
    if len(data) > max_bytes:
        raise UserError(f"{path}: larger than {max_bytes} bytes: too large for a {what}")
    return decode(data, str(path), what)


SOURCE_DIRS = "GPUPROFILER_SOURCE_DIRS"  # folders (os.pathsep-separated) a kernel's sources may also come from


def source_dirs(home: str | Path) -> list[Path]:
    """Where a kernel's sources and includes may be read from: ``home``'s folder tree (a spec's folder, an including
    file's), the builtin kernels' folder (``gpuprofiler.kernels``) and the folders named in
    ``$GPUPROFILER_SOURCE_DIRS``; each resolved (links followed)."""
    extra = [p for p in os.environ.get(SOURCE_DIRS, "").split(os.pathsep) if p.strip()]
    return [Path(home).resolve(), Path(gpuprofiler.kernels.__file__).parent.resolve(),
            *(Path(p).expanduser().resolve() for p in extra)]


def confined(path: str | Path, home: str | Path, what: str) -> Path:
    """``path`` resolved (links followed), where it lies inside :func:`source_dirs` of ``home`` and is a regular
    file; else a UserError that names the path, where it leads and how to allow another folder. A spec is data that
    may come from anyone: its sources must not reach outside its folder unless the user says so."""
    path = Path(path)
    try:
        real = path.resolve()
        regular = real.is_file()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop of links, a name too long, a NUL byte
        raise UserError(f"{what}: cannot resolve {str(path)[:200]!r}: {exc}") from None
    roots = source_dirs(home)
    if not any(real == r or r in real.parents for r in roots):
        led = f" (it leads to {real})" if real != path else ""
        raise UserError(f"{what}: {path}{led} lies outside {roots[0]}: a kernel's sources are read from its own "
                        f"folder; to allow another, name it in ${SOURCE_DIRS} (folders separated by "
                        f"{os.pathsep!r})")
    if not regular:
        raise UserError(f"{what}: {path} is not a regular file" if real.exists() else f"{what}: file not found: {path}")
    return real
