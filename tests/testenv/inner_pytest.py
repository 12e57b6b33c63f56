"""Run a small test file in a child pytest with the project's plugin, to see how the plugin's
fixtures behave (fail, never skip) without disturbing this session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from checkpoint_testenv.support.bytecode import child_env


def run_inner_pytest(
    test_file: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "checkpoint_testenv.pytest_plugin", "-q",
               "-p", "no:cacheprovider", "-rA", *options, str(test_file)]  # fmt: skip
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=child_env({**os.environ, **(env or {})}),
        cwd=test_file.parent,
        check=False,
    )


def fixture_without_binaries(tmp_path: Path, fixture: str, bin_env: str) -> str:
    """The output of a test using `fixture` when `bin_env` points at an empty folder; asserts
    the test errored (not skipped, not passed)."""
    test_file = tmp_path / f"test_needs_{fixture}.py"
    test_file.write_text(f"def test_uses_it({fixture}):\n    pass\n")
    result = run_inner_pytest(test_file, env={bin_env: str(tmp_path / "nothing-here")})
    assert result.returncode == 1, result.stdout
    assert "1 error" in result.stdout
    assert "skipped" not in result.stdout
    return result.stdout
