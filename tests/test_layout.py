"""The folder tree is the architecture: no import circles in any package (not even behind
``TYPE_CHECKING`` or inside a function), the evidence schema at the bottom of the library, and
the correlator, the dashboards and the devstack using only public names of ``agent_logging``.

The import graph is read from the source (``ast``), so it sees every import a module can make,
whichever branch or function it sits in.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent_logging", "correlator", "dashboards", "devstack")


def _modules(package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path) -> Iterator[tuple[str, str, int]]:
    """``(module, name, line)`` of every import in the file (``name`` empty for ``import x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.module, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", node.lineno


def _graph(package: str) -> dict[str, set[str]]:
    modules = _modules(package)

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for module, imported, _ in _imports(path):
            if module.split(".")[0] != package:
                continue
            full = f"{module}.{imported}" if imported else module
            target = full if full in modules else owner(module)
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
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
                    found.append(sorted(component))
    return found


def test_circles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package: str) -> None:
    assert _circles(_graph(package)) == []


def test_the_schema_and_the_settings_are_at_the_bottom_of_the_library() -> None:
    graph = _graph("agent_logging")
    declarations = {"agent_logging.errors", "agent_logging._environ", "agent_logging.schema"}
    assert graph["agent_logging.schema"] <= {"agent_logging.errors"}
    assert graph["agent_logging._settings"] <= declarations
    assert graph["agent_logging._environ"] <= declarations


@pytest.mark.parametrize("package", ["correlator", "dashboards", "devstack"])
def test_only_public_names_of_agent_logging_are_used(package: str) -> None:
    private = [
        f"{path.relative_to(ROOT)}:{line}: {module} {imported}".rstrip()
        for path in _modules(package).values()
        for module, imported, line in _imports(path)
        if module.split(".")[0] == "agent_logging"
        and (any(part.startswith("_") for part in module.split(".")) or imported.startswith("_"))
    ]
    assert private == []
