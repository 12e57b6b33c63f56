"""Corrupt and foreign shards, gzip bombs (SPEC §4, §5, §12; issue 4 acceptance 7), and the
metrics a stored shard produces (§9; acceptance 5). Open fails closed and writes nothing."""

from __future__ import annotations

import functools
import json
import zlib

import pytest
from store_harness import Harness, RawObject, open_store, raw_shard

from checkpoint_runtime.constants import (
    ANNOTATION_LEASE,
    ANNOTATION_SHARD_KEY,
    CONFIGMAP_VALUE_LIMIT,
)
from checkpoint_runtime.errors import CorruptShardError, ForeignShardError
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.naming import shard_labels, shard_name

FEED = "tn/objectstore/feed-a"
ROWS = {f"{FEED}/cursor": "c", f"{FEED}/seen/aWQx": "2026-03-01T00:00:00.000000001Z"}


def stored_feed(harness: Harness) -> RawObject:
    open_store(harness).batch(ROWS)
    stored = raw_shard(harness, FEED)
    assert stored is not None
    return stored


def snapshot(harness: Harness) -> dict[str, RawObject | None]:
    return {name: harness.raw(name) for name in harness.object_names()}


@functools.cache
def gzip_bomb() -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    return b"".join(compressor.compress(zeros) for _ in range(130)) + compressor.flush()


def assert_open_fails_without_writing(harness: Harness, error: type[Exception], match: str) -> None:
    before = snapshot(harness)
    with pytest.raises(error, match=match):
        open_store(harness)
    assert snapshot(harness) == before


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        (b"\x1f\x8b garbage", "bad gzip"),
        (codec.encode_shard(FEED, ROWS).blob[:-10], "truncated"),
        (codec.gzip_fixed(json.dumps({"format": "gzip-shards-v9"}).encode()), "unknown format"),
        (codec.encode_shard("tn/objectstore/other", {}).blob, "names shard"),
    ],
    ids=["bad-gzip", "truncated", "unknown-version", "envelope-key-mismatch"],
)
def test_corrupt_shard_fails_open_with_a_named_error(
    harness: Harness, blob: bytes, match: str
) -> None:
    stored = stored_feed(harness)
    harness.put_raw(
        shard_name(harness.lease_name, FEED), RawObject(stored.labels, stored.annotations, blob)
    )
    assert_open_fails_without_writing(harness, CorruptShardError, match)


def test_gzip_bomb_in_a_stored_shard_is_rejected(harness: Harness) -> None:
    stored = stored_feed(harness)
    bomb = gzip_bomb()
    assert len(bomb) < CONFIGMAP_VALUE_LIMIT  # the API server admits it; we must not inflate it
    harness.put_raw(
        shard_name(harness.lease_name, FEED), RawObject(stored.labels, stored.annotations, bomb)
    )
    assert_open_fails_without_writing(harness, CorruptShardError, "exceeds")


def test_row_of_another_shard_inside_an_envelope_is_rejected(harness: Harness) -> None:
    stored = stored_feed(harness)
    document = json.loads(codec.encode_envelope(FEED, ROWS))
    document["groups"][0]["kind"] = "replay"  # a flowlogs row kind inside an objectstore shard
    blob = codec.gzip_fixed(json.dumps(document).encode())
    harness.put_raw(
        shard_name(harness.lease_name, FEED), RawObject(stored.labels, stored.annotations, blob)
    )
    assert_open_fails_without_writing(harness, CorruptShardError, "not a row kind")


def test_labelled_object_whose_name_is_not_its_shard_hash_is_foreign(harness: Harness) -> None:
    stored = stored_feed(harness)
    harness.put_raw("planted-by-someone", RawObject(stored.labels, stored.annotations, stored.blob))
    assert_open_fails_without_writing(harness, ForeignShardError, "misplaced or a hash collision")


def test_labelled_object_without_shard_key_annotation_is_foreign(harness: Harness) -> None:
    stored = stored_feed(harness)
    annotations = {k: v for k, v in stored.annotations.items() if k != ANNOTATION_SHARD_KEY}
    harness.put_raw(
        shard_name(harness.lease_name, FEED), RawObject(stored.labels, annotations, stored.blob)
    )
    assert_open_fails_without_writing(harness, ForeignShardError, "no .*shard-key annotation")


def test_another_stores_shards_in_the_same_place_are_left_alone(harness: Harness) -> None:
    stored = stored_feed(harness)
    other = "another-lease"
    harness.put_raw(
        shard_name(other, FEED),
        # its own labels and its own Lease annotation: another store's object, not a mislabeled
        # one of ours (that one is refused by name)
        RawObject(
            shard_labels(other),
            {**stored.annotations, ANNOTATION_LEASE: other},
            b"not ours to decode",
        ),
    )
    assert dict(open_store(harness).items()) == ROWS


def test_metrics_show_shard_count_sizes_ratio_and_headroom(harness: Harness) -> None:
    store = open_store(harness)
    store.batch({**ROWS, "tn/flowlogs/cursor": "x"})
    stored = raw_shard(harness, FEED)
    assert stored is not None
    for probe in (store, open_store(harness)):  # after a write and after a fresh open
        sample = probe.metrics.registry.get_sample_value
        labels = {"shard": FEED}
        assert sample("checkpoint_shards") == 2
        assert sample("checkpoint_shard_compressed_bytes", labels) == len(stored.blob)
        assert sample("checkpoint_shard_rows", labels) == len(ROWS)
        raw = sample("checkpoint_shard_raw_bytes", labels)
        assert raw
        assert raw > 0
        assert sample("checkpoint_shard_compression_ratio", labels) == pytest.approx(
            raw / len(stored.blob)
        )
        assert sample("checkpoint_shard_headroom_bytes", labels) == CONFIGMAP_VALUE_LIMIT - len(
            stored.blob
        )
        assert sample("checkpoint_shard_headroom_ratio", labels) == pytest.approx(
            1 - len(stored.blob) / CONFIGMAP_VALUE_LIMIT
        )
