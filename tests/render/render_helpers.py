"""Helpers shared by the render tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from checkpoint_gate.paths import CI_VALUES_DIR

CI_VALUES = sorted(CI_VALUES_DIR.glob("*-values.yaml"))

# The value matrix every render test covers: the defaults and each CI values file.
MATRIX: list[tuple[str, dict[str, Any]]] = [("defaults", {})] + [
    (path.name, yaml.safe_load(path.read_text(encoding="utf-8")) or {}) for path in CI_VALUES
]


def matrix_params() -> list[Any]:
    return [pytest.param(values, id=name) for name, values in MATRIX]
