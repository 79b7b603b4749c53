"""Source-to-source instrumentation of a kernel's loops (Monakov et al.'s loop profiler, for OpenCL and CUDA).

Every ``for``, ``while`` and ``do`` loop of the kernel function gets two counters in each work-item: entries (the
loop statement reached) and iterations (its body entered); on CUDA also the cycles spent in it (``clock64``), and
the work-item's cycles in all. A work-item keeps its counters in registers and adds them to a global buffer with
64-bit atomics once, at the kernel's end: an OpenCL kernel's ``return;`` becomes a jump to that end; a CUDA kernel's
body becomes a ``__device__`` function that the new kernel calls.

The loops are found by scanning the source text (comments blanked, statements delimited by their parentheses,
braces and semicolons), so that the instrumented source is the user's own, with its preprocessor lines and
qualifiers, plus the counters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuprofiler.errors import UserError

SLOTS = 3  # per loop: entries, iterations, cycles


# the SM clock, read where the memory accesses around it are (a plain clock64() may move across them)
CLOCK = ("__device__ __forceinline__ long long __gp_clock(void)\n"
         "{\n    long long t;\n    asm volatile(\"mov.u64 %0, %%clock64;\" : \"=l\"(t) :: \"memory\");\n    return t;\n}\n")


@dataclass
class Loop:
    """A loop of the kernel's source: what the table shows and where the counters go."""

    index: int
    kind: str             # "for" | "while" | "do"
    line: int
    header: str           # the loop's first line, as written
    start: int            # the loop statement, [start, end) in the source
    end: int
    body_start: int       # its body, [body_start, body_end)
    body_end: int
    braced: bool          # the body is a { } block
    depth: int            # loops around it


@dataclass
class Instrumented:
    source: str
    kernel: str
    loops: list[Loop]
    slots: int            # counters in the global buffer: SLOTS per loop, then the work-items' own cycles


def _blank_comments(text: str) -> str:
    """Comments and string literals as spaces (newlines kept), so positions stay those of the source."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"', blank, text, flags=re.S)


class _Scanner:
    def __init__(self, text: str, where: str):
        self.t = text
        self.where = where

    def fail(self, pos: int, what: str) -> UserError:
        line = self.t.count("\n", 0, pos) + 1
        return UserError(f"{self.where}:{line}: cannot instrument the loops: {what}")

    def skip(self, pos: int) -> int:
        """Past whitespace and preprocessor lines (a ``#pragma unroll`` before a loop)."""
        t = self.t
        while pos < len(t):
            if t[pos].isspace():
                pos += 1
            elif t[pos] == "#" and (pos == 0 or t[:pos].rstrip(" \t").endswith("\n") or not t[:pos].strip()):
                nl = t.find("\n", pos)
                pos = len(t) if nl < 0 else nl + 1
            else:
                break
        return pos

    def match(self, pos: int, open_: str, close: str) -> int:
        """Position just past the bracket closing the one at ``pos``."""
        depth = 0
        for i in range(pos, len(self.t)):
            c = self.t[i]
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return i + 1
        raise self.fail(pos, f"unbalanced {open_}{close}")

    def word(self, pos: int) -> str:
        m = re.match(r"[A-Za-z_]\w*", self.t[pos:])
        return m.group(0) if m else ""

    def statement(self, pos: int) -> int:
        """Position just past the statement starting at ``pos``."""
        t = self.t
        pos = self.skip(pos)
        if pos >= len(t):
            raise self.fail(pos, "a statement is missing")
        if t[pos] == "{":
            return self.match(pos, "{", "}")
        w = self.word(pos)
        if w in ("if", "for", "while", "switch"):
            p = self.skip(pos + len(w))
            p = self.match(p, "(", ")")
            p = self.statement(p)
            if w == "if":
                q = self.skip(p)
                if self.word(q) == "else":
                    p = self.statement(q + 4)
            return p
        if w == "do":
            p = self.statement(pos + 2)
            p = self.skip(p)
            if self.word(p) != "while":
                raise self.fail(p, "do without while")
            p = self.match(self.skip(p + 5), "(", ")")
            p = self.skip(p)
            if p >= len(t) or t[p] != ";":
                raise self.fail(p, "do ... while (...) without ;")
            return p + 1
        depth = 0
        for i in range(pos, len(t)):
            c = t[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == ";" and depth == 0:
                return i + 1
        raise self.fail(pos, "a statement without ;")


def _kernel_body(text: str, kernel: str, where: str) -> tuple[int, int, int, int]:
    """(start of the declaration, position of its parameter list's ``(``, of its ``)``, of the body's ``{``) of the
    function named ``kernel``, and the position just past the body."""
    sc = _Scanner(text, where)
    for m in re.finditer(rf"\b{re.escape(kernel)}\s*\(", text):
        open_ = m.end() - 1
        close = sc.match(open_, "(", ")")
        brace = sc.skip(close)
        while brace < len(text) and text[brace] != "{" and text[brace] not in ";":
            brace += 1  # an attribute between the parameters and the body
        if brace < len(text) and text[brace] == "{":
            decl = text.rfind("\n", 0, m.start())
            decl = 0 if decl < 0 else decl + 1
            # the declaration may span lines: back up over lines that do not end a statement or block
            while decl > 0 and text[:decl].rstrip()[-1:] not in (";", "}", ""):
                prev = text.rfind("\n", 0, decl - 1)
                decl = 0 if prev < 0 else prev + 1
            return decl, open_, close - 1, brace
    raise UserError(f"{where}: no kernel function named {kernel!r} with a body")


def find_loops(source: str, kernel: str, where: str = "kernel") -> list[Loop]:
    """The loops of the kernel function's body, in source order."""
    text = _blank_comments(source)
    _, _, _, brace = _kernel_body(text, kernel, where)
    sc = _Scanner(text, where)
    end = sc.match(brace, "{", "}")
    loops: list[Loop] = []
    for m in re.finditer(r"\b(for|while|do)\b", text[brace:end]):
        pos = brace + m.start()
        kind = m.group(1)
        if kind == "while" and _closes_do(loops, pos):
            continue
        if kind in ("for", "while"):
            head_end = sc.match(sc.skip(pos + len(kind)), "(", ")")
            body = sc.skip(head_end)
        else:
            body = sc.skip(pos + 2)
        body_end = sc.statement(body)
        stmt_end = body_end
        if kind == "do":
            stmt_end = sc.statement(pos)
        line_no = text.count("\n", 0, pos) + 1
        first_line = source[pos: source.find("\n", pos) if source.find("\n", pos) >= 0 else len(source)].strip()
        depth = sum(1 for lp in loops if lp.body_start <= pos < lp.body_end)
        loops.append(Loop(len(loops), kind, line_no, first_line, _pragmas_before(text, pos), stmt_end, body,
                          body_end, text[body] == "{", depth))
    return loops


def _pragmas_before(text: str, pos: int) -> int:
    """Where the loop at ``pos`` starts counting its directives: a ``#pragma unroll`` must stay right before it,
    so the counters go before the pragma lines."""
    start = pos
    while True:
        line_start = text.rfind("\n", 0, start) + 1
        if text[line_start:start].strip():
            return start
        prev_end = line_start - 1
        if prev_end < 0:
            return start
        prev_start = text.rfind("\n", 0, prev_end) + 1
        if text[prev_start:prev_end].lstrip().startswith("#pragma"):
            start = prev_start
        else:
            return start


def _closes_do(loops: list[Loop], pos: int) -> bool:
    """Whether the ``while`` at ``pos`` is the tail of a ``do`` loop already found."""
    return any(lp.kind == "do" and lp.body_end <= pos < lp.end for lp in loops)


def instrument(source: str, kernel: str, api: str, where: str = "kernel") -> Instrumented:
    """The kernel's source with loop counters, and its loops. The kernel takes one more argument, last: a zeroed
    buffer of ``slots`` 64-bit counters."""
    if api not in ("opencl", "cuda"):
        raise UserError(f"unknown API {api!r}")
    loops = find_loops(source, kernel, where)
    text = _blank_comments(source)
    decl, p_open, p_close, brace = _kernel_body(text, kernel, where)
    end = _Scanner(text, where).match(brace, "{", "}")
    slots = SLOTS * len(loops) + 1
    # (position, order at that position, text): at one position openers go outermost first, closers innermost
    # first, and a loop's body closes before the loop's own counters do
    inserts: list[tuple[int, tuple, str]] = []
    cuda = api == "cuda"
    for lp in loops:
        e, i, c = SLOTS * lp.index, SLOTS * lp.index + 1, SLOTS * lp.index + 2
        enter = f"{{ __gp_c[{e}] += 1; " + (f"long long __gp_t{lp.index} = __gp_clock(); " if cuda else "")
        if source[lp.start] == "#":  # a directive before the loop keeps its own line
            enter += "\n"
        leave = (f" __gp_c[{c}] += __gp_clock() - __gp_t{lp.index};" if cuda else "") + " }"
        inserts += [(lp.start, (0, 2 * lp.depth), enter), (lp.end, (1, -2 * lp.depth), leave)]
        if lp.braced:
            inserts.append((lp.body_start + 1, (0, 2 * lp.depth + 1), f" __gp_c[{i}] += 1;"))
        else:
            inserts += [(lp.body_start, (0, 2 * lp.depth + 1), f"{{ __gp_c[{i}] += 1; "),
                        (lp.body_end, (1, -2 * lp.depth - 1), " }")]
    body = _apply(source, inserts, brace + 1, end - 1)
    params = source[p_open + 1:p_close].strip()
    names = _param_names(params, where)
    if cuda:
        out = (source[:decl] + CLOCK + f"__device__ __forceinline__ void __gp_body_{kernel}("
               + (f"{params}, " if params else "") + "unsigned long long *__gp_c)\n{" + body + "}\n"
               + f"extern \"C\" __global__ void {kernel}(" + (f"{params}, " if params else "")
               + "unsigned long long *__gp_out)\n{\n"
               + f"    unsigned long long __gp_c[{slots}];\n"
               + f"    for (int __gp_k = 0; __gp_k < {slots}; ++__gp_k) __gp_c[__gp_k] = 0;\n"
               + "    long long __gp_t = __gp_clock();\n"
               + f"    __gp_body_{kernel}(" + "".join(f"{n}, " for n in names) + "__gp_c);\n"
               + f"    __gp_c[{slots - 1}] += __gp_clock() - __gp_t;\n"
               + f"    for (int __gp_k = 0; __gp_k < {slots}; ++__gp_k)\n"
               + "        if (__gp_c[__gp_k]) atomicAdd(&__gp_out[__gp_k], __gp_c[__gp_k]);\n}\n"
               + source[end:])
    else:
        body = re.sub(r"\breturn\s*;", "goto __gp_exit;", body)
        out = ("#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n" + source[:p_close]
               + (", " if params else "") + "__global ulong *__gp_out" + source[p_close:brace + 1]
               + f"\n    ulong __gp_c[{slots}];\n"
               + f"    for (int __gp_k = 0; __gp_k < {slots}; ++__gp_k) __gp_c[__gp_k] = 0;\n"
               + body + "\n__gp_exit: ;\n"
               + f"    for (int __gp_k = 0; __gp_k < {slots} - 1; ++__gp_k)\n"
               + "        if (__gp_c[__gp_k]) atom_add(&__gp_out[__gp_k], __gp_c[__gp_k]);\n"
               + source[end - 1:])
    return Instrumented(out, kernel, loops, slots)


def _apply(source: str, inserts: list[tuple[int, tuple, str]], lo: int, hi: int) -> str:
    """``source[lo:hi]`` with the text insertions made (several at one place in their given order)."""
    out, at = [], lo
    for pos, _, text in sorted(inserts, key=lambda x: (x[0], x[1])):
        out.append(source[at:pos])
        out.append(text)
        at = pos
    out.append(source[at:hi])
    return "".join(out)


def _param_names(params: str, where: str) -> list[str]:
    """The parameter names of a parameter list: each parameter's last identifier (``const float *A`` -> A)."""
    names = []
    depth, cur = 0, ""
    for ch in params + ",":
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            ids = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[[^\]]*\]", "", cur))
            if ids:
                names.append(ids[-1])
            cur = ""
        else:
            cur += ch
    if params.strip() and not names:
        raise UserError(f"{where}: cannot read the kernel's parameter names")
    return names
