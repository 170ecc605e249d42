"""The folder tree is the architecture: no import circles in any package (not even behind
``TYPE_CHECKING`` or inside a function), the evidence schema at the bottom of the library, the
correlator, the dashboards and the devstack using only public names of ``agent_logging``, and no
module reaching into the private state of another module's objects.

The import graph is read from the source (``ast``), so it sees every import a module can make,
whichever branch or function it sits in.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

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


def _compiled(package: str) -> set[str]:
    """The package's compiled modules (a typed stub, ``.pyi``, with no ``.py`` beside it: the
    C of ``setup.py``): leaves, which import nothing of the package."""
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / package).rglob("*.pyi")
        if not path.with_suffix(".py").exists()
    }


def _graph(package: str) -> dict[str, set[str]]:
    modules = _modules(package)
    compiled = _compiled(package)

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
            if full in compiled or module in compiled:
                continue
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


#: Private-looking names that are public API: a named tuple's methods.
_NAMED_TUPLE_API: Final = frozenset({"_replace", "_asdict", "_fields", "_make"})


def _foreign_private_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``obj._name`` where ``obj`` is not ``self``/``cls``/``super()`` and the module defines no
    ``_name`` of its own (no function, attribute of ``self`` or variable of that name): a read
    or write of another module's object's private state."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            own.add(node.attr)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name, value = node.attr, node.value
        if not name.startswith("_") or name.startswith("__") or name in _NAMED_TUPLE_API:
            continue
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super":
            continue
        if name not in own:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_a_foreign_private_read_is_found(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "class A:\n    def __init__(self):\n        self._mine = 1\n\n"
        "def f(a, spool, entry):\n    return a._mine, spool._segments, entry._replace()\n",
        encoding="utf-8",
    )
    assert _foreign_private_reads(module, tmp_path) == ["probe.py:6: spool._segments"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_reaches_into_another_modules_private_state(package: str) -> None:
    found = [hit for path in _modules(package).values() for hit in _foreign_private_reads(path)]
    assert found == []


def test_arrows_between_the_library_s_folders_point_one_way() -> None:
    # One capability per folder: a folder that imports another is never imported back by it.
    folders = {path.name for path in (ROOT / "agent_logging").iterdir() if path.is_dir()}
    arrows = set()
    for name, path in _modules("agent_logging").items():
        parts = name.split(".")
        if len(parts) < 3 or parts[1] not in folders:
            continue
        for module, _, _ in _imports(path):
            target = module.split(".")
            inside = target[0] == "agent_logging" and len(target) > 1
            if inside and target[1] in folders and target[1] != parts[1]:
                arrows.add((parts[1], target[1]))
    assert sorted(arrow for arrow in arrows if arrow[::-1] in arrows) == []
