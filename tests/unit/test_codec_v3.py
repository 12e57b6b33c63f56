"""`gzip-shards-v3` (SPEC §4a): chunk slot names, head and chunk members, the shared decode
bound, the planner's pure decisions and the write budget's admission."""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

import pytest

from checkpoint_runtime.constants import (
    BASE_ENCODING,
    CHUNK_TARGET_BYTES,
    COMPONENT_CHUNK,
    INLINE_BASE_MAX_BYTES,
    LABEL_COMPONENT,
    MAX_DECODED_ENVELOPE,
    SHARD_FORMAT,
)
from checkpoint_runtime.errors import CorruptShardError, KeyGrammarError, OversizeError
from checkpoint_runtime.format import codec, codec_v3, rowblock
from checkpoint_runtime.format.codec import gunzip_members, gzip_fast
from checkpoint_runtime.format.codec_v3 import Manifest, Slot
from checkpoint_runtime.format.naming import chunk_labels, chunk_slot_name, shard_labels
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store import chunked, planner
from checkpoint_runtime.store.budget import WriteBudget
from checkpoint_runtime.store.options import StoreOptions
from checkpoint_testenv.support.v3rows import v3_rows

SHARD = "tn/objectstore/feed"


def rows_of(seen: int = 300, shape: str = "uuid") -> dict[str, str]:
    return FeedWorkload(SHARD, seen, shape, gap_rows=3).rows


def documents(blob: bytes) -> list[dict[str, Any]]:
    """Each member's JSON document (a base member's: its first line, before the row block)."""
    members = gunzip_members(blob, MAX_DECODED_ENVELOPE, SHARD)
    return [json.loads(m.data.partition(b"\n")[0]) for m in members]


# -- names -----------------------------------------------------------------------------------


def test_chunk_slot_names_follow_the_fixed_shape() -> None:
    head = "ckpt-corp.flowlogs-1a2b3c4d5e"
    assert chunk_slot_name(head, "a", 0) == "ckpt-corp.flowlogs-1a2b3c4d5e-ca0"
    assert chunk_slot_name(head, "b", 255) == "ckpt-corp.flowlogs-1a2b3c4d5e-cb255"
    for generation, index in (("c", 0), ("A", 1), ("a", -1)):
        with pytest.raises(ValueError, match="chunk"):
            chunk_slot_name(head, generation, index)
    with pytest.raises(KeyGrammarError, match="chunk slot name"):
        chunk_slot_name("x" * 250, "a", 10)


def test_chunk_slots_carry_the_shard_labels_with_the_chunk_component() -> None:
    labels = chunk_labels("lease")
    assert labels == {**shard_labels("lease"), LABEL_COMPONENT: COMPONENT_CHUNK}


# -- members ---------------------------------------------------------------------------------


def manifest_of(chunks: dict[int, codec_v3.EncodedChunk], partitions: int) -> Manifest:
    slots = {f"a{i}": Slot(str(i + 1), c.digest, len(c.blob)) for i, c in chunks.items()}
    return Manifest(partitions, "a" * partitions, slots)


def chunked_shard(rows: dict[str, str], partitions: int = 3) -> tuple[bytes, list[bytes]]:
    parts = codec_v3.partition(rows, partitions)
    chunks = {i: codec_v3.encode_chunk(SHARD, p, i, partitions) for i, p in enumerate(parts)}
    head = codec_v3.encode_head(
        SHARD, manifest_of(chunks, partitions), len(rows), None, 0, {}, len(rows)
    )
    return head.blob, [chunks[i].blob for i in range(partitions)]


def decode(head_blob: bytes, chunk_blobs: list[bytes]) -> dict[str, str]:
    return v3_rows(SHARD, codec_v3.decode_head(SHARD, head_blob), chunk_blobs)


def test_inline_head_round_trips_with_a_delta() -> None:
    rows = rows_of()
    inline, raw = codec_v3.encode_inline(SHARD, rows)
    change = {f"{SHARD}/cursor": "moved", next(k for k in rows if "/seen/" in k): None}
    head = codec_v3.encode_head(SHARD, Manifest(), len(rows), inline, raw, change, len(rows) - 1)
    assert [d["member"] for d in documents(head.blob)] == ["head", "base", "delta"]
    assert documents(head.blob)[0]["format"] == SHARD_FORMAT
    decoded = decode(head.blob, [])
    expected = {k: v for k, v in {**rows, **change}.items() if v is not None}
    assert decoded == expected
    assert codec_v3.is_v3(SHARD, head.blob)


def test_a_delta_names_its_base_by_the_crc_the_format_documents() -> None:
    """What a reader of the stored objects computes, without the encoder: for an inline base,
    the CRC-32 of the base member's bytes as stored (compressed, from its gzip header to its
    trailer); for a chunked base, the CRC-32 of the UTF-8 text `P|slot:digest,...` (the active
    slots in chunk order, each with the SHA-256 hex of its object's bytes, as the manifest
    records it)."""
    rows = rows_of()
    change = {f"{SHARD}/cursor": "moved"}
    inline, raw = codec_v3.encode_inline(SHARD, rows)
    head = codec_v3.encode_head(SHARD, Manifest(), len(rows), inline, raw, change, len(rows))
    members = gunzip_members(head.blob, MAX_DECODED_ENVELOPE, SHARD)
    stored_base = head.blob[members[0].end : members[1].end]
    assert documents(head.blob)[2]["base"] == zlib.crc32(stored_base)
    assert documents(head.blob)[2]["base"] != zlib.crc32(members[1].data)  # not the inflated

    parts = codec_v3.partition(rows, 3)
    chunks = [codec_v3.encode_chunk(SHARD, part, i, 3) for i, part in enumerate(parts)]
    slots = {
        f"{g}{i}": Slot("1", hashlib.sha256(c.blob).hexdigest(), 1)
        for i, c in enumerate(chunks)
        for g in "ab"
    }
    manifest = Manifest(3, "aba", slots)
    head = codec_v3.encode_head(SHARD, manifest, len(rows), None, 0, change, len(rows))
    document = documents(head.blob)[0]
    text = ",".join(
        f"{generation}{index}:{document['slots'][f'{generation}{index}'][1]}"
        for index, generation in enumerate(document["active"])
    )
    assert text == f"a0:{slots['a0'].digest},b1:{slots['b1'].digest},a2:{slots['a2'].digest}"
    assert documents(head.blob)[1]["base"] == zlib.crc32(
        f"{document['partitions']}|{text}".encode()
    )


def test_chunked_head_round_trips_and_every_row_lives_in_its_hash_chunk() -> None:
    rows = rows_of(2000)
    head, chunks = chunked_shard(rows, 4)
    assert decode(head, chunks) == rows
    for index, blob in enumerate(chunks):
        (document,) = documents(blob)
        assert (document["member"], document["chunk"], document["partitions"]) == (
            "chunk",
            index,
            4,
        )


def test_a_one_row_change_touches_one_chunk() -> None:
    rows = rows_of(2000)
    for key in list(rows)[:50]:
        assert len(planner.changed_chunks([key], 8)) == 1
    assert planner.changed_chunks([], 8) == set()


def test_the_previous_releases_decoder_refuses_a_v3_head_by_name() -> None:
    """The v2 release's decoder (codec.decode_stored, unchanged) on a v3 head: a named error,
    never rows. The store-level check (format annotation) is in tests/store."""
    head, _ = chunked_shard(rows_of(), 2)
    with pytest.raises(CorruptShardError, match="unknown format 'gzip-shards-v3'"):
        codec.decode_stored(SHARD, head)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"partitions": 2, "active": "a"}, "generation"),
        ({"active": "ac"}, "generation"),
        ({"slots": {"a0": ["1", "x", 1], "a1": ["1", "0" * 64, 1]}}, "version, sha256"),
        ({"slots": {"a1": ["1", "0" * 64, 1]}}, "never written"),
        ({"slots": {"z0": ["1", "0" * 64, 1]}}, "not a slot"),
        ({"partitions": 9999, "active": ""}, "partitions"),
        ({"extra": 1}, "not the v3 set"),
        ({"member": "base"}, "expected a head member"),
    ],
)
def test_malformed_heads_fail_closed(change: dict[str, Any], message: str) -> None:
    head, _ = chunked_shard(rows_of(), 2)
    document = {**documents(head)[0], **change}
    blob = gzip_fast(json.dumps(document).encode())
    with pytest.raises(CorruptShardError, match=message):
        codec_v3.decode_head(SHARD, blob)


def test_a_chunk_of_another_index_or_holding_a_foreign_row_is_refused() -> None:
    rows = rows_of(500)
    _, chunks = chunked_shard(rows, 3)
    with pytest.raises(CorruptShardError, match="holds chunk 0 of 3"):
        codec_v3.decode_chunk(SHARD, chunks[0], 1, 3, MAX_DECODED_ENVELOPE)
    parts = codec_v3.partition(rows, 3)
    stolen = {**parts[0], **dict(list(parts[1].items())[:1])}
    forged = codec_v3.encode_chunk(SHARD, stolen, 0, 3)
    with pytest.raises(CorruptShardError, match="of another chunk"):
        codec_v3.decode_chunk(SHARD, forged.blob, 0, 3, MAX_DECODED_ENVELOPE)


def test_the_decode_bound_covers_every_chunk_together() -> None:
    rows = rows_of(500)
    _, chunks = chunked_shard(rows, 2)
    used = codec_v3.decode_chunk(SHARD, chunks[0], 0, 2, MAX_DECODED_ENVELOPE).raw_bytes
    with pytest.raises(CorruptShardError, match="exceeds"):
        codec_v3.decode_chunk(SHARD, chunks[0], 0, 2, used - 1)


def test_base_rows_must_add_up() -> None:
    rows = rows_of(500)
    head, chunks = chunked_shard(rows, 2)
    with pytest.raises(CorruptShardError, match="base rows"):
        decode(head, [chunks[0], codec_v3.encode_chunk(SHARD, {}, 1, 2).blob])


# -- planner ---------------------------------------------------------------------------------


def test_partitions_follow_the_base_size_with_hysteresis() -> None:
    assert planner.partitions_for(INLINE_BASE_MAX_BYTES, 0, 8) == 0
    assert planner.partitions_for(INLINE_BASE_MAX_BYTES + 1, 0, 8) == 1
    assert planner.partitions_for(5 * CHUNK_TARGET_BYTES, 0, 8) == 5
    assert planner.partitions_for(50 * CHUNK_TARGET_BYTES, 0, 8) == 8
    assert planner.partitions_for(6 * CHUNK_TARGET_BYTES, 5, 8) == 5  # no churn near a boundary
    assert planner.partitions_for(11 * CHUNK_TARGET_BYTES, 5, 8) == 8
    assert planner.partitions_for(INLINE_BASE_MAX_BYTES // 2, 5, 8) == 0
    assert planner.partitions_for(INLINE_BASE_MAX_BYTES, 5, 8) == 1
    assert planner.partitions_for(4 * CHUNK_TARGET_BYTES, 8, 3) == 3  # maxChunks lowered
    assert planner.grown(4, 2_000_000, 8) == 8
    assert planner.grown(8, 2_000_000, 8) is None


def test_the_head_carries_a_delta_only_within_its_bound() -> None:
    layout = planner.Layout(Manifest(), 10, b"x" * 10_000, 20_000, 20_000)
    assert planner.head_only(layout, 4_000, 15_000, 0.5)
    assert not planner.head_only(layout, 6_000, 17_000, 0.5)


# -- guards ----------------------------------------------------------------------------------


def test_a_compaction_never_writes_an_active_slot() -> None:
    chunk = codec_v3.encode_chunk(SHARD, {}, 0, 1)
    manifest = Manifest(1, "a", {"a0": Slot("1", chunk.digest, len(chunk.blob))})
    write = chunked.slot_write(SHARD, "a0", chunk, "id")
    with pytest.raises(RuntimeError, match="active chunk slot a0"):
        chunked.write_slots(None, SHARD, manifest, {0: ("a0", write)}, lambda: None, None)  # type: ignore[arg-type]


# -- write budget ----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_slows_the_busiest_shard_and_never_drops_one() -> None:
    clock = Clock()
    budget = WriteBudget(1000, clock, window=10)
    assert budget.admit({"busy": 5000, "quiet": 100}) == ["busy", "quiet"]
    budget.record("busy", 9000)
    assert budget.admit({"busy": 5000, "quiet": 100}) == ["quiet"]  # the busy one waits
    budget.record("quiet", 100)
    clock.now += 10.5  # the window slides past: room again
    assert budget.admit({"busy": 5000, "quiet": 100}) == ["busy", "quiet"]


def test_an_object_larger_than_the_budget_goes_alone_once_the_window_is_empty() -> None:
    clock = Clock()
    budget = WriteBudget(10, clock, window=10)
    assert budget.admit({"huge": 1_000_000}) == ["huge"]
    budget.record("huge", 1_000_000)
    assert budget.admit({"huge": 1_000_000}) == []
    clock.now += 11
    assert budget.admit({"huge": 1_000_000}) == ["huge"]
    assert WriteBudget(0, clock).admit({"a": 10**9, "b": 1}) == ["a", "b"]  # 0: no budget


def test_every_v3_member_matches_the_schema() -> None:
    from pathlib import Path

    import jsonschema

    schema = json.loads(
        (Path(__file__).parents[2] / "schemas" / "shard-envelope-v3.schema.json").read_text()
    )
    rows = rows_of(400)
    head, chunks = chunked_shard(rows, 3)
    inline, raw = codec_v3.encode_inline(SHARD, rows)
    change = {f"{SHARD}/cursor": "moved"}
    small = codec_v3.encode_head(SHARD, Manifest(), len(rows), inline, raw, change, len(rows))
    found = [*documents(head), *documents(small.blob)]
    for blob in chunks:
        found += documents(blob)
    assert {d["member"] for d in found} == {"head", "base", "delta", "chunk"}
    for document in found:
        jsonschema.validate(document, schema)


# -- the row-block base (encoding rowblock-1) ------------------------------------------------


def member_blob(line: dict[str, Any], rows: dict[str, str]) -> bytes:
    """A base member as the encoder writes one, with `line` as its JSON line."""
    text = json.dumps(line, separators=(",", ":")).encode()
    return gzip_fast(text + b"\n" + rowblock.encode(rows, shard=SHARD))


def chunk_line(**change: Any) -> dict[str, Any]:
    line = {"format": SHARD_FORMAT, "member": "chunk", "shard": SHARD, "encoding": BASE_ENCODING}
    return {**line, "chunk": 0, "partitions": 1, **change}


def test_base_members_are_row_blocks_named_by_the_head() -> None:
    rows = rows_of(300)
    head, chunks = chunked_shard(rows, 2)
    assert documents(head)[0]["encoding"] == BASE_ENCODING
    data = gunzip_members(chunks[0], MAX_DECODED_ENVELOPE, SHARD)[0].data
    line, _, payload = data.partition(b"\n")
    assert json.loads(line) == chunk_line(chunk=0, partitions=2)
    assert payload.startswith(rowblock.MAGIC)


def test_a_head_naming_an_unknown_encoding_is_refused() -> None:
    head, _ = chunked_shard(rows_of(), 2)
    for encoding in ("rowblock-2", "", 1):
        blob = gzip_fast(json.dumps({**documents(head)[0], "encoding": encoding}).encode())
        with pytest.raises(CorruptShardError, match="unknown base encoding"):
            codec_v3.decode_head(SHARD, blob)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"encoding": "rowblock-2"}, "is not its head's"),
        ({"shard": "tn/objectstore/other"}, "names shard"),
        ({"member": "base"}, "expected a chunk member"),
        ({"format": "gzip-shards-v2"}, "unknown format"),
        ({"rows": 3}, "not the v3 set"),
        ({"chunk": True}, "holds chunk True"),
    ],
)
def test_a_chunk_line_that_is_not_its_heads_is_refused(
    change: dict[str, Any], message: str
) -> None:
    blob = member_blob(chunk_line(**change), {f"{SHARD}/cursor": "c"})
    with pytest.raises(CorruptShardError, match=message):
        codec_v3.decode_chunk(SHARD, blob, 1 if change.get("chunk") is True else 0, 1, 1 << 20)


def test_a_base_member_without_its_line_is_refused() -> None:
    blob = gzip_fast(rowblock.encode({f"{SHARD}/cursor": "c"}))
    with pytest.raises(CorruptShardError, match=r"not JSON|line break"):
        codec_v3.decode_chunk(SHARD, blob, 0, 1, 1 << 20)
    blob = gzip_fast(json.dumps(chunk_line()).encode())
    with pytest.raises(CorruptShardError, match="no line break"):
        codec_v3.decode_chunk(SHARD, blob, 0, 1, 1 << 20)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"tn/objectstore/other/seen/YWJj": "1", "tn/objectstore/other/seen/ZGVm": "2"}, "belong"),
        ({"tn/objectstore/feed/bogus/YWJj": "1", "tn/objectstore/feed/bogus/ZGVm": "2"}, "bogus"),
        ({"tn/objectstore/feed/seen": "plain, needs an id"}, "needs an /<id>"),
        (
            {"tn/objectstore/feed/cursor/YWJj": "1", "tn/objectstore/feed/cursor/ZGVm": "2"},
            "no /<id>",
        ),
        ({"tn/objectstore/feed/c2Nhbg": "1", "tn/objectstore/feed/Y3Vyc29y": "2"}, "row kind"),
        ({"tn/flowlogs/cursor": "c"}, "belong"),
    ],
)
def test_a_row_that_is_not_the_shards_is_refused(rows: dict[str, str], message: str) -> None:
    """Group heads (one check a group) and plain keys (each) must spell rows of the shard; the
    encoder refuses them too."""
    with pytest.raises(KeyGrammarError, match=message):
        codec_v3.encode_chunk(SHARD, rows, 0, 1)
    with pytest.raises(CorruptShardError, match=message):
        codec_v3.decode_chunk(SHARD, member_blob(chunk_line(), rows), 0, 1, 1 << 20)


def test_a_lone_surrogate_in_a_group_head_is_refused() -> None:
    rows = {f"{SHARD}/seen/x\ud800/YWJj": "1", f"{SHARD}/seen/x\ud800/ZGVm": "2"}
    payload = rowblock.encode({k.replace("\ud800", "Q"): v for k, v in rows.items()}, shard=SHARD)
    forged = payload.replace(b'/seen/xQ/"', b'/seen/x\\ud800/"')
    assert forged != payload
    text = json.dumps(chunk_line(), separators=(",", ":")).encode()
    with pytest.raises(CorruptShardError, match="surrogate"):
        codec_v3.decode_chunk(SHARD, gzip_fast(text + b"\n" + forged), 0, 1, 1 << 20)


def test_the_row_characters_bound_covers_every_chunk_together() -> None:
    rows = rows_of(500)
    _head, chunks = chunked_shard(rows, 2)
    first = codec_v3.decode_chunk(SHARD, chunks[0], 0, 2, MAX_DECODED_ENVELOPE)
    assert first.chars == rowblock.row_chars(first.rows)
    with pytest.raises(CorruptShardError, match="expands beyond"):
        codec_v3.decode_chunk(
            SHARD, chunks[0], 0, 2, MAX_DECODED_ENVELOPE, chars_budget=first.chars - 1
        )


def test_the_encoder_refuses_a_shard_past_either_decode_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = rows_of(2000)
    compaction = chunked.encode_compaction(SHARD, rows, None, None, StoreOptions(max_chunks=8))
    monkeypatch.setattr(chunked, "MAX_DECODED_ROW_CHARS", rowblock.row_chars(rows) - 1)
    with pytest.raises(OversizeError):
        chunked.encode_compaction(SHARD, rows, None, None, StoreOptions(max_chunks=8))
    monkeypatch.undo()
    monkeypatch.setattr(chunked, "MAX_DECODED_ENVELOPE", compaction.base_raw - 1)
    with pytest.raises(OversizeError):
        chunked.encode_compaction(SHARD, rows, None, None, StoreOptions(max_chunks=8))


def test_a_chunked_layout_records_each_chunks_raw_bytes() -> None:
    rows = rows_of(3000)
    compaction = chunked.encode_compaction(SHARD, rows, None, None, StoreOptions(max_chunks=8))
    assert compaction.partitions >= 1
    assert compaction.chunk_raw == tuple(
        compaction.chunks[i].raw_bytes for i in range(compaction.partitions)
    )
    assert compaction.base_raw == sum(compaction.chunk_raw)
