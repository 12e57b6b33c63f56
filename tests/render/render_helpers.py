"""Helpers shared by the render tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from checkpoint_gate.paths import CHART_DIR, CI_VALUES_DIR

CI_VALUES = sorted(CI_VALUES_DIR.glob("*-values.yaml"))

# The value matrix every render test covers: the defaults and each CI values file.
MATRIX: list[tuple[str, dict[str, Any]]] = [("defaults", {})] + [
    (path.name, yaml.safe_load(path.read_text(encoding="utf-8")) or {}) for path in CI_VALUES
]


def matrix_params() -> list[Any]:
    return [pytest.param(values, id=name) for name, values in MATRIX]


def patched_chart(target: Path, template: str, old: str, new: str) -> Path:
    """The chart copied to `target` (on first use) with one template edited; returns `target`.

    The old text must occur in the template, so a chart change cannot turn a broken variant
    silently into an unbroken one.
    """
    if not target.exists():
        shutil.copytree(CHART_DIR, target)
    path = target / "templates" / template
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{template} no longer contains {old!r}; update the broken variant"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return target
