"""The Grafana dashboard the chart ships: an opt-in ConfigMap with the sidecar's label, linted by
dashboard-lint (Grafana's dashboard schema as the Grafana Foundation SDK generates it, strict,
and every query through Prometheus' PromQL parser), with panels for what operators watch, and
querying only series a live runtime serves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from monitoring_helpers import unexported

from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import SdkRenderer
from checkpoint_testenv import monitoringtools as tools

DASHBOARD = CHART_DIR / "dashboards" / "checkpoint-runtime.json"
KEY = "checkpoint-runtime.json"


def dashboard_config_maps(sdk: SdkRenderer, values: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        m.document
        for m in sdk.render(values)
        if m.kind == "ConfigMap" and KEY in (m.document.get("data") or {})
    ]


@pytest.fixture(scope="module")
def shipped(sdk: SdkRenderer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dashboard as the rendered ConfigMap carries it, written to a file."""
    (config_map,) = dashboard_config_maps(sdk, {"grafanaDashboard": {"enabled": True}})
    path = tmp_path_factory.mktemp("dashboard") / KEY
    path.write_text(config_map["data"][KEY], encoding="utf-8")
    return path


def test_the_dashboard_config_map_is_opt_in_and_labelled_for_the_sidecar(
    sdk: SdkRenderer,
) -> None:
    assert dashboard_config_maps(sdk, {}) == []
    (config_map,) = dashboard_config_maps(
        sdk, {"grafanaDashboard": {"enabled": True, "labels": {"team": "platform"}}}
    )
    labels = config_map["metadata"]["labels"]
    assert labels["team"] == "platform"
    assert labels["grafana_dashboard"] == "1"  # Helm merges the default label in
    assert labels["app.kubernetes.io/instance"] == "cr"
    assert json.loads(config_map["data"][KEY]) == json.loads(DASHBOARD.read_text(encoding="utf-8"))


def test_the_shipped_dashboard_passes_the_linter(shipped: Path) -> None:
    completed = tools.dashboard_lint(shipped)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.strip() == f"{shipped}: ok"


def test_it_has_the_panels_operators_watch() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = {
        panel["title"]: " ".join(target["expr"] for target in panel["targets"])
        for panel in dashboard["panels"]
    }
    wanted = {
        "Shard headroom": "checkpoint_shard_headroom_ratio",
        "Bytes written to the API server": "checkpoint_shard_api_bytes_written_total",
        "Persist latency": "checkpoint_persist_seconds_bucket",
        "Writes, conflicts and uncertain writes": "checkpoint_conflicts_total",
        "Leader": "checkpoint_leader",
    }
    for title, series in wanted.items():
        assert series in queries.get(title, ""), title


def test_its_queries_name_only_series_the_runtime_exports(shipped: Path, scraped: set[str]) -> None:
    completed = tools.dashboard_lint("-metrics", shipped)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    selected = set(completed.stdout.split())
    assert "checkpoint_shard_headroom_ratio" in selected
    assert unexported(selected, scraped) == set()


@pytest.mark.parametrize(
    ("break_it", "finding"),
    [
        (lambda d: d["panels"][0]["options"]["legend"].update(placment="bottom"), "placment"),
        (lambda d: d["panels"][1]["targets"][0].update(expr="min by (shard (x)"), "PromQL"),
        (lambda d: d["panels"][2]["datasource"].update(uid="prom"), "datasource"),
        (lambda d: d["panels"][3].pop("description"), "no description"),
        (
            lambda d: d["panels"][4]["targets"][0].update(expr="rate(checkpoint_writes_total[5m])"),
            "$__rate_interval",
        ),
    ],
    ids=["unknown-field", "bad-promql", "datasource", "description", "rate-interval"],
)
def test_the_linter_catches_a_broken_dashboard(tmp_path: Path, break_it: Any, finding: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    break_it(dashboard)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(dashboard), encoding="utf-8")
    completed = tools.dashboard_lint(path)
    assert completed.returncode == 1
    assert finding in completed.stdout, completed.stdout
