"""Leadership buckets through the render gate: one bucket renders every object byte for byte as
without the value; several render the bucket and membership Leases into the Role and the
admission policies and pass every policy; the gate refuses what the runtime would (the file
store, a legacy migration, a name-pinned Role too large), naming the key and the numbers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from render_helpers import MATRIX, matrix_params

from checkpoint_gate.pipeline import Gate
from checkpoint_runtime.election.buckets import lease_names
from checkpoint_runtime.runtime import rolesize


def with_buckets(values: dict[str, Any], buckets: int) -> dict[str, Any]:
    checkpoint = dict(values.get("checkpoint") or {})
    checkpoint["store"] = {**(checkpoint.get("store") or {}), "buckets": buckets}
    return {**values, "checkpoint": checkpoint}


def rendered(gate: Gate, values: dict[str, Any]) -> list[Any]:
    return [m.document for m in gate.run(values, release="cr", namespace="apps").manifests]


@pytest.mark.parametrize("values", matrix_params())
def test_one_bucket_renders_exactly_what_no_value_renders(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert yaml.safe_dump_all(rendered(gate, with_buckets(values, 1))) == yaml.safe_dump_all(
        rendered(gate, values)
    )


NAMED = dict(MATRIX)


@pytest.mark.parametrize(
    "name", ["defaults", "names-scope-values.yaml", "admission-policy-values.yaml"]
)
def test_several_buckets_pin_their_leases_and_pass(gate: Gate, name: str) -> None:
    values = with_buckets(NAMED[name], 3)
    values["checkpoint"]["store"].pop("legacyConfigMap", None)  # migrated with one bucket
    result = gate.run(values, release="cr", namespace="apps")
    assert not result.denied, [f for f in result.findings if f.level.value == "deny"]
    (role,) = [m.document for m in result.manifests if m.document.get("kind") == "Role"]
    pinned = [
        name
        for rule in role["rules"]
        if "leases" in rule["resources"]
        for name in rule.get("resourceNames", [])
    ]
    assert pinned == lease_names("cr-checkpoint-runtime", 3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"checkpoint": {"store": {"backend": "file", "buckets": 2}}},
            "more than 1 bucket (checkpoint.store.buckets) needs the kubernetes store",
        ),
        (
            {"checkpoint": {"store": {"buckets": 2, "legacyConfigMap": "old-checkpoints"}}},
            "the legacy migration runs with one bucket",
        ),
    ],
    ids=["file-store", "legacy"],
)
def test_the_gate_refuses_buckets_the_runtime_cannot_lead(
    gate: Gate, values: dict[str, Any], message: str
) -> None:
    result = gate.run(values, release="cr", namespace="apps")
    assert result.denied
    assert any(message in f.message for f in result.findings), result.findings


def test_a_name_pinned_role_too_large_is_refused_with_the_numbers(
    gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate runs the runtime's startup check, Role size included (the limit lowered here:
    a Role of a million bytes takes the policies a minute to read; tests/unit has the real
    one)."""
    collectors = [
        {"kind": "flowlogs", "tailnet": f"t{i}", "url": "http://flows.example"} for i in range(2)
    ]
    values = {"rbac": {"scope": "names"}, "checkpoint": {"store": {"buckets": 4}}}
    values["checkpoint"]["collectors"] = collectors
    assert not gate.run(values, release="cr", namespace="apps").denied
    monkeypatch.setattr(rolesize, "ROLE_MAX_BYTES", 5000)
    result = gate.run(values, release="cr", namespace="apps")
    denies = [f for f in result.findings if f.level.value == "deny"]
    assert any(
        "34 ConfigMap names" in f.message and "9 Lease names (4 bucket(s)" in f.message
        for f in denies
    ), denies
