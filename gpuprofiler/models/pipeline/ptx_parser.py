"""PTX text -> entries with parameters, registers, shared variables, labels and instructions (with line numbers).

Covers what nvcc emits for ordinary kernels: module directives, ``.entry``/``.func`` with parameters and
performance directives, ``.reg`` (including ``%r<N>`` families), ``.shared``/``.local`` variables,
labels, predicated instructions with all modifiers, memory, vector and ``p|q`` operands, ``//`` and
``/* */`` comments and nested ``{ }`` scopes (inline-asm blocks; their registers are renamed apart).
Anything else is refused with a :class:`~gpuprofiler.errors.UserError` naming the line.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpuprofiler.errors import UserError

TYPE_BYTES = {"b8": 1, "s8": 1, "u8": 1, "b16": 2, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "b32": 4, "s32": 4,
              "u32": 4, "f32": 4, "tf32": 4, "f16x2": 4, "bf16x2": 4, "b64": 8, "s64": 8, "u64": 8, "f64": 8,
              "b128": 16, "pred": 1, "e4m3x2": 2, "e5m2x2": 2}
SPECIAL_PREFIXES = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
                    "%gridid", "%clock", "%clock64", "%lanemask_", "%pm", "%envreg", "%globaltimer",
                    "%dynamic_smem_size", "%total_smem_size", "%cluster", "%is_explicit_cluster",
                    "%aggr_smem_size", "%reserved_smem")
# instruction bases the model understands (unit classes in tasks.py); the rest are refused with a reason
SUPPORTED = frozenset(["add", "sub", "mul", "mad", "mul24", "mad24", "sad", "div", "rem", "abs", "neg", "min", "max", "popc", "clz", "bfind", "brev", "bfe", "bfi", "prmt", "fns", "and", "or", "xor", "not", "cnot", "lop3", "shl", "shr", "shf", "dp4a", "dp2a", "copysign", "testp", "fma", "rcp", "sqrt", "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "set", "setp", "selp", "slct", "mov", "cvt", "cvta", "ld", "ldu", "st", "prefetch", "prefetchu", "isspacep", "atom", "red", "vote", "match", "shfl", "activemask", "redux", "bar", "barrier", "membar", "fence", "ret", "exit", "bra", "trap", "nanosleep", "pmevent", "addc", "subc", "madc", "mul.hi", "cvt.pack", "alloca", "elect", "griddepcontrol", "discard", "applypriority", "createpolicy"])
UNSUPPORTED = {
    "call": "calls to device functions are not modelled (inline them: __forceinline__, or compile with -O3)",
    "brx": "indirect branches (brx.idx) have no static target",
    "tex": "texture fetches are not modelled", "tld4": "texture fetches are not modelled",
    "txq": "texture queries are not modelled", "suld": "surface loads are not modelled",
    "sust": "surface stores are not modelled", "sured": "surface reductions are not modelled",
    "suq": "surface queries are not modelled", "mma": "tensor-core mma is not modelled",
    "wmma": "tensor-core wmma is not modelled", "wgmma": "tensor-core wgmma is not modelled",
    "ldmatrix": "ldmatrix is not modelled", "stmatrix": "stmatrix is not modelled",
    "cp": "asynchronous copies (cp.async) are not modelled", "mbarrier": "mbarrier is not modelled",
    "tensormap": "tensor maps are not modelled", "setmaxnreg": "setmaxnreg is not modelled",
}
# the fewest operands each instruction the model evaluates takes (PTX ISA; a destination counts), and those that
# address memory: a line with fewer, or without its address, is malformed and refused naming the line
MIN_OPERANDS = {
    **dict.fromkeys(["bra", "prefetch", "prefetchu"], 1),
    **dict.fromkeys(["mov", "cvt", "cvta", "neg", "abs", "not", "cnot", "popc", "clz", "brev", "bfind", "rcp", "sqrt",
                     "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "testp", "isspacep", "ld", "ldu", "st", "red",
                     "alloca"], 2),
    **dict.fromkeys(["add", "sub", "mul", "mul24", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
                     "copysign", "set", "setp", "addc", "subc", "atom"], 3),
    **dict.fromkeys(["mad", "mad24", "sad", "fma", "selp", "slct", "bfe", "prmt", "madc", "shf", "dp4a", "dp2a"], 4),
    **dict.fromkeys(["bfi", "lop3"], 5),
}
ADDRESSED = frozenset(["ld", "ldu", "st", "red", "atom", "prefetch", "prefetchu"])
MAX_REGISTERS = 65536     # registers one `.reg .b32 %r<N>` declaration may declare (a whole SM's register file)
MAX_TOKEN = 4096          # characters of one name or number (mangled C++ names run to a few hundred)
MAX_VECTOR_NESTING = 2    # `{ }` inside an operand: a vector of registers, never deeper
NO_DEST = frozenset(["st", "red", "bar", "barrier", "bra", "ret", "exit", "membar", "fence", "prefetch", "prefetchu", "trap", "nanosleep", "pmevent", "griddepcontrol", "discard", "applypriority"])


@dataclass(frozen=True)
class Operand:
    """One operand: ``kind`` is reg, special, imm, fimm, symbol, mem, vec or sink."""

    kind: str
    text: str
    name: str | None = None           # register / special / symbol name; base of a mem operand
    value: float | int | None = None  # immediate value; offset of a mem operand
    items: tuple[Operand, ...] = ()
    neg: bool = False                 # !pred


@dataclass
class Instruction:
    """One PTX instruction with its guard, operands and the registers it writes and reads."""

    index: int
    line: int
    text: str
    opcode: str
    base: str
    mods: tuple[str, ...]
    operands: tuple[Operand, ...]
    guard: str | None = None
    guard_neg: bool = False
    dsts: tuple[str, ...] = ()
    srcs: tuple[str, ...] = ()

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(m for m in self.mods if m in TYPE_BYTES)

    @property
    def type(self) -> str | None:
        t = self.types
        return t[-1] if t else None

    @property
    def space(self) -> str | None:
        for m in self.mods:
            if m in ("global", "shared", "local", "param", "const", "generic", "shared::cta", "shared::cluster"):
                return m.split("::")[0]
        return None

    @property
    def vector(self) -> int:
        for m in self.mods:
            if m in ("v2", "v4", "v8"):
                return int(m[1])
        return 1

    @property
    def target(self) -> str | None:
        """Branch target label of ``bra``."""
        if self.base == "bra" and self.operands and self.operands[0].kind == "symbol":
            return self.operands[0].name
        return None


@dataclass
class Param:
    name: str
    type: str
    bytes: int
    pointer: bool = False


@dataclass
class Entry:
    """A kernel (``.entry``) or device function (``.func``) with its body."""

    name: str
    kind: str
    line: int
    params: list[Param] = field(default_factory=list)
    regs: dict[str, str] = field(default_factory=dict)             # explicit name -> type
    families: dict[str, tuple[str, int]] = field(default_factory=dict)  # %r<N>: prefix -> (type, N)
    shared: dict[str, int] = field(default_factory=dict)           # static shared variable -> bytes
    shared_extern: list[str] = field(default_factory=list)         # extern (dynamic) shared arrays
    local_bytes: int = 0
    directives: dict[str, list[int]] = field(default_factory=dict)
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)           # label -> index of the next instruction

    @property
    def shared_bytes(self) -> int:
        return sum(self.shared.values())

    def reg_type(self, name: str) -> str | None:
        if name in self.regs:
            return self.regs[name]
        base, _, sid = name.partition("$")
        m = re.fullmatch(r"(.*?)(\d+)", base)
        if m:
            fam = self.families.get(m.group(1) + (f"${sid}" if sid else ""))
            if fam is not None:
                return fam[0]
        return None


@dataclass
class Module:
    """A parsed PTX file."""

    source: str
    version: str | None = None
    target: list[str] = field(default_factory=list)
    address_size: int = 64
    entries: dict[str, Entry] = field(default_factory=dict)
    functions: dict[str, Entry] = field(default_factory=dict)
    globals: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def arch(self) -> str | None:
        for t in self.target:
            if t.startswith("sm_"):
                return t
        return None

    def entry(self, name: str | None) -> Entry:
        """The kernel named ``name`` (or the only one); a UserError lists the kernels otherwise."""
        if name is None:
            if len(self.entries) == 1:
                return next(iter(self.entries.values()))
            raise UserError(f"{self.source}: {len(self.entries)} kernels ({', '.join(self.entries) or 'none'}); "
                            "choose one with --kernel")
        if name not in self.entries:
            raise UserError(f"{self.source}: no kernel {name!r} (kernels: {', '.join(self.entries) or 'none'})")
        return self.entries[name]


# ------------------------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Token:
    kind: str   # str, num, ident, punct
    text: str
    line: int


_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<num>0[fF][0-9a-fA-F]{8}(?![\w.])|0[dD][0-9a-fA-F]{16}(?![\w.])|0[xX][0-9a-fA-F]+U?|0[bB][01]+U?
           |[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+U?)
  | (?P<ident>[%$.]?[A-Za-z_$][\w$]*(?:(?:\.|::)[\w$]+)*)
  | (?P<punct>[{}()\[\];,:@!+\-<>=|*])
""", re.VERBOSE)


def strip_comments(text: str, source: str = "<ptx>") -> str:
    """``//`` and ``/* */`` comments replaced by spaces; newlines (and so line numbers) kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise UserError(f"{source}:{text.count(chr(10), 0, i) + 1}: unterminated /* comment")
            chunk = text[i:j + 2]
            out.append("".join("\n" if ch == "\n" else " " for ch in chunk))
            i = j + 2
        else:
            j = i
            while j < n and text[j] not in '"/':
                j += 1
            if j == i:  # a lone '/'
                j += 1
            out.append(text[i:j])
            i = j
    return "".join(out)


def tokenize(text: str, source: str = "<ptx>") -> list[Token]:
    text = strip_comments(text, source)
    tokens: list[Token] = []
    line, pos, n = 1, 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise UserError(f"{source}:{line}: unexpected character {text[pos]!r} in PTX")
        kind = m.lastgroup
        if kind == "nl":
            line += 1
        elif kind != "ws":
            if kind in ("num", "ident") and m.end() - m.start() > MAX_TOKEN:
                raise UserError(f"{source}:{line}: a name or number longer than {MAX_TOKEN} characters")
            tokens.append(Token(kind, m.group(), line))
        pos = m.end()
    return tokens


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t, 16)
    if t[:2] in ("0b", "0B"):
        return int(t, 2)
    if len(t) > 1 and t[0] == "0" and t.isdigit():
        return int(t, 8)
    return int(t)


def parse_number(text: str) -> int | float:
    if text[:2] in ("0f", "0F"):
        return struct.unpack(">f", bytes.fromhex(text[2:]))[0]
    if text[:2] in ("0d", "0D"):
        return struct.unpack(">d", bytes.fromhex(text[2:]))[0]
    if re.fullmatch(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+", text):
        return float(text)
    return parse_int(text)


# ------------------------------------------------------------------------------------------------
# Parser
# ------------------------------------------------------------------------------------------------

class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.toks = tokenize(text, source)
        self.i = 0
        self.module = Module(source)
        self.lines = text.splitlines()

    # -- helpers ---------------------------------------------------------------------------
    def error(self, line: int, message: str) -> UserError:
        shown = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return UserError(f"{self.source}:{line}: {message}" + (f"  [{shown}]" if shown else ""))

    def integer(self, tok: Token | None, line: int, what: str, bits: int = 64) -> int:
        """The whole number ``tok`` holds (at most ``bits`` bits); a UserError naming the line otherwise."""
        if tok is None or tok.kind != "num":
            raise self.error(line, f"expected {what}, found {tok.text if tok is not None else 'nothing'!r}")
        try:
            value = parse_int(tok.text)
        except ValueError:
            raise self.error(tok.line, f"expected {what} (a whole number), found {tok.text!r}") from None
        if abs(value) >= 2 ** bits:
            raise self.error(tok.line, f"{what} {tok.text[:40]} does not fit in {bits} bits")
        return value

    def number(self, tok: Token) -> int | float:
        """An immediate operand's value: a whole number of at most 64 bits, or a float."""
        value = parse_number(tok.text)
        if isinstance(value, int) and abs(value) >= 2 ** 64:
            raise self.error(tok.line, f"the immediate {tok.text[:40]} does not fit in 64 bits")
        return value

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            last = self.toks[-1].line if self.toks else 1
            raise self.error(last, "unexpected end of PTX")
        self.i += 1
        return tok

    def expect(self, text: str) -> Token:
        tok = self.next()
        if tok.text != text:
            raise self.error(tok.line, f"expected {text!r}, found {tok.text!r}")
        return tok

    def until_semicolon(self) -> list[Token]:
        """Tokens up to the next ';' at brace depth 0 (consumed, not returned)."""
        out: list[Token] = []
        depth = 0
        while True:
            tok = self.next()
            if tok.text == ";" and depth == 0:
                return out
            if tok.text == "{":
                depth += 1
            elif tok.text == "}":
                depth -= 1
                if depth < 0:
                    raise self.error(tok.line, "unbalanced '}' (missing ';'?)")
            out.append(tok)

    def rest_of_line(self, line: int) -> list[Token]:
        out = []
        while self.peek() is not None and self.peek().line == line and self.peek().text != ";":
            out.append(self.next())
        if self.peek() is not None and self.peek().text == ";" and self.peek().line == line:
            self.next()
        return out

    def skip_braces(self) -> None:
        self.expect("{")
        depth = 1
        while depth:
            tok = self.next()
            depth += {"{": 1, "}": -1}.get(tok.text, 0)

    # -- module ----------------------------------------------------------------------------
    def parse(self) -> Module:
        mod = self.module
        while self.peek() is not None:
            tok = self.peek()
            t = tok.text
            if t == ".version":
                self.next()
                mod.version = "".join(x.text for x in self.rest_of_line(tok.line))
            elif t == ".target":
                self.next()
                mod.target = [x.text for x in self.rest_of_line(tok.line) if x.text != ","]
            elif t == ".address_size":
                self.next()
                rest = self.rest_of_line(tok.line)
                mod.address_size = self.integer(rest[0], tok.line, "an address size") if rest else 64
                if mod.address_size not in (32, 64):
                    raise self.error(tok.line, f".address_size {mod.address_size}: expected 32 or 64")
            elif t in (".file", ".loc"):
                self.next()
                self.rest_of_line(tok.line)
            elif t in (".visible", ".extern", ".weak", ".common"):
                self.next()
            elif t in (".entry", ".func"):
                self.parse_function()
            elif t in (".global", ".const", ".shared", ".local", ".tex", ".surfref", ".samplerref", ".texref"):
                toks = self.until_semicolon()
                name, size = self.var_decl(toks, tok.line)
                mod.globals[name] = (t[1:], size)
            elif t == ".section":
                self.next()
                while self.peek() is not None and self.peek().text != "{":
                    self.next()
                self.skip_braces()
            elif t in (".pragma", ".alias"):
                self.until_semicolon()
            else:
                raise self.error(tok.line, f"unsupported PTX at module level: {t!r}")
        if not mod.entries:
            raise UserError(f"{self.source}: no kernel (.entry) in the PTX")
        return mod

    def var_decl(self, toks: list[Token], line: int) -> tuple[str, int]:
        """Name and size in bytes of a variable declaration ``.shared .align 4 .b8 name[1024]``."""
        elem, vec, name, dims, k = 1, 1, None, [], 0
        while k < len(toks):
            x = toks[k].text
            if x == "=":
                break
            if x == ".align":
                k += 2
                continue
            if x.startswith(".") and x[1:] in TYPE_BYTES:
                elem = TYPE_BYTES[x[1:]]
            elif x in (".v2", ".v4", ".v8"):
                vec = int(x[2])
            elif x.startswith(".") or x.startswith("%") and name is not None:
                pass
            elif x == "[":
                if k + 1 < len(toks) and toks[k + 1].text == "]":
                    dims.append(None)
                    k += 2
                    continue
                dims.append(self.integer(toks[k + 1] if k + 1 < len(toks) else None, line, "an array extent"))
                if k + 2 >= len(toks) or toks[k + 2].text != "]":
                    raise self.error(line, "expected ']' after an array extent")
                if dims[-1] < 0:
                    raise self.error(line, f"negative array extent {dims[-1]}")
                k += 3
                continue
            elif toks[k].kind == "ident" and name is None:
                name = x
            k += 1
        if name is None:
            raise self.error(line, "variable declaration without a name")
        if any(d is None for d in dims):
            return name, -1
        size = elem * vec
        for d in dims:
            size *= d
        return name, size

    def parse_function(self) -> None:
        kw = self.next()
        kind = kw.text[1:]
        ret: list[Token] = []
        if self.peek() is not None and self.peek().text == "(":
            ret = self.group("(", ")")
        name_tok = self.next()
        if name_tok.kind != "ident":
            raise self.error(name_tok.line, f"expected a function name after {kw.text}")
        entry = Entry(name_tok.text, kind, name_tok.line)
        if self.peek() is not None and self.peek().text == "(":
            for ptoks in self.split_commas(self.group("(", ")")):
                entry.params.append(self.param(ptoks))
        del ret
        # performance directives
        while self.peek() is not None and self.peek().text not in ("{", ";"):
            tok = self.next()
            if tok.text in (".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".maxclusterrank",
                            ".reqnctapercluster", ".nctapersm"):
                vals = []
                while self.peek() is not None and (self.peek().kind == "num" or self.peek().text == ","):
                    t = self.next()
                    if t.kind == "num":
                        vals.append(self.integer(t, t.line, f"a {tok.text} value"))
                entry.directives[tok.text[1:]] = vals
            elif tok.text in (".noreturn", ".explicitcluster", ".abi_preserve", ".abi_preserve_control"):
                continue
            elif tok.text == ".pragma":
                self.until_semicolon()
            else:
                raise self.error(tok.line, f"unsupported directive {tok.text!r} in the header of {entry.name}")
        if self.next().text == ";":
            return  # a declaration only
        self.body(entry)
        (self.module.entries if kind == "entry" else self.module.functions)[entry.name] = entry

    def group(self, open_: str, close: str) -> list[Token]:
        self.expect(open_)
        out, depth = [], 1
        while True:
            tok = self.next()
            if tok.text == open_:
                depth += 1
            elif tok.text == close:
                depth -= 1
                if depth == 0:
                    return out
            out.append(tok)

    @staticmethod
    def split_commas(toks: list[Token]) -> list[list[Token]]:
        parts: list[list[Token]] = [[]]
        depth = 0
        for t in toks:
            if t.text in "[{(":
                depth += 1
            elif t.text in "]})":
                depth -= 1
            if t.text == "," and depth == 0:
                parts.append([])
            else:
                parts[-1].append(t)
        return [p for p in parts if p]

    def param(self, toks: list[Token]) -> Param:
        typ, name, pointer, size, dims = "b32", None, False, None, 1
        k = 0
        while k < len(toks):
            x = toks[k].text
            if x == ".align":
                k += 2
                continue
            if x == ".ptr":
                pointer = True
            elif x.startswith(".") and x[1:] in TYPE_BYTES:
                typ = x[1:]
            elif x == "[":
                dims = self.integer(toks[k + 1] if k + 1 < len(toks) else None, toks[k].line, "a parameter's extent")
                if dims < 0:
                    raise self.error(toks[k].line, f"negative parameter extent {dims}")
                k += 3
                continue
            elif not x.startswith(".") and toks[k].kind == "ident":
                name = x
            k += 1
        if name is None:
            raise self.error(toks[0].line, "parameter without a name")
        size = TYPE_BYTES.get(typ, 4) * dims
        return Param(name, typ, size, pointer)

    # -- body ------------------------------------------------------------------------------
    def body(self, entry: Entry) -> None:
        scopes: list[dict[str, str]] = [{}]
        scope_id = 0
        while True:
            tok = self.peek()
            if tok is None:
                raise self.error(entry.line, f"unterminated body of {entry.name} (missing '}}')")
            t = tok.text
            if t == "{":
                self.next()
                scope_id += 1
                scopes.append({"$scope": str(scope_id)})
                continue
            if t == "}":
                self.next()
                scopes.pop()
                if not scopes:
                    return
                continue
            if t == ";":
                self.next()
                continue
            nxt = self.peek(1)
            if tok.kind == "ident" and not t.startswith(".") and nxt is not None and nxt.text == ":":
                self.next()
                self.next()
                if t in entry.labels:
                    raise self.error(tok.line, f"label {t} defined twice")
                entry.labels[t] = len(entry.instructions)
                continue
            if t == ".reg":
                self.reg_decl(entry, self.until_semicolon(), scopes)
                continue
            if t in (".shared", ".local", ".param", ".const", ".global"):
                toks = self.until_semicolon()
                name, size = self.var_decl(toks, tok.line)
                if t == ".shared":
                    if size < 0:
                        entry.shared_extern.append(name)
                    else:
                        entry.shared[name] = size
                elif t == ".local":
                    entry.local_bytes += max(size, 0)
                continue
            if t in (".pragma", ".maxnreg", ".maxntid", ".reqntid"):
                self.until_semicolon()
                continue
            if t in (".loc", ".file"):
                self.next()
                self.rest_of_line(tok.line)
                continue
            if t.startswith("."):
                raise self.error(tok.line, f"unsupported directive {t!r} in the body of {entry.name}")
            self.instruction(entry, self.until_semicolon(), scopes)

    def reg_decl(self, entry: Entry, toks: list[Token], scopes: list[dict[str, str]]) -> None:
        typ = None
        k = 1
        while k < len(toks) and toks[k].text.startswith("."):
            x = toks[k].text[1:]
            if x in TYPE_BYTES:
                typ = x
            k += 1
        if typ is None:
            raise self.error(toks[0].line, "register declaration without a type")
        for part in self.split_commas(toks[k:]):
            name = part[0].text
            if part[0].kind != "ident":
                raise self.error(part[0].line, f"expected a register name, found {name!r}")
            unique = name if len(scopes) == 1 else f"{name}${scopes[-1]['$scope']}"
            if len(part) >= 2 and part[1].text == "<":
                count = self.integer(part[2] if len(part) > 2 else None, part[0].line, "a register count")
                if len(part) != 4 or part[3].text != ">":
                    raise self.error(part[0].line, f"expected {name}<N> in a register declaration")
                if not 0 <= count <= MAX_REGISTERS:
                    raise self.error(part[0].line, f"{name}<{count}> declares {count} registers: the limit is "
                                                   f"{MAX_REGISTERS} per declaration")
                entry.families[unique] = (typ, count)
                scopes[-1][name + "<>"] = unique
            else:
                entry.regs[unique] = typ
                scopes[-1][name] = unique

    def resolve(self, entry: Entry, name: str, scopes: list[dict[str, str]]) -> str | None:
        """The unique register name for ``name`` in the current scopes, or None."""
        m = re.fullmatch(r"(.*?)(\d+)", name)
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
            if m and (m.group(1) + "<>") in scope:
                key = scope[m.group(1) + "<>"]
                if int(m.group(2)) < entry.families[key][1]:
                    sid = scope.get("$scope")
                    return name + (f"${sid}" if sid else "")
        return None

    def operand(self, entry: Entry, toks: list[Token], scopes: list[dict[str, str]]) -> Operand:
        line = toks[0].line
        text = " ".join(t.text for t in toks)
        first = toks[0].text
        if first == "[":
            if toks[-1].text != "]":
                raise self.error(line, f"bad address operand {text!r}")
            inner = toks[1:-1]
            if not inner:
                raise self.error(line, "empty address operand []")
            base, offset, k, is_reg = None, 0, 0, False
            if inner[0].kind == "ident":
                reg = self.resolve(entry, inner[0].text, scopes)
                base, is_reg = (reg, True) if reg is not None else (inner[0].text, False)
                if not is_reg and inner[0].text.startswith("%"):
                    raise self.error(line, f"undeclared register {inner[0].text}")
                k = 1
            elif inner[0].kind == "num":
                offset = self.integer(inner[0], line, "an address", bits=63)
                k = 1
            sign = 1
            while k < len(inner):
                x = inner[k].text
                if x == "+":
                    pass
                elif x == "-":
                    sign = -sign
                elif inner[k].kind == "num":
                    offset += sign * self.integer(inner[k], line, "an address offset", bits=63)
                    sign = 1
                else:
                    raise self.error(line, f"unsupported address expression {text!r}")
                k += 1
            if abs(offset) >= 2 ** 63:
                raise self.error(line, f"the address offset {offset} does not fit in 63 bits")
            return Operand("mem", text, base, offset,
                           items=(Operand("reg" if is_reg else "symbol", base, base),) if base else ())
        if first == "{":
            if toks[-1].text != "}":
                raise self.error(line, f"bad vector operand {text!r}")
            if sum(t.text == "{" for t in toks) > MAX_VECTOR_NESTING:
                raise self.error(line, f"vector operand nested too deeply: {text[:80]!r}")
            items = tuple(self.operand(entry, p, scopes) for p in self.split_commas(toks[1:-1]))
            return Operand("vec", text, items=items)
        if len(toks) == 3 and toks[1].text == "|":
            a = self.operand(entry, [toks[0]], scopes)
            b = self.operand(entry, [toks[2]], scopes)
            return Operand("vec", text, items=(a, b))
        if first == "!" and len(toks) == 2:
            op = self.operand(entry, toks[1:], scopes)
            return Operand(op.kind, text, op.name, op.value, op.items, neg=True)
        if first == "-" and len(toks) == 2 and toks[1].kind == "num":
            v = self.number(toks[1])
            return Operand("fimm" if isinstance(v, float) else "imm", text, value=-v)
        if len(toks) != 1:
            # symbol+offset outside brackets (e.g. mov.u64 %rd1, sym+8)
            if toks[0].kind == "ident" and len(toks) == 3 and toks[1].text in "+-" and toks[2].kind == "num":
                off = self.integer(toks[2], line, "an offset", bits=63) * (1 if toks[1].text == "+" else -1)
                return Operand("symbol", text, toks[0].text, off)
            raise self.error(line, f"unsupported operand {text!r}")
        tok = toks[0]
        if tok.kind == "num":
            v = self.number(tok)
            return Operand("fimm" if isinstance(v, float) else "imm", text, value=v)
        if tok.text == "_":
            return Operand("sink", text)
        if tok.kind == "ident":
            reg = self.resolve(entry, tok.text, scopes)
            if reg is not None:
                return Operand("reg", text, reg)
            if tok.text.startswith("%"):
                if tok.text.startswith(SPECIAL_PREFIXES):
                    return Operand("special", text, tok.text)
                base = re.sub(r"\.[xyzwrgba]$", "", tok.text)
                reg = self.resolve(entry, base, scopes)
                if reg is not None:
                    return Operand("reg", text, reg)
                raise self.error(line, f"undeclared register {tok.text}")
            return Operand("symbol", text, tok.text)
        raise self.error(line, f"unsupported operand {text!r}")

    def instruction(self, entry: Entry, toks: list[Token], scopes: list[dict[str, str]]) -> None:
        line = toks[0].line
        guard, guard_neg, k = None, False, 0
        if toks[0].text == "@":
            k = 1
            if k < len(toks) and toks[k].text == "!":
                guard_neg, k = True, k + 1
            if k >= len(toks):
                raise self.error(line, "a guard '@' without a predicate")
            guard = self.resolve(entry, toks[k].text, scopes)
            if guard is None:
                raise self.error(line, f"undeclared guard predicate {toks[k].text}")
            k += 1
        if k >= len(toks) or toks[k].kind != "ident":
            raise self.error(line, "expected an instruction")
        opcode = toks[k].text
        parts = opcode.split(".")
        base, mods = parts[0], tuple(parts[1:])
        if base in UNSUPPORTED:
            raise self.error(line, f"unsupported PTX instruction {opcode!r}: {UNSUPPORTED[base]}")
        if base not in SUPPORTED:
            raise self.error(line, f"unsupported PTX instruction {opcode!r} (not in the pipeline model's opcode table)")
        operands = tuple(self.operand(entry, p, scopes) for p in self.split_commas(toks[k + 1:]))
        text = " ".join(t.text for t in toks)
        need = MIN_OPERANDS.get(base, 0) + (1 if base == "setp" and any(m in ("and", "or", "xor") for m in mods) else 0)
        if len(operands) < need:
            raise self.error(line, f"{opcode} takes at least {need} operands, found {len(operands)}")
        if base in ADDRESSED and not any(op.kind == "mem" for op in operands):
            raise self.error(line, f"{opcode} needs an address operand [...]")
        if base in MIN_OPERANDS and base not in NO_DEST and base not in ("bra", "prefetch", "prefetchu") \
                and operands[0].kind not in ("reg", "vec", "sink"):
            raise self.error(line, f"the destination of {opcode} must be a register, not {operands[0].text!r}")
        dsts: list[str] = []
        srcs: list[str] = [guard] if guard else []

        def regs(op: Operand) -> Iterator[str]:
            if op.kind == "reg":
                yield op.name
            elif op.kind == "mem":
                for it in op.items:
                    if it.kind == "reg":
                        yield it.name
            elif op.kind == "vec":
                for it in op.items:
                    yield from regs(it)

        for j, op in enumerate(operands):
            if j == 0 and base not in NO_DEST and op.kind in ("reg", "vec"):
                dsts.extend(regs(op))
            else:
                srcs.extend(regs(op))
        if ("cc" in mods and base in ("add", "sub", "mad")) or base in ("addc", "subc", "madc"):
            if base in ("addc", "subc", "madc"):
                srcs.append("%cc")
            if "cc" in mods:
                dsts.append("%cc")
        ins = Instruction(len(entry.instructions), line, text, opcode, base, mods, operands, guard, guard_neg,
                          tuple(dict.fromkeys(dsts)), tuple(dict.fromkeys(srcs)))
        if base == "bra" and ins.target is None:
            raise self.error(line, "branch without a label target")
        entry.instructions.append(ins)


def parse_ptx(text: str, source: str = "<ptx>") -> Module:
    """Parse PTX text; every problem is a UserError naming ``source`` and the line."""
    module = _Parser(text, source).parse()
    for entry in list(module.entries.values()) + list(module.functions.values()):
        for ins in entry.instructions:
            if ins.base == "bra" and ins.target not in entry.labels:
                raise UserError(f"{source}:{ins.line}: branch to undefined label {ins.target}")
    return module
