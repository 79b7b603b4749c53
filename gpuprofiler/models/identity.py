"""Which cases are the same kernel: a digest of a kernel function's code up to names, layout and the order of
commutative operands, so that the learned correction's leave-one-kernel-out leaves out every copy of a kernel
(an app's ``spmv`` is a builtin ``spmv_csr`` under other names; ``y[i] += a * x[i]`` is ``y[i] = a * x[i] + y[i]``).
"""

from __future__ import annotations

import copy
import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from pycparser import c_ast, c_generator

from gpuprofiler.errors import UserError

COMMUTATIVE = {"+", "*", "==", "!=", "&&", "||", "&", "|", "^"}


class _Canon(c_ast.NodeVisitor):
    """Renames parameters by position and locals by declaration order, expands ``a op= b`` to ``a = a op b``
    and orders the operands of commutative operators by their text."""

    def __init__(self, params: list[str]):
        self.names = {p: f"p{i}" for i, p in enumerate(params)}
        self.gen = c_generator.CGenerator()

    def rename(self, name: str) -> str:
        return self.names.get(name, name)

    def generic_visit(self, node: Any) -> None:
        for _, child in node.children():
            self.visit(child)

    def visit_Decl(self, node: c_ast.Decl) -> None:
        if node.name is not None and node.name not in self.names:
            self.names[node.name] = f"l{sum(1 for v in self.names.values() if v.startswith('l'))}"
        new = self.rename(node.name) if node.name else None
        node.name = new
        t = node.type
        while t is not None and not isinstance(t, c_ast.TypeDecl):
            t = getattr(t, "type", None)
        if isinstance(t, c_ast.TypeDecl) and t.declname is not None:
            t.declname = new
        self.generic_visit(node)

    def visit_StructRef(self, node: c_ast.StructRef) -> None:
        self.visit(node.name)  # the field (threadIdx.x) is not a variable

    def visit_ID(self, node: c_ast.ID) -> None:
        node.name = self.rename(node.name)

    def visit_Assignment(self, node: c_ast.Assignment) -> None:
        self.generic_visit(node)
        if node.op != "=" and node.op.endswith("="):
            node.rvalue = c_ast.BinaryOp(node.op[:-1], copy.deepcopy(node.lvalue), node.rvalue)
            node.op = "="
            self.visit_BinaryOp(node.rvalue, visited=True)

    def visit_BinaryOp(self, node: c_ast.BinaryOp, visited: bool = False) -> None:
        if not visited:
            self.generic_visit(node)
        if node.op in COMMUTATIVE and self.gen.visit(node.left) > self.gen.visit(node.right):
            node.left, node.right = node.right, node.left


@lru_cache(maxsize=256)
def kernel_code(source: str, kernel_name: str) -> str:
    """A short digest of ``kernel_name``'s canonical code (macros unexpanded, so every size of a kernel gets
    one digest); kernels that differ only in names, layout, compound assignments or commutative operand order
    get the same digest. Unparsable source falls back to its text with comments and whitespace removed."""
    from gpuprofiler.kernelcode.source import parse

    text = None
    try:
        ast = parse(source, "kernel").ast
        fn = next((e for e in ast.ext if isinstance(e, c_ast.FuncDef) and e.decl.name == kernel_name), None)
        if fn is not None:
            params = fn.decl.type.args.params if fn.decl.type.args else []
            canon = _Canon([getattr(p, "name", None) for p in params])
            fn = copy.deepcopy(fn)
            decl_types = []
            for p in params:
                p = copy.deepcopy(p)
                canon.visit(p)
                decl_types.append(canon.gen.visit(p))
            canon.visit(fn.body)
            text = ", ".join(decl_types) + canon.gen.visit(fn.body)
    except (UserError, RecursionError, AttributeError, TypeError):
        text = None
    if text is None:
        text = kernel_name + re.sub(r"\s+", "", re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def spec_code(spec: Any, kind: str) -> str | None:
    """The digest of a kernel spec's kernel in its ``kind`` source (else its other one); None without one."""
    sources = getattr(spec, "sources", {}) or {}
    path = sources.get(kind) or next(iter(sources.values()), None)
    if path is None:
        return None
    try:
        return kernel_code(Path(path).read_text(), spec.kernel)
    except (OSError, UnicodeDecodeError):
        return None


@lru_cache(maxsize=256)
def _access_family(path: str, kind: str) -> str:
    from gpuprofiler.models.maxplus.builder import build_spec
    from gpuprofiler.workloads.spec import load_spec

    spec = load_spec(path)
    size = (spec.small or spec.target or [16])[0]
    try:
        kernel = build_spec(spec.instantiate(size), kind, max_statements=1 << 14)
    except (UserError, ValueError, ArithmeticError, RecursionError, KeyError, TypeError):
        return f"code:{spec_code(spec, kind)}"
    parts = {f"{a.kind}:{a.info.get('pattern', 'unit')}" for g in kernel.fragments for a in g.arcs
             if a.kind in ("read", "write")}
    if any(g.looped for g in kernel.fragments):
        parts.add("loop")
    if kernel.local_bytes:
        parts.add("local")
    if len(kernel.fragments) > 1:
        parts.add("barrier")
    return ",".join(sorted(parts)) or f"code:{spec_code(spec, kind)}"


def access_family(spec: Any, kind: str = "opencl") -> str:
    """A kernel spec's family, for leaving similar kernels out together: the kinds of its global accesses (read or
    write; unit-stride, strided, gather, uniform), whether it loops, uses local memory or barriers
    (``read:unit,write:unit`` for copy, scale, vadd, triad and saxpy alike); a kernel whose code cannot be followed
    is its own family (its code's digest)."""
    path = getattr(spec, "path", None)
    if path is None:
        return f"code:{spec_code(spec, kind)}"
    return _access_family(str(path), kind)


def family(item: Any, kind: str = "opencl") -> str:
    """The family of a kernel spec (:func:`access_family`) or of an app (its name: its phases are its own)."""
    if hasattr(item, "args") and hasattr(item, "kernel"):
        return access_family(item, kind)
    return f"app:{getattr(item, 'name', item)}"
