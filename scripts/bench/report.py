"""What every benchmark returns and prints: a Report of tables, and the targets it decides.

`run(quick=False, ...) -> Report` in every benchmark module; its `main()` parses the shared
options (`parser`), calls `run` and prints the report (`emit`). all.py calls `run` and writes
every report into docs/benchmarks.md; a benchmark that must run in a process of its own
(`OWN_PROCESS = True` in its module) is started as `python -m bench.<name> --report-json FILE`
and its report read back from that file (`Report.from_json`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

Item = TypeVar("Item")
Column = tuple[str, Callable[[Item], str]]
"""A table column: its header and how one measured item is written in it."""


@dataclass
class Table:
    """One printed table (a section of docs/benchmarks.md)."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        title: str,
        columns: Sequence[Column[Item]],
        items: Iterable[Item],
        notes: Sequence[str] = (),
    ) -> Table:
        """A table with one row per item, each column written by its function."""
        return cls(
            title,
            [header for header, _ in columns],
            [[cell(item) for _, cell in columns] for item in items],
            list(notes),
        )

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |"]
        lines.append("|" + "|".join("---:" if i else "---" for i in range(len(self.columns))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        lines += [""] + [f"- {note}" for note in self.notes] if self.notes else []
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        """Aligned plain-text columns (a terminal's view of the same cells)."""
        cells = [self.columns, *self.rows]
        widths = [max(len(row[index]) for row in cells) for index in range(len(self.columns))]
        lines = [self.title, ""]
        lines += [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells
        ]
        lines += ["", *self.notes] if self.notes else []
        return "\n".join(lines) + "\n"


@dataclass
class Target:
    """One row of the targets table: a wanted figure against the measured one."""

    name: str
    wanted: str
    measured: str
    met: bool | None
    """None: could not be evaluated."""
    why: str


def verdict(measured: float, target: float) -> str:
    """`met`, or by how much `measured` passes the upper bound `target`."""
    return "met" if measured <= target else f"missed by {measured / target - 1:.1%}"


@dataclass
class Report:
    """A benchmark's result: its tables, the targets it decides, and prose printed before the
    tables; `measured` keeps the raw measurements for plots (not written to JSON)."""

    title: str
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    measured: Any = None

    def markdown(self) -> str:
        parts = ["\n".join(self.lines) + "\n"] if self.lines else []
        return "\n".join([*parts, *(table.markdown() for table in self.tables)])

    def text(self) -> str:
        parts = ["\n".join(self.lines) + "\n"] if self.lines else []
        return "\n".join([*parts, *(table.text() for table in self.tables)])

    def to_json(self) -> str:
        return json.dumps(
            {
                "title": self.title,
                "tables": [asdict(table) for table in self.tables],
                "targets": [asdict(target) for target in self.targets],
                "lines": self.lines,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Report:
        data = json.loads(text)
        return cls(
            data["title"],
            [Table(**table) for table in data["tables"]],
            [Target(**target) for target in data["targets"]],
            data["lines"],
        )


def parser(
    doc: str | None, quick_help: str = "smoke sizes, not figures"
) -> argparse.ArgumentParser:
    """The options every benchmark takes: --quick, --format, --report-json."""
    found = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    found.add_argument("--quick", action="store_true", help=quick_help)
    found.add_argument(
        "--format", choices=("markdown", "text"), default="markdown", help="how to print tables"
    )
    found.add_argument("--report-json", type=Path, help="also write the report as JSON here")
    return found


def emit(report: Report, args: argparse.Namespace) -> int:
    """Print the report as asked and write its JSON if asked; the exit code (0)."""
    if args.report_json:
        args.report_json.write_text(report.to_json())
    print(report.text() if args.format == "text" else report.markdown(), flush=True)
    return 0


DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def write_section(
    report: Report, name: str, title: str, document: Path = DOCUMENT, lines: Sequence[str] = ()
) -> None:
    """Write `report` into docs/benchmarks.md as the section `name` (between
    `<!-- name:start ... -->` and `<!-- name:end -->`, which all.py keeps when it rewrites the
    document), replacing that section if it is there, else appended at the end."""
    start = f"<!-- {name}:start (written by scripts/bench: --write-doc) -->"
    end = f"<!-- {name}:end -->"
    body = "\n".join([start, f"## {title}", "", *lines, report.markdown().rstrip(), end])
    text = document.read_text()
    if start in text:
        before, rest = text.split(start, 1)
        text = before + body + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    document.write_text(text)
