"""Helpers of the installed-artifact tier: fresh virtualenvs and the console script in them.

The installed-artifact tier tests what a user gets from `pip install`, not the source tree.

The wheel is built once per session by scripts/dist.sh (what `just dist` runs) and installed
into fresh virtualenvs without the dev extra: the runtime alone, the runtime with [gate], and
the runtime with [s3]. Every command runs the venv's `checkpoint-runtime` console script from a
temporary working directory, so nothing can come from the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from checkpoint_testenv.binaries import REPO_ROOT

DIST_SCRIPT = REPO_ROOT / "scripts" / "dist.sh"
# A resolver that backtracks without end (as `.[s3]` once did) fails here instead of hanging.
INSTALL_TIMEOUT_SECONDS = 900
COMMAND_TIMEOUT_SECONDS = 120


def log(message: str) -> None:
    print(f"installed: {message}", file=sys.stderr, flush=True)


def clean_env() -> dict[str, str]:
    """The environment without anything pointing Python at the checkout or the dev venv."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "CHECKPOINT_RUNTIME_TRACEBACK")
    return {key: value for key, value in os.environ.items() if key not in dropped}


@dataclass(frozen=True)
class Venv:
    """A fresh virtualenv with one requirement installed, and how long the install took."""

    root: Path
    install_seconds: float

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def cli(self) -> Path:
        return self.root / "bin" / "checkpoint-runtime"

    def run(
        self, *args: str | Path, cwd: Path, timeout: float = COMMAND_TIMEOUT_SECONDS
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.cli), *map(str, args)],
            cwd=cwd,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def create_venv(root: Path, requirement: str) -> Venv:
    log(f"creating {root} and installing {requirement} (pip resolves and downloads)")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, env=clean_env())
    started = time.monotonic()
    try:
        result = subprocess.run(
            [str(root / "bin" / "pip"), "install", "--disable-pip-version-check", requirement],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"pip install {requirement} did not finish in {INSTALL_TIMEOUT_SECONDS} s")
    seconds = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(f"pip install {requirement} failed:\n{result.stdout[-3000:]}{result.stderr}")
    log(f"installed {requirement} in {seconds:.1f} s")
    return Venv(root, seconds)
