"""What the fuzz tests share: the CLI run in-process on a generated input, and the promise checked on every run.

The promise (issue 17): whatever the input, the tool ends with exit 0, 2 (a user error) or 3 (a device error),
prints no Python traceback, does not hang, and creates no file. ``run_cli`` runs ``gpuprofiler ARGS`` through
:func:`gpuprofiler.cli.main.main` in an empty working directory and checks all of it.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

from hypothesis import event
from hypothesis.control import currently_in_test_context

from gpuprofiler.cli.main import main

ALLOWED = {0, 2, 3}
MAX_SECONDS = 60.0  # one case: far above what any case takes (a hang shows as a case that never ends)


def run_cli(*argv, inputs: dict[str, bytes] | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``gpuprofiler ARGV`` run in-process in a fresh directory holding
    ``inputs`` (name -> bytes; ``{name}`` in an argument is that file's path). Asserts the promise."""
    with tempfile.TemporaryDirectory(prefix="gpuprofiler-fuzz-") as tmp:
        folder = Path(tmp)
        for name, data in (inputs or {}).items():
            (folder / name).write_bytes(data)
        before = sorted(p.name for p in folder.iterdir())
        args = [str(a) for a in argv]
        for name in inputs or {}:
            args = [a.replace("{" + name + "}", str(folder / name)) for a in args]
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(folder)
        started = time.monotonic()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(args)
        finally:
            os.chdir(cwd)
        took = time.monotonic() - started
        after = sorted(p.name for p in folder.iterdir())
    stdout, stderr = out.getvalue(), err.getvalue()
    shown = f"gpuprofiler {' '.join(args)}\nexit {code}\nstderr: {stderr[-2000:]}"
    assert code in ALLOWED, shown
    assert "Traceback" not in stderr and "Traceback" not in stdout, shown
    assert after == before, f"files created: {sorted(set(after) - set(before))}\n{shown}"
    assert took < MAX_SECONDS, f"took {took:.1f} s\n{shown}"
    if code == 2:
        assert "gpuprofiler: error: " in stderr, shown
    if currently_in_test_context():
        event(f"{argv[0]}: exit {code}")  # the mix of outcomes: pytest --hypothesis-show-statistics
    return code, stdout, stderr


def mutate_bytes(data: bytes, draw, st) -> bytes:
    """One byte-level mutation of ``data`` drawn with hypothesis: truncate, flip a byte, delete or duplicate a
    line, insert a huge number or a non-UTF-8 byte, delete a brace."""
    kind = draw(st.sampled_from(["truncate", "flip", "delete_line", "duplicate_line", "huge_number", "bad_byte",
                                 "delete_brace", "swap_lines"]))
    lines = data.split(b"\n")
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data)))]
    if kind == "flip":
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:] if data else data
    if kind in ("delete_line", "duplicate_line", "swap_lines"):
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "delete_line":
            del lines[i]
        elif kind == "duplicate_line":
            lines.insert(i, lines[i])
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if kind == "huge_number":
        number = draw(st.sampled_from([b"99999999999999999999999999", b"100000000", b"-1", b"0", b"1e400",
                                       b"0x" + b"f" * 30, b"65537", b"4294967296", b"NaN", b"-0.0"]))
        digits = [i for i, c in enumerate(data) if 48 <= c <= 57]
        if not digits:
            return data + number
        i = draw(st.sampled_from(digits))
        j = i
        while j < len(data) and 48 <= data[j] <= 57:
            j += 1
        return data[:i] + number + data[j:]
    if kind == "bad_byte":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.sampled_from([b"\xff", b"\x00", b"\xc3", b"\x1b", b"\xe2\x82"])) + data[i:]
    braces = [i for i, c in enumerate(data) if c in b"{}[]()"]
    if not braces:
        return data
    i = draw(st.sampled_from(braces))
    return data[:i] + data[i + 1:]
