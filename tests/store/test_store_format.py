"""The store writes `gzip-shards-v3` and reads v1 and v2 (SPEC §4, §4a), on both backends.

v1 shards come from fixtures written by the v1 release's encoder (tests/store/fixtures): they
open unchanged and become v3 at their next persist, never during open. A persist of a small
shard sends the head: the manifest, the inline base and one delta of the rows changed since;
past the compaction bound it writes a new base. (Chunked shards: test_store_chunks.py.)
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from store_harness import Harness, RawObject, open_store, raw_shard

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_FORMAT,
    ANNOTATION_LEASE,
    ANNOTATION_RAW_BYTES,
    ANNOTATION_ROWS,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
    HEAD_DELTA_MAX_BYTES,
    MAX_DECODED_ENVELOPE,
    SHARD_FORMAT,
    SHARD_FORMAT_V1,
)
from checkpoint_runtime.errors import CorruptShardError
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.codec import gunzip_members
from checkpoint_runtime.format.naming import shard_labels, shard_name
from checkpoint_runtime.format.reference_rows import FeedWorkload

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "v1-shards.json").read_text())
FEED = "tn/objectstore/feed-a"


def members(blob: bytes) -> list[dict[str, Any]]:
    """Each member's JSON document (a base member's: its first line, before the row block)."""
    found = gunzip_members(blob, MAX_DECODED_ENVELOPE, "test")
    return [json.loads(m.data.partition(b"\n")[0]) for m in found]


def put_v1_shards(harness: Harness) -> dict[str, dict[str, str]]:
    """The v1 release's shards, as it left them (blob and annotations)."""
    expected = {}
    for shard, fixture in FIXTURES["shards"].items():
        blob = base64.b64decode(fixture["blob"])
        annotations = {
            ANNOTATION_SHARD_KEY: shard,
            ANNOTATION_FORMAT: SHARD_FORMAT_V1,
            ANNOTATION_LEASE: harness.lease_name,
            ANNOTATION_RAW_BYTES: str(fixture["raw_bytes"]),
            ANNOTATION_ROWS: str(len(fixture["rows"])),
            ANNOTATION_WRITER: "v1-leader",
            ANNOTATION_EPOCH: "1",
        }
        labels = shard_labels(harness.lease_name)
        harness.put_raw(shard_name(harness.lease_name, shard), RawObject(labels, annotations, blob))
        expected[shard] = fixture["rows"]
    return expected


def test_the_v1_fixtures_are_what_the_kept_v1_writer_writes() -> None:
    for shard, fixture in FIXTURES["shards"].items():
        assert codec.encode_v1_blob(shard, fixture["rows"]) == base64.b64decode(fixture["blob"])


def test_v1_shards_reopen_unchanged_and_become_v3_at_their_next_persist(harness: Harness) -> None:
    expected = put_v1_shards(harness)
    before = {shard: raw_shard(harness, shard) for shard in expected}

    store = open_store(harness, epoch=1)
    assert {shard: dict(store.items(shard + "/")) for shard in expected} == expected
    assert {shard: raw_shard(harness, shard) for shard in expected} == before  # open wrote nothing

    store.set(f"{FEED}/cursor", "after the upgrade")
    store.flush()

    rewritten = raw_shard(harness, FEED)
    assert rewritten is not None
    assert rewritten.annotations[ANNOTATION_FORMAT] == SHARD_FORMAT
    assert [m["member"] for m in members(rewritten.blob)] == ["head", "base"]  # rewritten whole
    untouched = [shard for shard in expected if shard != FEED]
    assert {shard: raw_shard(harness, shard) for shard in untouched} == {
        shard: before[shard] for shard in untouched
    }
    reopened = open_store(harness, epoch=1)
    assert dict(reopened.items(FEED + "/")) == {
        **expected[FEED],
        f"{FEED}/cursor": "after the upgrade",
    }
    for shard in untouched:
        assert dict(reopened.items(shard + "/")) == expected[shard]


def test_take_ownership_rewrites_every_v1_shard_as_v3(harness: Harness) -> None:
    expected = put_v1_shards(harness)
    store = open_store(harness, writer="leader-2", epoch=2)
    store.take_ownership()
    reopened = open_store(harness)
    for shard, rows in expected.items():
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert stored.annotations[ANNOTATION_FORMAT] == SHARD_FORMAT
        assert dict(reopened.items(shard + "/")) == rows


def _base_member(blob: bytes) -> bytes:
    """The inline base member of a v3 head blob (the second gzip member)."""
    head, base = gunzip_members(blob, MAX_DECODED_ENVELOPE, "test")[:2]
    return blob[head.end : base.end]


def test_a_persist_sends_the_base_and_a_delta_of_the_changes_then_compacts(
    harness: Harness,
) -> None:
    rows = FeedWorkload(FEED, 400, "uuid").rows
    seen = sorted(key for key in rows if "/seen/" in key)
    store = open_store(harness, compaction_ratio=0.3)
    store.batch(rows)
    first = raw_shard(harness, FEED)
    assert first is not None
    assert [m["member"] for m in members(first.blob)] == ["head", "base"]
    base_member = _base_member(first.blob)

    store.batch({f"{FEED}/cursor": "moved", seen[0]: None})
    second = raw_shard(harness, FEED)
    assert second is not None
    assert _base_member(second.blob) == base_member
    _, base, delta = members(second.blob)
    assert base["member"] == "base"
    assert (delta["set"], delta["delete"]) == ({"cursor": "moved"}, [seen[0][len(FEED) + 1 :]])

    # Reopened, the store writes its next delta against the same stored base.
    store = open_store(harness, compaction_ratio=0.3)
    store.batch({seen[1]: "changed"})
    third = raw_shard(harness, FEED)
    assert third is not None
    assert _base_member(third.blob) == base_member
    delta = members(third.blob)[2]
    assert set(delta["set"]) == {"cursor", seen[1][len(FEED) + 1 :]}
    assert delta["delete"] == [seen[0][len(FEED) + 1 :]]

    model = {**rows, f"{FEED}/cursor": "moved", seen[1]: "changed"}
    del model[seen[0]]
    writes = 0
    while True:  # the delta grows until it passes 0.3 of the base: then a new base
        writes += 1
        change = {seen[1 + writes * 10 + i]: f"round {writes}" for i in range(10)}
        store.batch(change)
        model.update(change)
        stored = raw_shard(harness, FEED)
        assert stored is not None
        assert dict(open_store(harness).items(FEED + "/")) == model
        if _base_member(stored.blob) != base_member:
            break
        assert len(members(stored.blob)) == 3
    assert [m["member"] for m in members(stored.blob)] == ["head", "base"]
    assert writes > 1
    assert dict(open_store(harness).items(FEED + "/")) == model


def test_a_shard_whose_format_annotation_disagrees_with_its_blob_is_refused(
    harness: Harness,
) -> None:
    put_v1_shards(harness)
    stored = raw_shard(harness, FEED)
    assert stored is not None
    stored.annotations[ANNOTATION_FORMAT] = SHARD_FORMAT
    harness.put_raw(shard_name(harness.lease_name, FEED), stored)
    with pytest.raises(CorruptShardError, match="format annotation"):
        open_store(harness)


def test_a_large_change_is_compacted_into_the_base_not_carried_in_the_head(
    harness: Harness,
) -> None:
    """A delta past its bound is never sent in the head, whatever compaction_ratio says: the
    store compacts it into a new base (here chunks), and every row is kept."""
    rows = {f"{FEED}/seen/{i:06d}": hashlib.sha256(b"%d" % i).hexdigest() for i in range(17_000)}
    store = open_store(harness, compaction_ratio=10.0)
    store.batch(rows)
    changes = {key: value[::-1] for key, value in list(rows.items())[:15_000]}

    store.batch(changes)

    stored = raw_shard(harness, FEED)
    assert stored is not None
    assert len(stored.blob) <= HEAD_DELTA_MAX_BYTES
    assert [m["member"] for m in members(stored.blob)] == ["head"]
    assert members(stored.blob)[0]["partitions"] > 1
    assert dict(open_store(harness).items(FEED + "/")) == {**rows, **changes}
