"""Find the pinned tools that check the chart's monitoring objects and run them: promtool on
the alert rules, dashboard-lint on the Grafana dashboard.

The binaries come from scripts/testenv/build-monitoring-tools.sh (built from the Go modules at
the versions pinned in scripts/testenv/monitoring-tools/go.mod, cached per pin set), or from the
folder named by CHECKPOINT_MONITORING_TOOLS_BIN. A missing binary is an error, never a reason to
skip.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from checkpoint_testenv.binaries import REPO_ROOT, locate_built

BIN_ENV = "CHECKPOINT_MONITORING_TOOLS_BIN"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-monitoring-tools.sh"
REQUIRED = ("promtool", "dashboard-lint")
# A metric name in a PromQL expression: an identifier directly followed by a label matcher.
_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


@cache
def locate() -> Path:
    """The folder holding promtool and dashboard-lint, building them if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, REQUIRED)


def run(tool: str, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`tool` (one of REQUIRED) with `args`; the completed process (the caller checks the exit
    code)."""
    return subprocess.run(
        [str(locate() / tool), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def promtool(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run("promtool", *args, cwd=cwd)


def dashboard_lint(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run("dashboard-lint", *args)


def rule_file(prometheus_rule: dict[str, Any]) -> str:
    """A PrometheusRule object's spec as a Prometheus rule file (what promtool reads)."""
    return yaml.safe_dump({"groups": prometheus_rule["spec"]["groups"]}, sort_keys=False)


def alerts(prometheus_rule: dict[str, Any]) -> dict[str, str]:
    """Alert name -> PromQL expression of every alerting rule."""
    return {
        rule["alert"]: rule["expr"]
        for group in prometheus_rule["spec"]["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


def selected_metrics(expression: str) -> set[str]:
    """The metric names an expression selects (each written with a `{...}` matcher)."""
    return set(_SELECTOR.findall(expression))
