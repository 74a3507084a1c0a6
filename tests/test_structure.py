"""The package's shape: no import circles between modules, and no module over 600 lines.

Every import counts, those inside functions and under ``if`` included: a circle hidden
behind a lazy import still ties two modules together. Imports are read from the source
with :mod:`ast`, so nothing is executed and optional extras need not be installed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "edge_translator"
MAX_LINES = 600


def _modules(top: Path, package: str) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` below ``top`` (a package named ``package``)."""
    found = {}
    for path in sorted(top.rglob("*.py")):
        parts = list(path.relative_to(top).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([package, *parts])] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()

    def add(dotted: str, names: tuple[str, ...] = ()) -> None:
        for child in names:  # `from pkg import mod` imports the submodule
            if f"{dotted}.{child}" in modules:
                targets.add(f"{dotted}.{child}")
            elif dotted in modules:
                targets.add(dotted)
        if not names:
            while dotted and dotted not in modules:  # `import a.b.c` where c is a name
                dotted = dotted.rpartition(".")[0]
            if dotted:
                targets.add(dotted)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                dotted = ".".join(base + ([node.module] if node.module else []))
            else:
                dotted = node.module or ""
            if dotted.split(".")[0] == PACKAGE:
                add(dotted, tuple(alias.name for alias in node.names))
    targets.discard(name)
    return targets


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def import_circles(top: Path, package: str = PACKAGE) -> list[list[str]]:
    """Every import circle among the modules of the package at ``top``."""
    modules = _modules(top, package)
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    return _circles(graph)


def _describe(circle: list[str], top: Path) -> str:
    modules = _modules(top, PACKAGE)
    edges = [f"{a} -> {b}" for a in circle for b in sorted(_imports(a, modules[a], modules)) if b in circle]
    return "; ".join(edges)


def test_no_import_circles():
    top = ROOT / PACKAGE
    circles = import_circles(top)
    assert not circles, "import circles: " + " | ".join(_describe(c, top) for c in circles)


def test_no_module_outside_tests_is_over_600_lines():
    sources = [p for p in ROOT.rglob("*.py")
               if not {"tests", ".venv", "work", "dist", "node_modules"} & set(p.relative_to(ROOT).parts)
               and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    assert len(sources) > 50  # the walk found the package
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _write(top: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = top / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return top / PACKAGE


@pytest.mark.parametrize("files,expected", [
    # a lazy import inside a function still closes the circle
    ({"__init__.py": "", "a.py": "from . import b\n", "b.py": "def f():\n    from .a import x\n"},
     [["edge_translator.a", "edge_translator.b"]]),
    # absolute imports, across subpackages, three modules long
    ({"__init__.py": "", "p/__init__.py": "", "p/x.py": "import edge_translator.q.y\n",
      "q/__init__.py": "", "q/y.py": "from edge_translator.q import z\n",
      "q/z.py": "if True:\n    from ..p.x import name\n"},
     [["edge_translator.p.x", "edge_translator.q.y", "edge_translator.q.z"]]),
    # a name imported from a module is an edge to that module
    ({"__init__.py": "", "s/__init__.py": "", "s/http.py": "from .app import App\n",
      "s/app.py": "from .http import Request\n"},
     [["edge_translator.s.app", "edge_translator.s.http"]]),
    # imports that point one way only: no circle
    ({"__init__.py": "from .a import run\n", "a.py": "from .b import x\nfrom . import c\n", "b.py": "import json\n",
      "c.py": "from .b import y\n"}, []),
])
def test_the_circle_check_finds_circles_of_every_kind(tmp_path, files, expected):
    assert import_circles(_write(tmp_path, files)) == expected
