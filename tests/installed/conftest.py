"""Session fixtures of the installed-artifact tier: the wheel, built once by scripts/dist.sh,
and fresh virtualenvs holding it without the dev extra (alone, with [gate], with [s3]), made
once per test process (installed_helpers.Installs: the hostile tier shares them) and installed
side by side when the first is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed_helpers import Venv, session_installs, wanted_venvs


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel scripts/dist.sh builds."""
    return session_installs(tmp_path_factory).wheel


def _venv(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> Venv:
    return session_installs(factory).venv(request.fixturename, wanted_venvs(request.session.items))


@pytest.fixture(scope="session")
def runtime_venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The runtime alone: no extra, no dev tools."""
    return _venv(request, tmp_path_factory)


@pytest.fixture(scope="session")
def gate_venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _venv(request, tmp_path_factory)


@pytest.fixture(scope="session")
def s3_venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _venv(request, tmp_path_factory)


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory that is neither the checkout nor next to the venv."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return cwd
