"""Helpers of the installed-artifact tier: fresh virtualenvs and the console script in them.

The installed-artifact tier tests what a user gets from `pip install`, not the source tree.

The wheel is built once per session by scripts/dist.sh (what `just dist` runs) and installed
into fresh virtualenvs without the dev extra: the runtime alone, the runtime with [gate], and
the runtime with [s3]. Every command runs the venv's `checkpoint-runtime` console script from a
temporary working directory, so nothing can come from the checkout.

The wheel and the virtualenvs belong to the test process (`Installs`), not to one conftest: the
hostile-input tier loads this tier's fixtures a second time, and both get the same wheel and
the same [gate] virtualenv. The first virtualenv asked for starts the install of every one the
session's tests use, side by side (pip mostly waits on the package registry).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
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


# The fixture of each virtualenv, and what it installs after the wheel's path.
VENV_EXTRAS = {"runtime_venv": "", "gate_venv": "[gate]", "s3_venv": "[s3]"}


class Installs:
    """The wheel and its virtualenvs of one test session, each built at most once."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._wheel: Path | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._venvs: dict[str, Future[Venv]] = {}

    @property
    def wheel(self) -> Path:
        """The wheel scripts/dist.sh builds; its folder is the last line it prints."""
        with self._lock:
            if self._wheel is None:
                self._wheel = build_wheel(self._factory.mktemp("dist"))
            return self._wheel

    def venv(self, fixture: str, wanted: Iterable[str]) -> Venv:
        """The virtualenv of `fixture`; the first call starts the install of each of `wanted`
        (the virtualenv fixtures the session's tests use) and of `fixture` side by side."""
        wheel = self.wheel
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(len(VENV_EXTRAS), "install")
            for name in [fixture, *sorted(set(wanted) - {fixture})]:
                if name not in self._venvs:
                    folder = self._factory.mktemp(name.replace("_", "-"))
                    requirement = f"{wheel}{VENV_EXTRAS[name]}"
                    self._venvs[name] = self._pool.submit(create_venv, folder, requirement)
            future = self._venvs[fixture]
        return future.result()


_INSTALLS: dict[Path, Installs] = {}


def session_installs(factory: pytest.TempPathFactory) -> Installs:
    """The `Installs` of the session whose temporary folders `factory` makes."""
    return _INSTALLS.setdefault(factory.getbasetemp(), Installs(factory))


def wanted_venvs(items: Iterable[pytest.Item]) -> set[str]:
    """The virtualenv fixtures that the tests `items` use."""
    return {
        name for item in items for name in getattr(item, "fixturenames", ()) if name in VENV_EXTRAS
    }


def build_wheel(out: Path) -> Path:
    log(f"building the wheel with {DIST_SCRIPT}")
    result = subprocess.run(
        [str(DIST_SCRIPT), str(out)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{DIST_SCRIPT} failed:\n{result.stderr}"
    folder = Path(result.stdout.strip().splitlines()[-1])
    (built,) = folder.glob("checkpoint_runtime-*.whl")
    assert zipfile.is_zipfile(built)
    return built
