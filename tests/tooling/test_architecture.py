"""The rooms of the code base and the directions they may import in (docs/architecture.md).

The table is read from the document itself. Every import in src/ is read with `ast` (module level
and inside functions alike; in the entry room also the module names of the command table), mapped
to its room, and checked against that table; importing by a run-time name is the entry room's
alone; the module graph of the shipped packages must have no cycle. A new room or a new direction
is a decision: it is made in the document.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
DOC = SRC.parent / "docs" / "architecture.md"
SHIPPED = ("checkpoint_runtime", "checkpoint_gate")

ENTRY_MODULES = ("checkpoint_runtime.cli", "checkpoint_runtime.__main__")
DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})


def rooms_table(text: str) -> dict[str, set[str]]:
    """room -> the rooms it may import from, read from the document's rooms table: the first
    cell is the room, the last names the rooms it may import in backquotes (none: nothing)."""
    header = "| room | files | what it is | may import |"
    lines = text[text.index(header) :].splitlines()[2:]
    table: dict[str, set[str]] = {}
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        table[cells[0].strip("`")] = set(re.findall(r"`([a-z]+)`", cells[-1]))
    return table


ALLOWED = rooms_table(DOC.read_text(encoding="utf-8"))


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
    if module in ENTRY_MODULES:
        return "entry"
    if len(parts) > 1 and (SRC / "checkpoint_runtime" / parts[1]).is_dir():
        return parts[1] if parts[1] != "data" else "base"
    return "base"


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every absolute import of a project package in `path`; in the
    entry room, also every project module its command table names (imported by name at run time)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if room(module_name(path)) == "entry":
        for node in ast.walk(tree):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and _is_module(value) and room(value) is not None:
                yield node.lineno, value
    for node in ast.walk(tree):
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


def dynamic_imports(tree: ast.AST) -> list[int]:
    """Lines that import a module by a name computed at run time."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name in DYNAMIC_IMPORTS:
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and any(
            alias.name in DYNAMIC_IMPORTS for alias in node.names
        ):
            lines.append(node.lineno)
    return lines


def _is_module(name: str) -> bool:
    if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+", name):
        return False
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


def test_only_the_entry_room_imports_by_name() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sources()
        if room(module_name(path)) != "entry"
        for line in dynamic_imports(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "import importlib\nimportlib.import_module('checkpoint_runtime.store.core')",
        "from importlib import import_module\nimport_module('checkpoint_runtime.store.core')",
        "__import__('checkpoint_runtime.store.core')",
    ],
)
def test_an_import_by_name_is_found(source: str) -> None:
    assert dynamic_imports(ast.parse(source)) != []


def test_the_entry_room_is_the_command_shell_and_its_table_counts_as_imports() -> None:
    cli = SRC / "checkpoint_runtime" / "cli.py"
    assert room(module_name(cli)) == "entry"
    named = {name for _, name in imports(cli)}
    assert {"checkpoint_runtime.runtime.main", "checkpoint_gate.cli"} <= named
    assert "checkpoint_runtime.ops.commands" in named


def test_the_table_is_read_from_the_document() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert ALLOWED["format"] == {"base"}
    assert ALLOWED["base"] == set()
    row = next(line for line in text.splitlines() if line.startswith("| `format` |"))
    widened = text.replace(row, row.rsplit("|", 2)[0] + "| `base`, `store` |")
    assert rooms_table(widened)["format"] == {"base", "store"}
    narrowed = text.replace("| `base`, `runtime`, `ops`, `gate` |", "| `base` |")
    assert rooms_table(narrowed)["entry"] == {"base"}


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


def test_the_entry_room_may_not_import_what_its_table_does_not_name() -> None:
    assert room("checkpoint_testenv.helm") not in ALLOWED["entry"]
    assert room("checkpoint_runtime.store.core") not in ALLOWED["entry"]
