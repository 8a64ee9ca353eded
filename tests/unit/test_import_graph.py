"""No two modules of drkit import each other, directly or round a loop - counting every import
statement: at the top, inside functions (the lazy ones) and under ``TYPE_CHECKING``.

A circle hidden behind a lazy import still ties the modules together: neither can be read,
moved or tested without the other (issue 47 found five; there are none now).  The graph is
read from the source with ``ast`` - nothing is imported - at module granularity: ``from
drkit.a import b`` is an edge to ``drkit.a.b`` when that is a module, else to ``drkit.a``."""

from __future__ import annotations

import ast
from pathlib import Path

DRKIT = Path(__file__).resolve().parents[2] / "drkit"


def _modules() -> dict[str, Path]:
    found = {}
    for path in DRKIT.rglob("*.py"):
        parts = list(path.relative_to(DRKIT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base)
                    for alias in node.names
                ]
            edges[name].update(t for t in targets if t is not None and t != name)
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return circles


def test_no_import_circle_in_drkit_lazy_imports_included() -> None:
    edges = _graph(_modules())
    assert sum(len(targets) for targets in edges.values()) > 500  # the graph was read
    # Lazy imports count: the maintenance builds an engine inside a method.
    assert "drkit.failover.engine" in edges["drkit.failover.maintenance"]
    assert _circles(edges) == []


def test_the_circle_finder_finds_a_lazy_circle() -> None:
    """The check itself: a loop closed only by an import inside a function is found."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(edges) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
