"""The per-tier time summary of a test run (checkpoint_testenv.tiertimes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from checkpoint_testenv.tiertimes import TIMES_ENV


def test_each_top_level_folder_of_tests_gets_its_tests_and_seconds(tmp_path: Path) -> None:
    for tier, count in (("fast", 2), ("slow", 1)):
        folder = tmp_path / "tests" / tier
        folder.mkdir(parents=True)
        pause = 0.3 if tier == "slow" else 0
        body = "".join(
            f"def test_{index}():\n    import time\n    time.sleep({pause})\n"
            for index in range(count)
        )
        (folder / f"test_{tier}.py").write_text(body)
    times = tmp_path / "times.tsv"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "checkpoint_testenv.tiertimes", "-q", "tests"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", TIMES_ENV: str(times)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "time per tier (setup + call + teardown)" in result.stdout
    rows = [line.split("\t") for line in times.read_text().splitlines()]
    assert [(tier, count) for tier, count, _ in rows] == [("slow", "1"), ("fast", "2")]
    assert float(rows[0][2]) >= 0.3
