"""The gate's verdict is the runtime's: values whose rendered config.json `checkpoint-runtime run`
would refuse at startup (exit 2, a crash loop once installed) are denied by the gate, with the
runtime's message and the values key to change; values the runtime accepts pass.

The runtime side is the real command on the config the chart rendered:
`checkpoint-runtime run --check-config --config config.json` (the startup checks only). Removing
the gate's runtime check makes the refused cases pass the gate, and this test fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkpoint_gate.pipeline import CHECK_RUNTIME, Gate
from checkpoint_gate.runtime_check import rendered_config, values_key

COMMAND = Path(sys.executable).with_name("checkpoint-runtime")


def feed(name: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "objectstore", "feed": name, "url": f"file:///data/{name}", **extra}


def flowlogs(**extra: Any) -> dict[str, Any]:
    return {"kind": "flowlogs", "url": "http://flowlogs.corp.svc:8080/api/v1/flows", **extra}


def collectors(
    *entries: dict[str, Any], max_chunks: int | None = None, memory_limit: str | None = None
) -> dict[str, Any]:
    checkpoint: dict[str, Any] = {"collectors": list(entries)}
    if max_chunks is not None:
        checkpoint["store"] = {"maxChunks": max_chunks}
    if memory_limit is None:
        return {"checkpoint": checkpoint}
    # A memory limit the state fits in: the runtime here reads no cgroup limit, the gate the
    # rendered one (its check of the limit is tests/render/test_gate_memory.py).
    limits = {"cpu": "500m", "memory": memory_limit}
    resources = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": limits}
    return {"checkpoint": checkpoint, "resources": resources}


# name -> (values, the values key the refusal must name, or None when both accept)
CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    "defaults": ({}, None),
    "feed-default-bound": (collectors(feed("audit")), None),
    "feed-30000-seen-keys": (collectors(feed("audit", maxSeenKeys=30_000)), None),
    "feed-50000-seen-keys-in-one-object": (
        collectors(feed("audit", maxSeenKeys=50_000), max_chunks=1),
        "checkpoint.collectors[0].maxSeenKeys",
    ),
    "feed-100000-seen-keys-in-8-chunk-slots": (
        collectors(feed("audit", maxSeenKeys=100_000)),
        None,
    ),
    "feed-500000-seen-keys-in-8-chunk-slots": (
        collectors(feed("audit", maxSeenKeys=500_000)),
        "checkpoint.collectors[0].maxSeenKeys",
    ),
    "feed-500000-seen-keys-in-32-chunk-slots": (
        collectors(feed("audit", maxSeenKeys=500_000), max_chunks=32, memory_limit="2Gi"),
        None,
    ),
    "feed-1000000-seen-keys-in-32-chunk-slots": (
        collectors(feed("audit", maxSeenKeys=1_000_000), max_chunks=32, memory_limit="2Gi"),
        None,
    ),
    "second-feed-too-large": (
        collectors(feed("a"), feed("b", tailnet="corp", maxSeenKeys=1_000_000)),
        "checkpoint.collectors[1].maxSeenKeys",
    ),
    "flowlogs-a-day-every-10s": (
        collectors(flowlogs(replayWindowSeconds=86_400, pollSeconds=10)),
        None,
    ),
    "flowlogs-a-day-every-100ms": (  # the fastest poll the schemas allow: fits in chunk slots
        collectors(flowlogs(replayWindowSeconds=86_400, pollSeconds=0.1), memory_limit="2Gi"),
        None,
    ),
    "file-store-with-feeds": (
        {
            "checkpoint": {
                "store": {"backend": "file"},
                "collectors": [feed("a"), flowlogs(tailnet="edge")],
            }
        },
        None,
    ),
    "slow-election": (
        {
            "checkpoint": {
                "leaderElection": {
                    "leaseDurationSeconds": 300,
                    "renewDeadlineSeconds": 10,
                    "retryPeriodSeconds": 8,
                }
            }
        },
        None,
    ),
}


@pytest.fixture(scope="module")
def gate() -> Gate:
    return Gate()


def runtime_accepts(config_json: str, folder: Path) -> tuple[bool, str]:
    path = folder / "config.json"
    path.write_text(config_json, encoding="utf-8")
    completed = subprocess.run(
        [str(COMMAND), "run", "--check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode in (0, 2), completed.stderr
    assert "Traceback" not in completed.stderr
    return completed.returncode == 0, completed.stderr


@pytest.mark.parametrize(("values", "key"), list(CASES.values()), ids=list(CASES))
def test_the_gate_denies_exactly_what_the_runtime_refuses_at_startup(
    gate: Gate, tmp_path: Path, values: dict[str, Any], key: str | None
) -> None:
    result = gate.run(values, release="parity", namespace="apps")
    assert not result.of_check("render"), result.findings
    manifest = rendered_config(result.manifests)
    assert manifest is not None
    accepted, runtime_log = runtime_accepts(manifest.document["data"]["config.json"], tmp_path)

    refusals = result.of_check(CHECK_RUNTIME)
    assert accepted == (not refusals)
    assert accepted == (key is None), runtime_log
    other_denies = [f for f in result.findings if f.level.value == "deny" and f not in refusals]
    assert other_denies == []
    if key is not None:
        (refusal,) = refusals
        assert refusal.obj == key
        runtime_error = json.loads(runtime_log.splitlines()[-1])
        # the runtime's own message, under the values key instead of the config key
        assert runtime_error["msg"].removeprefix("invalid configuration: ") == (
            f"{runtime_error['key']}: {refusal.message.split(' (the runtime refuses')[0]}"
        )
        assert values_key(runtime_error["key"]) == key


def test_the_one_feed_of_the_report_is_denied_with_the_runtime_advice(gate: Gate) -> None:
    result = gate.run(collectors(feed("audit", maxSeenKeys=500_000)))  # over 8 chunk slots
    (refusal,) = result.of_check(CHECK_RUNTIME)
    assert refusal.obj == "checkpoint.collectors[0].maxSeenKeys"
    assert "shard 'objectstore/audit' is projected at" in refusal.message
    assert "lower it to at most" in refusal.message
    assert result.denied


@pytest.mark.parametrize(
    ("config_key", "values_key_"),
    [
        ("collectors[2].maxSeenKeys", "checkpoint.collectors[2].maxSeenKeys"),
        ("collectors[0]", "checkpoint.collectors[0]"),
        ("store.path", "checkpoint.store.path"),
        ("store.backend", "checkpoint.store.backend"),
        ("store.deadlineSeconds", "checkpoint.store.deadlineSeconds"),
        ("leaderElection.renewDeadlineSeconds", "checkpoint.leaderElection.renewDeadlineSeconds"),
        ("http.port", "service.port"),
        ("sink.path", "sink.path"),
        ("", ""),
    ],
)
def test_config_keys_map_to_the_values_keys_the_chart_renders_them_from(
    config_key: str, values_key_: str
) -> None:
    assert values_key(config_key) == values_key_


def test_an_annotation_value_the_yaml_1_1_reader_misreads_passes_the_gate(gate: Gate) -> None:
    """A bare `=` is YAML 1.1's `value` tag to PyYAML but the string "=" to Kubernetes: the gate
    reads the render as the API server does (found by the property test)."""
    result = gate.run({"serviceAccount": {"create": True, "name": "", "annotations": {"a": "="}}})
    assert not result.denied, result.findings
    (account,) = [m for m in result.manifests if m.kind == "ServiceAccount"]
    assert account.document["metadata"]["annotations"] == {"a": "="}
