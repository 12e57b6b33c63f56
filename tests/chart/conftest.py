"""Chart test fixtures: the chart loaded once by the in-process Helm SDK, and a render helper.

Rendering goes through real Helm (helm-python-sdk), which also enforces values.schema.json, so
a values document that renders here is one `helm install` accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chart_helpers import CHART_DIR, NAMESPACE, RELEASE, Manifest, Render, load_yaml, manifests_of
from helm_python import Chart


@pytest.fixture(scope="session")
def chart() -> Iterator[Chart]:
    with Chart.load(CHART_DIR) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def default_values() -> dict[str, Any]:
    return load_yaml(CHART_DIR / "values.yaml")


@pytest.fixture(scope="session")
def values_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((CHART_DIR / "values.schema.json").read_text())
    return schema


@pytest.fixture(scope="session")
def render(chart: Chart) -> Render:
    def _render(
        values: dict[str, Any] | None = None, name: str = RELEASE, namespace: str = NAMESPACE
    ) -> list[Manifest]:
        return manifests_of(chart.render(values=values or {}, name=name, namespace=namespace))

    return _render
