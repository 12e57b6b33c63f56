"""The store settings of the runtime config: maxChunks, the write budget and the etcd quota,
with their defaults and ranges (the schema names the key of a bad value)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checkpoint_runtime.constants import (
    DEFAULT_ETCD_QUOTA_BYTES,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
    LEASE_DURATION_MAX_SECONDS,
    MAX_CHUNKS_LIMIT,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.runtime.settings import CONFIG_DEFAULTS, parse, schema_path


def document(**store: Any) -> dict[str, Any]:
    return {"store": {"backend": "kubernetes", "namespace": "ns", **store}, "collectors": []}


def test_defaults() -> None:
    store = parse(document()).store
    assert store.max_chunks == DEFAULT_MAX_CHUNKS == 8
    assert store.write_budget_bytes_per_second == DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND == 262_144
    assert store.etcd_quota_bytes == DEFAULT_ETCD_QUOTA_BYTES == 2**31


def test_given_values_are_kept() -> None:
    store = parse(
        document(maxChunks=32, writeBudgetBytesPerSecond=65_536, etcdQuotaBytes=2**33)
    ).store
    assert (store.max_chunks, store.write_budget_bytes_per_second) == (32, 65_536)
    assert store.etcd_quota_bytes == 2**33


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxChunks", 0),
        ("maxChunks", MAX_CHUNKS_LIMIT + 1),
        ("maxChunks", 2.5),
        ("writeBudgetBytesPerSecond", 0),
        ("etcdQuotaBytes", 1024),
        ("etcdQuotaBytes", "2Gi"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(document(**{key: value}))
    assert raised.value.path == f"store.{key}"


def test_the_schema_documents_exactly_the_defaults_the_settings_apply() -> None:
    """Each default is written once (constants.py, by config key in CONFIG_DEFAULTS); the
    schema's `default` keywords, which the chart's values schema and values.yaml inherit, say
    the same, and a config that leaves a key out gets exactly that value."""
    schema = json.loads(schema_path().read_text())
    for section, defaults in CONFIG_DEFAULTS.items():
        properties = schema["properties"][section]["properties"]
        documented = {key: node["default"] for key, node in properties.items() if "default" in node}
        assert documented == defaults, section
    settings = parse({"store": {"backend": "kubernetes"}})
    store = settings.store
    assert (store.deadline_seconds, store.debounce_seconds) == (
        CONFIG_DEFAULTS["store"]["deadlineSeconds"],
        CONFIG_DEFAULTS["store"]["debounceSeconds"],
    )
    assert (store.lease_name, store.discovery) == ("checkpoint-runtime", "labels")
    assert (
        settings.timings.lease_duration == CONFIG_DEFAULTS["leaderElection"]["leaseDurationSeconds"]
    )
    assert (settings.http_port, settings.http_bind) == (8080, "0.0.0.0")


def test_the_longest_lease_a_replica_holds_is_the_values_schemas_maximum() -> None:
    """A Lease held for longer than the chart renders is named foreign (election/foreign.py):
    the bound is the values schema's own maximum, not a copy that could drift from it."""
    values = json.loads((schema_path().parent / "values.schema.json").read_text())
    election = values["properties"]["checkpoint"]["properties"]["leaderElection"]
    assert election["properties"]["leaseDurationSeconds"]["maximum"] == LEASE_DURATION_MAX_SECONDS
