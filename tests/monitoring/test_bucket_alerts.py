"""The alerts of several leadership buckets under the pinned promtool: rendered only when
checkpoint.store.buckets is above 1, `promtool check rules` and `promtool test rules` (a firing
and a quiet case each, alert_rules_buckets_test.yaml), and every series they read is one the
runtime registers (checked on its metrics registry: a store of one bucket serves none of the
per-bucket series)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from checkpoint_gate.render import SdkRenderer
from checkpoint_runtime.runtime.metrics import RuntimeMetrics
from checkpoint_testenv import monitoringtools as tools

UNIT_TESTS = Path(__file__).with_name("alert_rules_buckets_test.yaml")
BUCKET_ALERTS = {"CheckpointBucketNoLeader", "CheckpointBucketsAboveShare"}


def rule(sdk: SdkRenderer, buckets: int) -> dict[str, Any]:
    values = {"prometheusRule": {"enabled": True}, "checkpoint": {"store": {"buckets": buckets}}}
    (document,) = [
        m.document
        for m in sdk.render(values, release="cr", namespace="apps")
        if m.kind == "PrometheusRule"
    ]
    return document


def test_the_bucket_alerts_render_only_with_several_buckets(sdk: SdkRenderer) -> None:
    assert not BUCKET_ALERTS & set(tools.alerts(rule(sdk, 1)))
    assert set(tools.alerts(rule(sdk, 3))) >= BUCKET_ALERTS


def test_each_bucket_alert_fires_when_it_should_and_stays_quiet_otherwise(
    sdk: SdkRenderer, tmp_path: Path
) -> None:
    text = tools.rule_file(rule(sdk, 3))
    (tmp_path / "rules.yaml").write_text(text, encoding="utf-8")
    checked = tools.promtool("check", "rules", tmp_path / "rules.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shutil.copyfile(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    completed = tools.promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # not vacuous: the share alert turned around fails its cases
    inverted = text.replace("checkpoint_buckets_led{", "-checkpoint_buckets_led{")
    (tmp_path / "rules.yaml").write_text(inverted, encoding="utf-8")
    broken = tools.promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert broken.returncode != 0
    assert "CheckpointBucketsAboveShare" in broken.stdout + broken.stderr


def test_the_bucket_alerts_read_only_series_the_runtime_registers(sdk: SdkRenderer) -> None:
    alerts = tools.alerts(rule(sdk, 3))
    read = set().union(*(tools.selected_metrics(alerts[name]) for name in BUCKET_ALERTS))
    registered = {metric.name for metric in RuntimeMetrics().store.registry.collect()}
    assert read <= registered, read - registered
