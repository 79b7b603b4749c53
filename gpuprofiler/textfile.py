"""Reading the text files the tool is given (specs, PTX, profiles) totally: as bytes, with a size limit, and
decoded as UTF-8 text; anything else is a :class:`~gpuprofiler.errors.UserError` that names the file and,
for a file that is not text, the line and column where it stops being text."""

from __future__ import annotations

import re
from pathlib import Path

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
