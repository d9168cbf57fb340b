"""No import circle among bpbc's modules.

The graph is built from the source (no module is imported): an edge a -> b
for every ``import`` of b in a, at module level or deferred inside a
function, since a deferred import that closes a circle still ties the two
modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "bpbc"


def imported_modules(tree: ast.Module, modules: set[str]) -> set[str]:
    """The modules of the package that ``tree`` imports, by their short names."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.level == 0 and node.module is not None and node.module.split(".")[0] == "bpbc"):
                parts = (node.module or "").split(".")
                if node.level == 0:
                    parts = parts[1:]
                if parts and parts[0]:
                    found.add(parts[0])
                else:  # from . import x / from bpbc import x
                    found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "bpbc" and len(parts) > 1:
                    found.add(parts[1])
    return found & modules


def import_graph() -> dict[str, set[str]]:
    sources = {path.stem: path for path in PACKAGE.glob("*.py")}
    modules = set(sources)
    return {
        name: imported_modules(ast.parse(path.read_text(), filename=str(path)), modules) - {name}
        for name, path in sources.items()
    }


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, str] = {}  # "open" while on the current path, then "done"
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for successor in sorted(graph[node]):
            if state.get(successor) == "open":
                return path[path.index(successor):] + [successor]
            if successor not in state:
                circle = visit(successor)
                if circle is not None:
                    return circle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            circle = visit(start)
            if circle is not None:
                return circle
    return None


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert {"engines", "cpu_engine", "gpu_engine", "order", "cli"} <= set(graph)
    assert "order" in graph["cpu_engine"] and "order" in graph["gpu_engine"]
    assert "cpu_engine" in graph["engines"]  # deferred inside select_engine


def test_find_circle_finds_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_circle_among_bpbc_modules():
    circle = find_circle(import_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_relative_and_absolute_imports_are_edges():
    source = (
        "from . import paf\nfrom .io import x\nimport bpbc.sinks\nfrom bpbc.result import y\n"
        "def f():\n    from .pairs import z\n"
    )
    modules = {"paf", "io", "sinks", "result", "pairs", "cli"}
    assert imported_modules(ast.parse(source), modules) == {"paf", "io", "sinks", "result", "pairs"}
