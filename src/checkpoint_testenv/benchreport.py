"""What the benchmark scripts share: the table they print (and all.py writes into
docs/benchmarks.md) and the timing of one call."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    """One printed table: also what all.py puts into docs/benchmarks.md."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.headers) + " |"]
        lines.append("|" + "|".join("---:" if i else "---" for i in range(len(self.headers))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        lines += [""] + [f"- {note}" for note in self.notes] if self.notes else []
        return "\n".join(lines) + "\n"


def timed_ms(call: Callable[[], Any], *, collect_first: bool = False) -> float:
    """Milliseconds one call takes with the garbage collector paused (optionally after a full
    collection, so garbage left by the previous call is not charged to this one)."""
    if collect_first:
        gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        call()
        return (time.perf_counter() - started) * 1000
    finally:
        gc.enable()
