"""The chart's alert rules under the pinned promtool: `promtool check rules` on every render that
enables them, `promtool test rules` with a firing and a quiet case per alert, and every series
name in the rules and in their unit tests checked against a live /metrics scrape of the runtime,
so a renamed metric fails here instead of silently never alerting."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_helpers import unexported

from checkpoint_gate.paths import CI_VALUES_DIR
from checkpoint_gate.render import SdkRenderer
from checkpoint_testenv import monitoringtools as tools

UNIT_TESTS = Path(__file__).with_name("alert_rules_test.yaml")
RELEASE, NAMESPACE = "cr", "apps"  # the labels alert_rules_test.yaml's series carry
ENABLED = {"prometheusRule": {"enabled": True}}
_SERIES = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\{")

MATRIX = [("defaults", {})] + [
    (path.name, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    for path in sorted(CI_VALUES_DIR.glob("*-values.yaml"))
]


def merged(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: merged(base.get(k), v) for k, v in override.items()}}
    return override


def prometheus_rule(sdk: SdkRenderer, values: dict[str, Any]) -> dict[str, Any]:
    (rule,) = [
        m.document
        for m in sdk.render(merged(values, ENABLED), release=RELEASE, namespace=NAMESPACE)
        if m.kind == "PrometheusRule"
    ]
    return rule


@pytest.fixture(scope="module")
def rule(sdk: SdkRenderer) -> dict[str, Any]:
    return prometheus_rule(sdk, {})


@pytest.fixture(scope="module")
def unit_tests() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))
    return document


def run_unit_tests(rules_text: str, workdir: Path) -> tuple[int, str]:
    (workdir / "rules.yaml").write_text(rules_text, encoding="utf-8")
    shutil.copyfile(UNIT_TESTS, workdir / UNIT_TESTS.name)
    completed = tools.promtool("test", "rules", UNIT_TESTS.name, cwd=workdir)
    return completed.returncode, completed.stdout + completed.stderr


@pytest.mark.parametrize("values", [pytest.param(v, id=name) for name, v in MATRIX])
def test_every_render_enabling_the_rules_passes_promtool_check_rules(
    sdk: SdkRenderer, values: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(tools.rule_file(prometheus_rule(sdk, values)), encoding="utf-8")
    completed = tools.promtool("check", "rules", path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "SUCCESS: 6 rules found" in completed.stdout, completed.stdout


def test_each_alert_fires_when_it_should_and_stays_quiet_otherwise(
    rule: dict[str, Any], tmp_path: Path
) -> None:
    code, output = run_unit_tests(tools.rule_file(rule), tmp_path)
    assert code == 0, output
    assert "SUCCESS" in output, output


def test_every_alert_has_a_firing_and_a_quiet_case(
    rule: dict[str, Any], unit_tests: dict[str, Any]
) -> None:
    cases = [case for test in unit_tests["tests"] for case in test["alert_rule_test"]]
    firing = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert firing == quiet == set(tools.alerts(rule))


def test_a_broken_rule_fails_the_unit_tests(rule: dict[str, Any], tmp_path: Path) -> None:
    """The unit tests are not vacuous: the headroom alert with its comparison turned around,
    and the no-leader alert without its release selector, each fail them."""
    text = tools.rule_file(rule)
    inverted = text.replace("checkpoint_shard_headroom_ratio", "-checkpoint_shard_headroom_ratio")
    assert inverted != text
    code, output = run_unit_tests(inverted, tmp_path)
    assert code != 0
    assert "CheckpointShardHeadroomLow" in output
    unselected = text.replace(
        f'checkpoint_leader{{namespace="{NAMESPACE}",service="{RELEASE}-checkpoint-runtime"}}',
        "checkpoint_leader",
    )
    assert unselected != text
    code, output = run_unit_tests(unselected, tmp_path)
    assert code != 0
    assert "CheckpointNoLeader" in output


def test_rules_and_their_unit_tests_name_only_series_the_runtime_exports(
    rule: dict[str, Any], unit_tests: dict[str, Any], scraped: set[str]
) -> None:
    in_rules = set().union(*(tools.selected_metrics(e) for e in tools.alerts(rule).values()))
    in_tests = {
        match.group(1)
        for test in unit_tests["tests"]
        for series in test["input_series"]
        if (match := _SERIES.match(series["series"]))
    }
    assert in_rules <= in_tests, "every series a rule reads appears in the unit tests"
    assert unexported(in_rules | in_tests, scraped) == set()
    # The write-budget alert's two series are among them (served from shard format v3 on).
    assert {
        "checkpoint_shard_api_bytes_written_total",
        "checkpoint_store_write_budget_bytes_per_second",
    } <= in_rules & scraped


def test_a_renamed_series_is_caught_by_the_scrape_check(scraped: set[str]) -> None:
    assert "checkpoint_shard_headroom_ratio" in scraped
    assert "checkpoint_persist_seconds_count" in scraped
    assert unexported({"checkpoint_shard_headroom_fraction"}, scraped) == {
        "checkpoint_shard_headroom_fraction"
    }
