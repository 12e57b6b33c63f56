"""Find the pinned kube-apiserver, etcd and helm binaries.

They come from scripts/testenv/build.sh (built from the official Go modules, cached per pin set),
or from the folder named by CHECKPOINT_TESTENV_BIN. A missing binary is an error, never a reason
to skip or to fall back to something that only looks like an API server.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BIN_ENV = "CHECKPOINT_TESTENV_BIN"
REQUIRED = ("kube-apiserver", "etcd", "helm")
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build.sh"


class BinariesMissing(RuntimeError):
    """The test environment's binaries are not there and could not be built."""


def locate() -> Path:
    """Return the folder holding kube-apiserver, etcd and helm, building them if needed."""
    configured = os.environ.get(BIN_ENV)
    folder = Path(configured) if configured else _run_build_script()
    missing = [name for name in REQUIRED if not os.access(folder / name, os.X_OK)]
    if missing:
        source = f"${BIN_ENV}" if configured else str(BUILD_SCRIPT)
        raise BinariesMissing(f"{', '.join(missing)} not executable in {folder} (from {source})")
    return folder


def _run_build_script() -> Path:
    if not BUILD_SCRIPT.is_file():
        raise BinariesMissing(f"{BUILD_SCRIPT} not found; set ${BIN_ENV} to a binary folder")
    # stderr is left to the terminal: a first build takes minutes and prints its progress there.
    result = subprocess.run(
        [str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False, cwd=REPO_ROOT
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise BinariesMissing(
            f"{BUILD_SCRIPT} failed with exit code {result.returncode}; "
            f"run it by hand to see why, or set ${BIN_ENV}"
        )
    return Path(lines[-1])
