"""Valid but surprising values pass the gate with a warning that names the key and the fix.

Each case runs the whole gate (schema, render, policies) on a values document that Helm accepts,
and checks the warning appears; the neighbouring sensible values give no such warning.
"""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_gate.engine import Level
from checkpoint_gate.pipeline import Gate

CLAIM = {"existingClaim": "checkpoint-data"}
FLOWLOGS = {"kind": "flowlogs", "url": "http://flows.example:8080/v1/flows"}


def warnings_of(gate: Gate, values: dict[str, Any], rule: str) -> list[tuple[str, str]]:
    result = gate.run(values)
    assert not result.denied, result.findings
    return [(f.obj, f.message) for f in result.findings if f.level is Level.WARN and f.rule == rule]


def test_file_store_with_replicas_warns_that_one_runs(gate: Gate) -> None:
    values = {"checkpoint": {"store": "file", "file": CLAIM}, "replicaCount": 3}
    ((key, message),) = warnings_of(gate, values, "VALUES-1")
    assert key == "replicaCount"
    assert "replicaCount is 3" in message
    assert "exactly one replica" in message


@pytest.mark.parametrize(
    "values",
    [
        {"checkpoint": {"store": "file", "file": CLAIM}, "replicaCount": 1},
        {"checkpoint": {"store": "kubernetes"}, "replicaCount": 3},
    ],
    ids=["file-one-replica", "kubernetes-three-replicas"],
)
def test_replicas_the_chart_honours_do_not_warn(gate: Gate, values: dict[str, Any]) -> None:
    assert warnings_of(gate, values, "VALUES-1") == []


def test_no_rbac_with_a_generated_service_account_warns(gate: Gate) -> None:
    ((key, message),) = warnings_of(gate, {"rbac": {"create": False}}, "VALUES-2")
    assert key == "rbac.create"
    assert "serviceAccount.name" in message


@pytest.mark.parametrize(
    "values",
    [
        {"rbac": {"create": False}, "serviceAccount": {"name": "checkpoint-runner"}},
        {"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "runner"}},
        {"rbac": {"create": False}, "checkpoint": {"store": "file", "file": CLAIM}},
        {},
    ],
    ids=["named-account", "external-account", "file-store-needs-no-rbac", "defaults"],
)
def test_no_rbac_warning_when_an_account_is_named_or_not_needed(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "VALUES-2") == []


def test_names_scope_without_collectors_warns(gate: Gate) -> None:
    ((key, message),) = warnings_of(gate, {"rbac": {"scope": "names"}}, "VALUES-3")
    assert key == "rbac.scope"
    assert "checkpoint.collectors is empty" in message
    assert "rbac.scope=namespace" in message


@pytest.mark.parametrize(
    "values",
    [
        {"rbac": {"scope": "names"}, "checkpoint": {"collectors": [FLOWLOGS]}},
        {"rbac": {"scope": "namespace"}},
        {"rbac": {"scope": "names"}, "checkpoint": {"store": "file", "file": CLAIM}},
    ],
    ids=["names-with-a-collector", "namespace-scope", "file-store-has-no-role"],
)
def test_no_names_scope_warning_with_collectors_or_without_names(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "VALUES-3") == []


def test_file_store_on_an_empty_dir_warns_from_the_render(gate: Gate) -> None:
    ((obj, message),) = warnings_of(gate, {"checkpoint": {"store": "file"}}, "STORE-1")
    assert obj.startswith("Deployment ")
    assert "emptyDir" in message
    assert "checkpoint.file.existingClaim" in message
    assert warnings_of(gate, {"checkpoint": {"store": "file", "file": CLAIM}}, "STORE-1") == []
