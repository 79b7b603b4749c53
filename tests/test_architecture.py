"""The layout as ARCHITECTURE.md draws it: an import graph without cycles, in which every package imports
only from the stages before it.

The graph is read from the source with ``ast`` (every ``import`` statement, inside functions too, so a cycle
cannot hide in a function body) and handed to networkx.
"""

import ast
from pathlib import Path

import networkx as nx
import pytest
from conftest import REPO

# the stages, each importing only from itself and those before it (the lowest first)
LAYERS = (
    ("gpuprofiler", "gpuprofiler.errors", "gpuprofiler.kernels"),
    ("gpuprofiler.device",),
    ("gpuprofiler.measure",),
    ("gpuprofiler.kernelcode",),
    ("gpuprofiler.workloads",),
    ("gpuprofiler.profile",),
    ("gpuprofiler.microbench",),
    ("gpuprofiler.calibrate",),
    ("gpuprofiler.models",),
    ("gpuprofiler.validate",),
    ("gpuprofiler.tune",),
    ("gpuprofiler.simulate",),
    ("gpuprofiler.report",),
    ("gpuprofiler.testing",),
    ("gpuprofiler.cli", "gpuprofiler.__main__"),
)
# source folders of the installed package (pyproject's package-dir)
ROOTS = {"gpuprofiler": REPO / "gpuprofiler", "gpuprofiler.microbench": REPO / "microbench",
         "gpuprofiler.kernels": REPO / "kernels"}


def modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for prefix, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in its body (relative imports resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name inside a module: its module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph(roots: dict[str, Path]) -> nx.DiGraph:
    mods = modules(roots)
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        graph.add_edges_from((name, target) for target in imported(name, path, set(mods)))
    return graph


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Every set of modules that import each other, directly or through others."""
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def layer(name: str) -> int:
    best = None
    for i, names in enumerate(LAYERS):
        for prefix in names:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    assert best is not None, f"{name} is in no layer: add it to LAYERS and to ARCHITECTURE.md"
    return best[0]


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOTS)


def test_the_package_has_no_import_cycle(graph):
    assert graph.number_of_nodes() > 50 and graph.number_of_edges() > 100
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_every_stage_imports_only_from_the_stages_before_it(graph):
    upward = sorted(f"{a} -> {b}" for a, b in graph.edges if layer(b) > layer(a))
    assert not upward, "imports of a later stage: " + "; ".join(upward)


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "sub" / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg import a\n")
    graph = import_graph({"pkg": pkg})
    assert set(graph.edges) >= {("pkg.a", "pkg.sub.b"), ("pkg.sub.b", "pkg.sub.c"), ("pkg.sub.c", "pkg.a"),
                                ("pkg.d", "pkg.a")}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.sub.c"]]
