"""What installed stores already hold, pinned as literals: the current code must keep reading it.

fixtures/released-store.json was written once by the released store and is never regenerated:
shard ConfigMap names for two Lease names (the chart's default, and a long one with characters
a name cannot hold), store labels and the label selector, and whole objects (name, labels,
annotations, blob) for v2 shards (one of them a base and a delta) and a v1 shard.

fixtures/v3-json-store.json holds gzip-shards-v3 objects as first written, before the row-block
base (their heads name no `encoding`; inline base and chunks in the JSON column layout): an
inline head with a delta, and a head with five chunk slots and a delta. They open as written and
are rewritten whole, in the current encoding, at their next persist.

A change to how names or labels are derived (the hash, its length, the readable prefix) keeps
every other test green, since they all derive both sides with the same code; it would orphan
every existing installation's shards. These tests fail instead.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from store_harness import Harness, open_store, raw_shard

from checkpoint_runtime.constants import (
    ANNOTATION_FORMAT,
    ANNOTATION_SLOT,
    BASE_ENCODING,
    MAX_DECODED_ENVELOPE,
    SHARD_FORMAT,
    SHARD_FORMAT_V1,
    SHARD_FORMAT_V2,
)
from checkpoint_runtime.format import codec, codec_v3
from checkpoint_runtime.format.codec import gunzip_members
from checkpoint_runtime.format.naming import (
    chunk_slot_name,
    label_selector,
    shard_labels,
    shard_name,
    store_label,
)
from checkpoint_runtime.store import planner
from checkpoint_testenv.support.kubetarget import RawObject

RELEASED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "released-store.json").read_text()
)
OBJECTS: dict[str, dict[str, Any]] = RELEASED["objects"]
V3_FIRST: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "v3-json-store.json").read_text()
)
V3_HEADS = {
    name: obj
    for name, obj in V3_FIRST["objects"].items()
    if ANNOTATION_SLOT not in obj["annotations"]
}
NAMES = [
    pytest.param(lease, shard, name, id=f"{lease[:24]}:{shard[:40]}")
    for lease, names in RELEASED["names"].items()
    for shard, name in names.items()
]


@pytest.mark.parametrize(("lease", "shard", "name"), NAMES)
def test_shard_names_are_the_released_ones(lease: str, shard: str, name: str) -> None:
    assert shard_name(lease, shard) == name


@pytest.mark.parametrize("lease", sorted(RELEASED["labels"]))
def test_store_labels_and_selector_are_the_released_ones(lease: str) -> None:
    assert store_label(lease) == RELEASED["store_labels"][lease]
    assert shard_labels(lease) == RELEASED["labels"][lease]
    assert label_selector(lease) == RELEASED["label_selectors"][lease]


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_released_objects_are_named_labelled_and_decoded_as_released(name: str) -> None:
    obj = OBJECTS[name]
    assert shard_name(obj["lease"], obj["shard"]) == name
    assert shard_labels(obj["lease"]) == obj["labels"]
    decoded = codec.decode_stored(obj["shard"], base64.b64decode(obj["blob"]))
    assert decoded.format == obj["annotations"][ANNOTATION_FORMAT]
    assert decoded.rows == obj["rows"]


def test_the_fixture_covers_v1_a_v2_base_and_a_v2_delta() -> None:
    formats = {obj["annotations"][ANNOTATION_FORMAT] for obj in OBJECTS.values()}
    assert formats == {SHARD_FORMAT_V2, SHARD_FORMAT_V1}
    members = [
        len(gunzip_members(base64.b64decode(obj["blob"]), 1 << 20, obj["shard"]))
        for obj in OBJECTS.values()
        if obj["annotations"][ANNOTATION_FORMAT] == SHARD_FORMAT_V2
    ]
    assert sorted(set(members)) == [1, 2]  # a base alone, and a base with its delta


def test_a_store_opens_the_released_objects_and_writes_on(harness: Harness) -> None:
    """Planted exactly as released (name, labels, annotations, blob), found by discovery
    (the label selector), read, and written over by the current code."""
    leases = {obj["lease"] for obj in OBJECTS.values()}
    assert leases == {harness.lease_name}
    for name, obj in OBJECTS.items():
        blob = base64.b64decode(obj["blob"])
        harness.put_raw(name, RawObject(dict(obj["labels"]), dict(obj["annotations"]), blob))
    expected = {key: value for obj in OBJECTS.values() for key, value in obj["rows"].items()}

    store = open_store(harness, writer="upgraded", epoch=8)
    assert dict(store.items()) == expected
    for shard in (obj["shard"] for obj in OBJECTS.values()):
        store.set(f"{shard}/cursor", "after the upgrade")
    store.flush()

    assert sorted(harness.object_names()) == sorted(OBJECTS)  # written in place, no new object
    reread = open_store(harness, writer="observer", epoch=0)
    for obj in OBJECTS.values():
        shard = obj["shard"]
        assert dict(reread.items(shard + "/")) == {
            **obj["rows"],
            f"{shard}/cursor": "after the upgrade",
        }
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert stored.labels == obj["labels"]


def _first_lines(blob: bytes, shard: str) -> list[dict[str, Any]]:
    members = gunzip_members(blob, MAX_DECODED_ENVELOPE, shard)
    return [json.loads(member.data.partition(b"\n")[0]) for member in members]


def _v3_first_chunks(shard: str) -> list[bytes]:
    """The fixture's chunk blobs of `shard`, by index."""
    chunks = {
        int(obj["annotations"][ANNOTATION_SLOT][1:]): base64.b64decode(obj["blob"])
        for obj in V3_FIRST["objects"].values()
        if ANNOTATION_SLOT in obj["annotations"]
        and obj["annotations"]["checkpoint-runtime.io/shard-key"] == shard
    }
    return [chunks[index] for index in sorted(chunks)]


@pytest.mark.parametrize("name", sorted(V3_HEADS))
def test_v3_as_first_written_decodes_as_written(name: str) -> None:
    obj = V3_HEADS[name]
    shard = obj["annotations"]["checkpoint-runtime.io/shard-key"]
    blob = base64.b64decode(obj["blob"])
    head = codec_v3.decode_head(shard, blob)
    assert head.encoding == codec_v3.JSON_COLUMNS
    assert "encoding" not in _first_lines(blob, shard)[0]
    chunks = []
    budget = head.budget
    for index, chunk_blob in enumerate(_v3_first_chunks(shard)):
        chunk = codec_v3.decode_chunk(
            shard, chunk_blob, index, head.manifest.partitions, budget, encoding=head.encoding
        )
        budget -= chunk.raw_bytes
        chunks.append(chunk.rows)
    assert len(chunks) == head.manifest.partitions
    if head.manifest.partitions:
        assert head.delta is not None  # a head-only persist's delta over its chunks
    rows = codec_v3.assemble(shard, head, chunks).rows
    assert rows == {k: v for k, v in V3_FIRST["rows"].items() if k.startswith(shard + "/")}


def test_the_v3_fixture_covers_an_inline_and_a_chunked_head() -> None:
    partitions = sorted(
        codec_v3.decode_head(
            obj["annotations"]["checkpoint-runtime.io/shard-key"], base64.b64decode(obj["blob"])
        ).manifest.partitions
        for obj in V3_HEADS.values()
    )
    assert partitions == [0, 5]


def test_a_store_opens_v3_as_first_written_and_rewrites_it_whole_at_its_next_persist(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the thresholds the fixture was written under (its feed stays in five chunks), a
    1-row change rewrites every chunk: a head names one encoding for all of them."""
    monkeypatch.setattr(planner, "INLINE_BASE_MAX_BYTES", 1500)
    monkeypatch.setattr(planner, "CHUNK_TARGET_BYTES", 2500)
    assert V3_FIRST["lease"] == harness.lease_name
    for name, obj in V3_FIRST["objects"].items():
        planted = RawObject(
            dict(obj["labels"]), dict(obj["annotations"]), base64.b64decode(obj["blob"])
        )
        harness.put_raw(name, planted)
    planted_names = sorted(harness.object_names())
    before = {name: harness.raw(name) for name in planted_names}

    store = open_store(harness, writer="upgraded", epoch=8)
    assert dict(store.items()) == V3_FIRST["rows"]
    assert {name: harness.raw(name) for name in planted_names} == before  # open wrote nothing
    shards = sorted(
        obj["annotations"]["checkpoint-runtime.io/shard-key"] for obj in V3_HEADS.values()
    )
    for shard in shards:
        store.set(f"{shard}/cursor", "after the upgrade")  # a 1-row change: head-only if it could
    store.flush()

    expected = {**V3_FIRST["rows"], **{f"{shard}/cursor": "after the upgrade" for shard in shards}}
    assert dict(open_store(harness, writer="observer", epoch=0).items()) == expected
    for shard in shards:
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert stored.annotations[ANNOTATION_FORMAT] == SHARD_FORMAT
        head = codec_v3.decode_head(shard, stored.blob)
        assert head.encoding == BASE_ENCODING
        assert head.delta is None  # rewritten whole: a new base, no delta
        if head.inline is not None:
            assert _first_lines(stored.blob, shard)[1]["encoding"] == BASE_ENCODING
        assert head.manifest.partitions in (0, 5)
        for index in range(head.manifest.partitions):  # every chunk rewritten, none kept
            slot = head.manifest.active_slot(index)
            assert slot.startswith("b")
            chunk = harness.raw(
                chunk_slot_name(shard_name(harness.lease_name, shard), slot[0], int(slot[1:]))
            )
            assert chunk is not None
            assert _first_lines(chunk.blob, shard)[0]["encoding"] == BASE_ENCODING
