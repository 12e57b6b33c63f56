"""pytest plugin: where a test run's time goes, per tier (registered from tests/conftest.py).

A tier is a top-level folder of tests/ (unit, render, store, node, ...). At the end of the run
the terminal summary shows, per tier, the tests run and the seconds their setup, call and
teardown took (a session fixture's start-up, such as the control plane or the node, counts
toward the tier of the first test that asked for it), and the session's wall time. With
$CHECKPOINT_TEST_TIMES set, the same rows are written to that file as tab-separated lines
(`tier`, tests, seconds), for `just check`'s timing summary.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

TIMES_ENV = "CHECKPOINT_TEST_TIMES"
_PHASES = ("setup", "call", "teardown")


class TierTimes:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)
        self.started = time.monotonic()

    def tier(self, nodeid: str) -> str:
        parts = nodeid.split("::", 1)[0].split("/")
        if len(parts) > 2 and parts[0] == "tests":
            return parts[1]
        return parts[0] if len(parts) > 1 else "(top level)"

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when in _PHASES:
            tier = self.tier(report.nodeid)
            self.seconds[tier] += report.duration
            self.tests[tier].add(report.nodeid)

    def rows(self) -> list[tuple[str, int, float]]:
        ranked = sorted(self.seconds.items(), key=lambda item: -item[1])
        return [(tier, len(self.tests[tier]), seconds) for tier, seconds in ranked]

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        rows = self.rows()
        if not rows:
            return
        wall = time.monotonic() - self.started
        terminalreporter.section("time per tier (setup + call + teardown)")
        for tier, count, seconds in rows:
            terminalreporter.write_line(f"{tier:<14} {count:>6} tests {seconds:>9.1f} s")
        total = sum(seconds for _, _, seconds in rows)
        terminalreporter.write_line(
            f"{'all tiers':<14} {sum(r[1] for r in rows):>6} tests "
            f"{total:>9.1f} s (session wall {wall:.1f} s)"
        )
        target = os.environ.get(TIMES_ENV)
        if target:
            lines = [f"{tier}\t{count}\t{seconds:.1f}\n" for tier, count, seconds in rows]
            Path(target).write_text("".join(lines))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(TierTimes(), "checkpoint-tier-times")
