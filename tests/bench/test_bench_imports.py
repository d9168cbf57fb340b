"""bench/ holds no import circle and imports no private name, neither of its
own modules nor of bpbc's. Read from the source, nothing imported; an import
deferred inside a function counts."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_graph import find_circle

BENCH = Path(__file__).resolve().parents[2] / "bench"


def module_name(path: Path) -> str:
    parts = path.relative_to(BENCH.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in ``path`` (a
    bare ``import module``: name ''), relative modules made absolute."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found += [(module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return found


def bench_graph() -> dict[str, set[str]]:
    """Module -> the bench modules it imports (``from bench import x``: x where
    x is a module, else bench itself)."""
    paths = {module_name(path): path for path in BENCH.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        edges = set()
        for module, imported in imports(path):
            if f"{module}.{imported}" in paths:
                edges.add(f"{module}.{imported}")
            elif module in paths:
                edges.add(module)
        graph[name] = edges - {name}
    return graph


def test_the_graph_sees_bench():
    graph = bench_graph()
    assert {"bench", "bench.gpu_kernel", "bench.sw_bench", "bench.inputs", "bench.probes.cell_ab"} <= set(graph)
    assert "bench.gpu_kernel" in graph["bench.sw_bench"] and "bench.inputs" in graph["bench.gpu_kernel"]
    assert "bench" in graph["bench.gpu_kernel"]  # from . import gpu_seconds, ...
    assert "bench.gpu_kernel" in graph["bench.probes.cell_ab"]


def test_no_import_circle_in_bench():
    circle = find_circle(bench_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_bench_imports_no_private_name():
    private = [f"{module_name(path)}: from {module} import {name}" for path in sorted(BENCH.rglob("*.py"))
               for module, name in imports(path) if name.startswith("_") and module != "__future__"]
    assert not private
