"""The contract between the chart and the runtime: every CI values file renders a config.json
that `checkpoint-runtime run` accepts (schema, election timings, shards, §6 projection), and the
objectstore collector can be built from each of its feeds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from checkpoint_runtime.runtime import projection
from checkpoint_runtime.runtime.settings import configured_shards, parse
from checkpoint_testenv import binaries

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "checkpoint-runtime"
VALUES_FILES = sorted((ROOT / "ci").glob("*-values.yaml"))


@pytest.fixture(scope="module")
def helm() -> Path:
    return binaries.locate() / "helm"


def rendered_config(helm: Path, values: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    output = subprocess.run(
        [str(helm), "template", "cr", str(CHART), "--namespace", "ns", "-f", str(values)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    documents = [d for d in yaml.safe_load_all(output) if isinstance(d, dict)]
    config_map = next(
        d for d in documents if d["kind"] == "ConfigMap" and "config.json" in d.get("data", {})
    )
    chart_values = yaml.safe_load(values.read_text()) or {}
    return json.loads(config_map["data"]["config.json"]), chart_values


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda path: path.stem)
def test_every_ci_values_file_renders_a_config_the_runtime_accepts(
    helm: Path, values: Path
) -> None:
    config, chart_values = rendered_config(helm, values)
    settings = parse(config)
    checkpoint = chart_values.get("checkpoint", {})
    assert settings.store.backend == checkpoint.get("store", {}).get("backend", "kubernetes")
    assert settings.election_enabled == (settings.store.backend == "kubernetes")
    assert len(settings.collectors) == len(checkpoint.get("collectors", []))
    assert all(item.fits for item in projection.check(settings))
    if settings.store.backend == "kubernetes":
        assert settings.store.namespace
        assert settings.store.lease_name
        defaults = yaml.safe_load((CHART / "values.yaml").read_text())["checkpoint"]
        election = {**defaults["leaderElection"], **checkpoint.get("leaderElection", {})}
        assert (
            settings.timings.lease_duration,
            settings.timings.renew_deadline,
            settings.timings.retry_period,
        ) == (
            election["leaseDurationSeconds"],
            election["renewDeadlineSeconds"],
            election["retryPeriodSeconds"],
        )
    else:
        assert settings.store.path == checkpoint["store"].get("path", settings.store.path)
    # rbac.scope=names: the runtime reads exactly its collectors' shards by name, no list
    names = chart_values.get("rbac", {}).get("scope") == "names"
    assert settings.store.discovery == ("names" if names else "labels")
    expected = [c.namespace for c in settings.collectors] if names else None
    assert configured_shards(settings) == expected


def test_only_the_kubernetes_backend_discovers_by_name() -> None:
    file_store = {"store": {"backend": "file", "path": "/x", "discovery": "names"}}
    assert configured_shards(parse(file_store)) is None
    kubernetes = {"store": {"backend": "kubernetes", "discovery": "names"}, "collectors": []}
    assert configured_shards(parse(kubernetes)) == []
    assert configured_shards(parse({"store": {"backend": "kubernetes"}})) is None
