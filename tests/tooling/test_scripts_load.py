"""Every script a user or the justfile runs loads and answers --help: an import a refactoring
broke fails here, not in the middle of a soak or a benchmark run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# policy_coverage.py reads OPA's report from stdin and has no options.
SCRIPTS = sorted(
    path
    for path in [*ROOT.glob("scripts/*.py"), *ROOT.glob("scripts/bench/*.py")]
    if path.name != "policy_coverage.py"
)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_script_loads_and_answers_help(script: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


def test_the_list_is_not_empty() -> None:
    assert len(SCRIPTS) >= 10
