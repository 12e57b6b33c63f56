"""Session fixtures of the installed-artifact tier: the wheel, built once by scripts/dist.sh,
and fresh virtualenvs holding it without the dev extra (alone, with [gate], with [s3])."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from installed_helpers import DIST_SCRIPT, Venv, create_venv, log


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel scripts/dist.sh builds; its folder is the last line it prints."""
    out = tmp_path_factory.mktemp("dist")
    log(f"building the wheel with {DIST_SCRIPT}")
    result = subprocess.run(
        [str(DIST_SCRIPT), str(out)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{DIST_SCRIPT} failed:\n{result.stderr}"
    folder = Path(result.stdout.strip().splitlines()[-1])
    (built,) = folder.glob("checkpoint_runtime-*.whl")
    assert zipfile.is_zipfile(built)
    return built


@pytest.fixture(scope="session")
def runtime_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The runtime alone: no extra, no dev tools."""
    return create_venv(tmp_path_factory.mktemp("venv-runtime"), str(wheel))


@pytest.fixture(scope="session")
def gate_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return create_venv(tmp_path_factory.mktemp("venv-gate"), f"{wheel}[gate]")


@pytest.fixture(scope="session")
def s3_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return create_venv(tmp_path_factory.mktemp("venv-s3"), f"{wheel}[s3]")


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory that is neither the checkout nor next to the venv."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return cwd
