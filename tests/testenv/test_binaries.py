"""Without the real binaries the environment fails loudly; it never skips or substitutes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_testenv import binaries


def test_locate_refuses_a_folder_without_the_binaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    monkeypatch.setenv(binaries.BIN_ENV, str(tmp_path))
    with pytest.raises(binaries.BinariesMissing, match="kube-apiserver, helm not executable"):
        binaries.locate()


def test_control_plane_fixture_errors_instead_of_skipping(tmp_path: Path) -> None:
    test_file = tmp_path / "test_needs_server.py"
    test_file.write_text("def test_uses_server(control_plane):\n    pass\n")
    env = {**os.environ, binaries.BIN_ENV: str(tmp_path / "nothing-here")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "checkpoint_testenv.pytest_plugin", "-q",
         "-p", "no:cacheprovider", "-rA", str(test_file)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    assert "1 error" in result.stdout
    assert "skipped" not in result.stdout
    assert "test control plane unavailable" in result.stdout
