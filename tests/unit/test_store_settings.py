"""The store settings of the runtime config: maxChunks, the write budget and the etcd quota,
with their defaults and ranges (the schema names the key of a bad value)."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_runtime.constants import (
    DEFAULT_ETCD_QUOTA_BYTES,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
    MAX_CHUNKS_LIMIT,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.runtime.settings import parse


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
