"""Every script a user or the justfile runs loads and answers --help: an import a refactoring
broke fails here, not in the middle of a soak or a benchmark run. The benchmarks are the
package scripts/bench, run as `python -m bench.<name>` with scripts/ on the module path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# policy_coverage.py reads OPA's report from stdin and has no options.
SCRIPTS = sorted(path for path in ROOT.glob("scripts/*.py") if path.name != "policy_coverage.py")
# report is the benchmarks' shared module, not a command.
BENCH_MODULES = sorted(
    path.stem
    for path in (ROOT / "scripts/bench").glob("*.py")
    if path.stem not in ("__init__", "report")
)


def _help(argv: list[str], env: dict[str, str] | None = None) -> None:
    result = subprocess.run(
        [sys.executable, *argv, "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_script_loads_and_answers_help(script: Path) -> None:
    _help([str(script)])


@pytest.mark.parametrize("name", BENCH_MODULES)
def test_the_benchmark_module_loads_and_answers_help(name: str) -> None:
    _help(["-m", f"bench.{name}"], env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")})


def test_the_list_is_not_empty() -> None:
    assert len(SCRIPTS) + len(BENCH_MODULES) >= 10
