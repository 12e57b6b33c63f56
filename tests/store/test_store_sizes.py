"""Sizes on both backends (SPEC §6, §11; issue 4 acceptance 3): the measured configurations fit
well under the limit, and a shard that does not fit fails visibly without losing anything."""

from __future__ import annotations

import pytest
from store_harness import (
    OVERSIZE_ROWS,
    Harness,
    KubeHarness,
    open_store,
    raw_shard,
    refused_oversize,
)

from checkpoint_runtime.backends.base import ShardWrite
from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.errors import OversizeError
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.reference_rows import CONFIGURATIONS, Configuration, FeedWorkload
from checkpoint_runtime.retry import Deadline

OVERSIZE_SHARD = "tn/objectstore/huge"


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=lambda c: c.name)
def test_section_11_configurations_persist_well_under_the_limit(
    harness: Harness, configuration: Configuration
) -> None:
    rows = configuration.rows(seen_rows=5000)
    store = open_store(harness)
    store.batch(rows)

    shards = configuration.feed_shards() + configuration.flowlogs_shards()
    assert len(harness.object_names()) == len(shards)
    for shard in shards:
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert len(stored.blob) < CONFIGMAP_VALUE_LIMIT // 10, shard  # >90 % headroom
    assert dict(open_store(harness).items()) == rows


@pytest.fixture(scope="module")
def oversize_rows() -> dict[str, str]:
    """Rows whose shard the production encoder really cannot fit (asserted, not assumed)."""
    rows = FeedWorkload(OVERSIZE_SHARD, OVERSIZE_ROWS, "uuid").rows
    assert len(codec_v3.encode_inline(OVERSIZE_SHARD, rows)[0]) > CONFIGMAP_VALUE_LIMIT
    return rows


def test_oversize_shard_fails_visibly_keeps_every_key_and_the_stored_shard(
    harness: Harness, oversize_rows: dict[str, str]
) -> None:
    """With one chunk slot allowed (maxChunks 1) the state cannot fit (chunked shards past
    maxChunks: test_store_chunks.py)."""
    store = open_store(harness, max_chunks=1)
    store.batch({f"{OVERSIZE_SHARD}/cursor": "before"})
    before = raw_shard(harness, OVERSIZE_SHARD)

    error = refused_oversize(store, oversize_rows)
    assert (error.shard, error.limit, error.rows) == (
        OVERSIZE_SHARD,
        CONFIGMAP_VALUE_LIMIT,
        len(oversize_rows),
    )
    assert error.size > CONFIGMAP_VALUE_LIMIT
    assert OVERSIZE_SHARD in str(error)
    assert str(CONFIGMAP_VALUE_LIMIT) in str(error)
    assert raw_shard(harness, OVERSIZE_SHARD) == before
    assert dict(store.items(OVERSIZE_SHARD + "/")) == oversize_rows
    assert store.dirty_shards() == [OVERSIZE_SHARD]
    rejections = store.metrics.registry.get_sample_value(
        "checkpoint_oversize_rejections_total", {"shard": OVERSIZE_SHARD}
    )
    assert rejections == 1


def test_api_server_422_for_a_too_large_shard_surfaces_as_oversize(kube: KubeHarness) -> None:
    """Even if the encoder's check were bypassed, the server's answer is the same named error."""
    blob = bytes(range(256)) * ((CONFIGMAP_VALUE_LIMIT // 256) + 10)
    write = ShardWrite(OVERSIZE_SHARD, blob, {"checkpoint-runtime.io/rows": "3"})
    with pytest.raises(OversizeError) as raised:
        kube.backend().create_shard(write, Deadline(30))
    assert raised.value.rows == 3
    assert raw_shard(kube, OVERSIZE_SHARD) is None


@pytest.mark.parametrize(
    ("blob", "annotations", "measured", "size", "limit", "server_words"),
    [
        pytest.param(
            b"x" * 145,
            {"example.com/note": "y" * 300_000},
            "the annotations",
            len("example.com/note") + 300_000 + len("checkpoint-runtime.io/rows") + 1,
            262_144,
            "metadata.annotations: Too long",
            id="422-annotations",
        ),
        pytest.param(
            bytes(range(256)) * 4200,
            {},
            "the shard value",
            256 * 4200,
            CONFIGMAP_VALUE_LIMIT,
            "[]: Too long",
            id="422-value",
        ),
        pytest.param(
            b"z" * 2_500_000, {}, "the request body", None, 3 * 1024 * 1024, "413", id="413-body"
        ),
    ],
)
def test_a_server_size_refusal_reports_the_servers_message_and_the_size_it_measured(
    kube: KubeHarness,
    blob: bytes,
    annotations: dict[str, str],
    measured: str,
    size: int | None,
    limit: int,
    server_words: str,
) -> None:
    """The store's own check passed (or was bypassed) and the server refused: the error says
    what the server said and measured, not the shard's local encoded size."""
    write = ShardWrite(OVERSIZE_SHARD, blob, {"checkpoint-runtime.io/rows": "3", **annotations})
    with pytest.raises(OversizeError) as raised:
        kube.backend().create_shard(write, Deadline(30))
    error = raised.value
    assert error.server_answer is not None
    assert server_words in error.server_answer
    assert (error.measured, error.limit, error.rows) == (measured, limit, 3)
    if size is not None:
        assert error.size == size
    else:  # the request body: the base64 value alone is 4/3 of the blob
        assert error.size > len(blob) * 4 // 3
    assert f"{measured}: {error.size} bytes, limit {limit} bytes" in str(error)
    assert "encodes to" not in str(error)
    assert raw_shard(kube, OVERSIZE_SHARD) is None
