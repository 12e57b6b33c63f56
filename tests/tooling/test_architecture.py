"""The rooms of the code base and the directions they may import in (docs/architecture.md).

Every import in src/ is read with `ast` (module level and inside functions alike), mapped to its
room, and checked against the table below; the module graph of the shipped packages must have no
cycle. A new room or a new direction is a decision: change the table and the document together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
DOC = SRC.parent / "docs" / "architecture.md"
SHIPPED = ("checkpoint_runtime", "checkpoint_gate")

# room -> the rooms it may import from ("base" is the top-level modules of checkpoint_runtime:
# errors, constants, deadline, resources, schema_errors, cli).
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "format": {"base"},
    "backends": {"base", "format"},
    "store": {"base", "format", "backends"},
    "election": {"base"},
    "collectors": {"base", "format"},
    "runtime": {"base", "format", "backends", "store", "election", "collectors"},
    "ops": {"base", "format", "backends", "store", "runtime"},
    "gate": {"base", "runtime"},
    "testenv": {"base", "format", "backends", "store", "election", "collectors", "runtime", "gate"},
}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


def room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "checkpoint_gate":
        return "gate"
    if parts[0] == "checkpoint_testenv":
        return "testenv"
    if parts[0] != "checkpoint_runtime":
        return None
    if len(parts) > 1 and (SRC / "checkpoint_runtime" / parts[1]).is_dir():
        return parts[1] if parts[1] != "data" else "base"
    return "base"


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every absolute import of a project package in `path`."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from checkpoint_runtime.store import migration` imports a module: name it.
            names = [
                f"{node.module}.{alias.name}"
                if _is_module(f"{node.module}.{alias.name}")
                else node.module
                for alias in node.names
            ]
        elif isinstance(node, ast.ImportFrom) and node.level:
            package = module_name(path).rsplit(".", node.level - (path.name == "__init__.py"))[0]
            names = [f"{package}.{node.module}" if node.module else package]
        else:
            continue
        for name in names:
            if room(name) is not None:
                yield node.lineno, name


def _is_module(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if room(module_name(p)) is not None)


def test_the_table_names_every_room_there_is() -> None:
    rooms = {room(module_name(p)) for p in sources()}
    assert rooms == set(ALLOWED)


def test_every_import_goes_in_an_allowed_direction() -> None:
    wrong = [
        f"{path.relative_to(SRC)}:{line}: {room(module_name(path))} imports {name}"
        for path in sources()
        for line, name in imports(path)
        if (here := room(module_name(path))) != (there := room(name))
        and there not in ALLOWED[here or ""]
    ]
    assert wrong == []


def module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sources():
        here = module_name(path)
        if here.split(".")[0] in SHIPPED:
            graph[here] = {name for _, name in imports(path) if name.split(".")[0] in SHIPPED}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (edges to modules outside it ignored), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in graph:
                continue
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_shipped_packages_have_no_import_cycle() -> None:
    assert find_cycle(module_graph()) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("checkpoint_runtime.format.codec", "checkpoint_runtime.store.core", False),
        ("checkpoint_runtime.backends.file", "checkpoint_runtime.collectors.sink", False),
        ("checkpoint_runtime.store.core", "checkpoint_gate.engine", False),
        ("checkpoint_runtime.runtime.main", "checkpoint_testenv.helm", False),
        ("checkpoint_runtime.store.core", "checkpoint_runtime.backends.base", True),
    ],
)
def test_the_table_refuses_the_directions_the_document_forbids(
    importer: str, imported: str, allowed: bool
) -> None:
    assert (room(imported) in ALLOWED[room(importer) or ""]) is allowed


def test_the_document_lists_every_room() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in ALLOWED:
        assert f"`{name}`" in text, name
