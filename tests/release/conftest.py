"""The release, made once per test session by scripts/release/release.py and pushed to the test
registry, signed with a key pair made for this session (never a committed key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import ModuleType

import pytest
from release_harness import RELEASE_DIR, Keys, Release, load_release_script, make_keys

from checkpoint_testenv.binaries import REPO_ROOT
from checkpoint_testenv.registry import Registry


@pytest.fixture(scope="session")
def release_script() -> ModuleType:
    return load_release_script()


@pytest.fixture(scope="session")
def release_keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("release-keys"))


@pytest.fixture(scope="session")
def release(
    oci_registry: Registry, release_keys: Keys, tmp_path_factory: pytest.TempPathFactory
) -> Release:
    """`release.py --push` to the test registry (the image from build.sh, cached by its inputs)."""
    folder = tmp_path_factory.mktemp("release") / "out"
    argv = [
        sys.executable,
        str(RELEASE_DIR / "release.py"),
        "--push",
        oci_registry.host,
        "--plain-http",
        "--key",
        str(release_keys.private),
        "--out",
        str(folder),
        "--allow-dirty",
    ]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, **release_keys.env},
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    record = json.loads((folder / "release.json").read_text())
    return Release(folder, record, oci_registry, release_keys, result.stderr + result.stdout)
