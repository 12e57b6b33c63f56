"""`just check`'s timing block (scripts/check.sh) and the docs table written from it.

check.sh runs here with a stand-in for `just` that takes 0.6 s per recipe (and fails one
recipe when asked), so the block parsed below is the one the real script prints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_testenv.binaries import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import ci_times

FAKE_JUST = """#!/bin/bash
shift 2
sleep 0.6
[[ $1 == "${FAIL_RECIPE:-}" ]] && { echo "$1 broke" >&2; exit 7; }
echo "5 passed in 1.00s"
"""


def _check(tmp_path: Path, fail: str = "") -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "just"
    fake.write_text(FAKE_JUST)
    fake.chmod(0o755)
    return subprocess.run(
        [str(REPO_ROOT / "scripts" / "check.sh")],
        # no go on PATH: the background module prefetch has nothing to do
        env={
            "PATH": "/usr/bin:/bin",
            "JUST": str(fake),
            "FAIL_RECIPE": fail,
            "HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_step_is_timed_and_the_independent_builds_run_side_by_side(tmp_path: Path) -> None:
    result = _check(tmp_path)
    assert result.returncode == 0, result.stderr
    run = ci_times.parse("fake", result.stderr)
    assert run.verdict == "ok"
    assert run.cores
    assert run.load_before
    assert run.commit
    for step in ("setup", "testenv-build", "testenv-node-build", "s3-build", "policy-check"):
        assert run.steps[step][0] >= 1
    serial = sum(wall for step, (wall, _) in run.steps.items() if not step.startswith("("))
    group = run.steps["(the group above, side by side)"][0]
    assert group < serial - 2  # 13 recipes of 0.6 s in two chains
    assert result.stdout.strip().splitlines()[-1] == "5 passed in 1.00s"


def test_a_failed_step_stops_the_run_and_still_prints_the_block(tmp_path: Path) -> None:
    result = _check(tmp_path, fail="lint")
    assert result.returncode == 7
    run = ci_times.parse("fake", result.stderr)
    assert run.verdict == "exit 7"
    assert "check: lint failed (exit 7)" in result.stderr
    assert "test-lanes --durations=25" not in run.steps


def test_the_docs_table_is_written_from_the_logs_between_its_markers(tmp_path: Path) -> None:
    log = tmp_path / "check.log"
    log.write_text(_check(tmp_path).stderr)
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# before\n{ci_times.BEGIN}\nold figures\n{ci_times.END}\n# after\n")
    code = ci_times.main(["caches kept=" + str(log), "--doc", str(doc)])
    assert code == 0
    text = doc.read_text()
    assert "old figures" not in text
    assert text.startswith("# before\n")
    assert text.endswith("# after\n")
    assert "| `testenv-build` | 1 | " in text
    assert "caches kept: wall s | CPU s" in text


def test_a_log_without_the_block_is_refused_by_name(tmp_path: Path) -> None:
    log = tmp_path / "cut.log"
    log.write_text("check: == setup\nsetup: done\n")
    with pytest.raises(ci_times.LogError, match="no `just check` summary"):
        ci_times.parse("cut", log.read_text())
