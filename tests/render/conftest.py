"""Shared, session-scoped parts of the render gate: each is loaded or compiled once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from checkpoint_gate.engine import PolicyEngine
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.pipeline import Gate
from checkpoint_gate.render import CliRenderer, KubernetesValidator, SdkRenderer
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
    """A copy of the chart with one template edited: (template, old text, new text) -> chart dir.

    The old text must occur in the template, so a chart change cannot turn a broken variant
    silently into an unbroken one.
    """
    import shutil

    def patch(template: str, old: str, new: str) -> Path:
        target = tmp_path / "checkpoint-runtime"
        if not target.exists():
            shutil.copytree(CHART_DIR, target)
        path = target / "templates" / template
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{template} no longer contains {old!r}; update the broken variant"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return target

    return patch
