"""Shared, session-scoped parts of the render gate: each is loaded or compiled once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from render_helpers import patched_chart

from checkpoint_gate.engine import PolicyEngine
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.pipeline import Gate
from checkpoint_gate.render import CliRenderer, SdkRenderer
from checkpoint_gate.validate import KubernetesValidator
from checkpoint_testenv import binaries


@pytest.fixture(scope="session")
def sdk() -> SdkRenderer:
    return SdkRenderer(CHART_DIR)


@pytest.fixture(scope="session")
def helm() -> Path:
    return binaries.locate() / "helm"


@pytest.fixture(scope="session")
def cli(helm: Path) -> CliRenderer:
    return CliRenderer(CHART_DIR, helm)


@pytest.fixture(scope="session")
def engine() -> PolicyEngine:
    return PolicyEngine()


@pytest.fixture(scope="session")
def kubernetes() -> KubernetesValidator:
    return KubernetesValidator()


@pytest.fixture(scope="session")
def gate() -> Gate:
    return Gate()


@pytest.fixture
def chart_copy(tmp_path: Path) -> Callable[[str, str, str], Path]:
    """A copy of the chart with one template edited: (template, old text, new text) -> chart dir."""

    def patch(template: str, old: str, new: str) -> Path:
        return patched_chart(tmp_path / "checkpoint-runtime", template, old, new)

    return patch
