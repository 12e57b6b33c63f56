"""The test step's lanes and budget (checkpoint_testenv.lanes, tests/lanes.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_testenv import lanes
from checkpoint_testenv.binaries import REPO_ROOT

CONFIG = REPO_ROOT / "tests" / "lanes.toml"


def test_every_tier_of_the_suite_runs_in_exactly_one_lane_with_a_share() -> None:
    layout, budget = lanes.load_config(CONFIG)
    lanes.check_config(layout, budget, lanes.test_tiers(CONFIG.parent))
    assert budget.step_seconds < budget.ci_limit_seconds


@pytest.mark.parametrize(
    ("paths", "shares", "message"),
    [
        ((["tests/a"], ["tests/b"]), {"a": 1, "b": 1}, "tiers in no lane"),
        ((["tests/a", "tests/b", "tests/c"], ["tests/a"]), {"a": 1, "b": 1, "c": 1}, "is in lanes"),
        ((["tests/a", "tests/b", "tests/c"], []), {"a": 1, "b": 1}, "without a share"),
        (
            (["tests/a", "tests/b", "tests/c", "tests/d"], []),
            dict.fromkeys("abcd", 1),
            "without tests",
        ),
    ],
)
def test_a_layout_that_would_skip_or_repeat_a_tier_is_refused(
    paths: tuple[list[str], ...], shares: dict[str, float], message: str
) -> None:
    layout = [lanes.Lane(f"lane{index}", tuple(lane)) for index, lane in enumerate(paths)]
    budget = lanes.Budget(100, 5400, shares)
    with pytest.raises(lanes.LaneConfigError, match=message):
        lanes.check_config(layout, budget, ["a", "b", "c"])


def _suite(root: Path, budget: float, shares: dict[str, float]) -> Path:
    bodies = {
        "good": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
        "slow": "import time\n\ndef test_slow():\n    time.sleep(0.4)\n",
        "bad": "def test_bad():\n    assert 1 == 2, 'the bad lane fails'\n",
    }
    for tier, body in bodies.items():
        (root / "tests" / tier).mkdir(parents=True)
        (root / "tests" / tier / f"test_{tier}.py").write_text(body)
    share_lines = "".join(f"{tier} = {seconds}\n" for tier, seconds in shares.items())
    config = root / "tests" / "lanes.toml"
    config.write_text(
        f"[budget]\ntest_step_seconds = {budget}\nci_limit_seconds = 5400\n\n"
        '[lanes.one]\npaths = ["tests/good", "tests/slow"]\n\n'
        '[lanes.two]\npaths = ["tests/bad"]\n\n'
        f"[shares]\n{share_lines}"
    )
    return config


def _run(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    times = root / "tiers.tsv"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "checkpoint_testenv.lanes",
            f"--config={config}",
            f"--scratch={root / 'scratch'}",
            "-p",
            "checkpoint_testenv.tiertimes",
            "-q",
        ],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", lanes.TIMES_ENV: str(times)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_lanes_run_side_by_side_and_a_failing_lane_fails_the_step(tmp_path: Path) -> None:
    config = _suite(tmp_path, 600, {"good": 60, "slow": 60, "bad": 60})
    result = _run(tmp_path, config)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "===== lane two: FAILED (exit 1)" in result.stdout
    assert "the bad lane fails" in result.stdout  # the failing lane's own output, whole
    assert "===== lane one: passed" in result.stdout
    assert "lanes: failed: two" in result.stderr
    assert (
        result.stdout.rstrip()
        .splitlines()[-1]
        .startswith("==== 3 passed, 0 skipped, 1 failed, 0 errors in 2 lanes")
    )
    rows = [line.split("\t") for line in (tmp_path / "tiers.tsv").read_text().splitlines()]
    assert sorted((tier, count) for tier, count, _ in rows) == [
        ("bad", "1"),
        ("good", "2"),
        ("slow", "1"),
    ]
    assert (
        "tests.slow.test_slow::test_slow" in result.stderr.split("slowest tests")[1].splitlines()[1]
    )


def test_a_step_past_its_budget_fails_with_the_table_and_a_tier_past_its_share_is_named(
    tmp_path: Path,
) -> None:
    config = _suite(tmp_path, 0.2, {"good": 60, "slow": 0.1, "bad": 60})
    (tmp_path / "tests" / "bad" / "test_bad.py").write_text("def test_fixed():\n    pass\n")
    result = _run(tmp_path, config)
    assert result.returncode == lanes.EXIT_OVER_BUDGET, result.stdout + result.stderr
    assert "past its budget of 0 s (tests/lanes.toml)" in result.stderr
    assert "tier slow took 0 s, past its share of 0 s" in result.stderr
    assert "tier good" not in result.stderr.split("slowest tests")[1]
    assert "lanes: tier, tests, s" in result.stderr  # the table comes with the verdict
