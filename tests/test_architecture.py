"""The package's layers: no import runs back up a layer, no import circle, and every package
and module says what it owns (a docstring).  The layer table lives here, once.

Every import counts, a lazy one inside a function included (a lazy import still makes the
lower module depend on the upper one).  Inside one package imports go sideways freely, but not
in a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "hspz"

# lowest first: a module may import from its own package and from packages listed above it
LAYERS = (
    "hspz",
    "hspz.core",
    "hspz.io",
    "hspz.stages",
    "hspz.engine",
    "hspz.planning",
    "hspz.formats",
    "hspz.run",
    "hspz.tools",
    "hspz.commands",
    "hspz.cli",
)


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer(module: str) -> int:
    if module == "hspz.__main__":
        return LAYERS.index("hspz.cli")
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS.index(best)


def _resolve(module: str, package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> set[str]:
    """The hspz modules `module` imports (a package's __init__ when it imports the package)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "hspz")
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, package, node)
            if base.split(".")[0] != "hspz":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in MODULES else base)
    out.discard(module)
    return {m for m in out if m in MODULES}


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_sits_in_a_layer():
    assert all(layer(m) > 0 or m == "hspz" for m in MODULES)
    assert not [
        m for m in MODULES if m.count(".") == 1 and m not in LAYERS and m != "hspz.__main__"
    ], "a top-level module outside the layer table"


def test_no_import_runs_up_a_layer():
    up = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() for d in deps if layer(d) > layer(m))
    assert up == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module: the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    """Every strongly connected component of the import graph is a single module."""
    assert circles(GRAPH) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_package_and_module_has_a_docstring(module):
    if module == "hspz.__main__":
        return
    doc = ast.get_docstring(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    assert doc and len(doc.split()) >= 5, f"{module} says nothing about what it owns"


def test_the_checks_can_fail():
    """The layer and circle checks see a planted violation (so an empty list means something)."""
    graph = dict(GRAPH)
    graph["hspz.core.errors"] = GRAPH["hspz.core.errors"] | {"hspz.run.emit"}
    assert any(layer(d) > layer(m) for m, deps in graph.items() for d in deps)
    assert any("hspz.core.errors" in c and "hspz.run.emit" in c for c in circles(graph))
    assert "hspz.run.emit" in imports("hspz.run.execute")
    assert layer("hspz.run.emit") > layer("hspz.core.errors")
