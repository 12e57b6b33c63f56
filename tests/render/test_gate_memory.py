"""MEM-1: the gate denies values whose rendered Deployment gives the runtime container less memory
than the runtime is projected to need, because the runtime refuses to start there (exit 2, a
crash loop once installed).

The gate runs the runtime's own startup check with the limit the Deployment renders; the same
check with that limit (what `run` reads from its cgroup) refuses with the same message. Removing
the limit from the gate's call makes the refused case pass the gate, and this test fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from checkpoint_gate.pipeline import CHECK_RUNTIME, Gate
from checkpoint_gate.runtime_check import MEMORY_RULE, memory_limit, rendered_config
from checkpoint_runtime.cli import main
from checkpoint_runtime.errors import MemoryLimitError
from checkpoint_runtime.runtime import projection, startup

MI = 1_048_576


def million_uuid_seen_keys(**extra: Any) -> dict[str, Any]:
    """One feed at the schema's maximum maxSeenKeys, in 32 chunk slots (it fits its objects)."""
    feed = {"kind": "objectstore", "feed": "audit", "url": "file:///data/audit"}
    checkpoint = {"store": {"maxChunks": 32}, "collectors": [{**feed, "maxSeenKeys": 1_000_000}]}
    return {"checkpoint": checkpoint, **extra}


def with_memory_limit(limit: str) -> dict[str, Any]:
    return {
        "resources": {
            "requests": {"cpu": "50m", "memory": "32Mi"},
            "limits": {"cpu": "500m", "memory": limit},
        }
    }


@pytest.fixture(scope="module")
def gate() -> Gate:
    return Gate()


def config_of(result: Any) -> dict[str, Any]:
    manifest = rendered_config(result.manifests)
    assert manifest is not None
    document: dict[str, Any] = json.loads(manifest.document["data"]["config.json"])
    return document


def test_a_million_seen_keys_under_the_default_512mi_are_denied_with_the_numbers(
    gate: Gate,
) -> None:
    result = gate.run(million_uuid_seen_keys(), release="mem", namespace="apps")
    assert memory_limit(result.manifests) is not None
    (finding,) = [f for f in result.findings if f.level.value == "deny"]
    assert finding.check == CHECK_RUNTIME
    assert finding.rule == MEMORY_RULE
    assert finding.obj == "resources.limits.memory"
    assert finding.source.endswith("templates/deployment.yaml")
    report = projection.memory(projection.project(startup.check(config_of(result))[0]), 512 * MI)
    assert report.projected_bytes > 512 * MI
    assert f"projected at {report.projected_bytes} bytes" in finding.message
    assert f"limit {512 * MI} bytes (512Mi)" in finding.message
    assert f"resources.limits.memory in the chart) to at least {report.needed_mebibytes}Mi" in (
        finding.message
    )
    assert "or lower collectors[0].maxSeenKeys" in finding.message
    assert "the pods would crash-loop" in finding.message
    # the runtime's own refusal in a container with that limit, word for word
    with pytest.raises(MemoryLimitError) as refused:
        startup.check(config_of(result), 512 * MI)
    assert finding.message.startswith(refused.value.message + " (the runtime refuses to start")


def test_the_same_values_with_the_limit_the_refusal_advises_pass(gate: Gate) -> None:
    refused = gate.run(million_uuid_seen_keys(), release="mem", namespace="apps")
    settings, shards = startup.check(config_of(refused))
    needed = f"{projection.memory(shards).needed_mebibytes}Mi"
    result = gate.run(million_uuid_seen_keys(**with_memory_limit(needed)), namespace="apps")
    limit = memory_limit(result.manifests)
    assert limit is not None
    assert limit[0] == projection.memory_bytes(needed)
    assert limit[1].endswith("templates/deployment.yaml")
    assert not result.denied, result.findings
    one_less = f"{projection.memory(shards).needed_mebibytes - 1}Mi"
    result = gate.run(million_uuid_seen_keys(**with_memory_limit(one_less)), namespace="apps")
    assert [f.rule for f in result.findings if f.level.value == "deny"] == [MEMORY_RULE]
    assert settings.collectors[0].kind == "objectstore"


@pytest.mark.parametrize("values", [{}, with_memory_limit("128Mi")], ids=["defaults", "128Mi"])
def test_the_defaults_pass_also_under_a_small_limit(gate: Gate, values: dict[str, Any]) -> None:
    result = gate.run(values, release="mem", namespace="apps")
    assert not result.denied, result.findings


def test_a_limit_below_the_process_itself_is_denied(gate: Gate) -> None:
    result = gate.run(with_memory_limit("64Mi"), release="mem", namespace="apps")
    (finding,) = [f for f in result.findings if f.level.value == "deny"]
    assert finding.rule == MEMORY_RULE
    assert "for the process" in finding.message


def test_the_gate_command_prints_the_rule_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "million.yaml"
    values.write_text(yaml.safe_dump(million_uuid_seen_keys()), encoding="utf-8")
    assert main(["gate", "-f", str(values)]) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if MEMORY_RULE in line)
    assert line.split()[0] == "DENY"
    assert "resources.limits.memory" in line
    assert f"limit {512 * MI} bytes (512Mi)" in line
    values.write_text(
        yaml.safe_dump(million_uuid_seen_keys(**with_memory_limit("2Gi"))), encoding="utf-8"
    )
    assert main(["gate", "-f", str(values)]) == 0
