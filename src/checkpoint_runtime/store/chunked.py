"""A v3 compaction: encoding the chunks that changed, and writing them into inactive slots.

The rules that keep the head from ever pointing at a chunk whose content differs from its
manifest (docs/store.md, "Why v3 is safe"):

1. A slot of the active generation is never written: a compaction writes index i into the
   generation the head it last read (or committed) does not name for i.
2. A slot is written with create (never written, as far as the head knows) or with an update
   guarded by the resourceVersion the head records for it. A conflict is never retried into
   an overwrite as such: the writer reads the slot, THEN re-proves its leadership (a guarded
   Lease renewal, or without leader election a read of the head showing it unchanged), THEN
   writes with the version it read. A proof made before the read licenses nothing.
3. The head is committed last, guarded by its own resourceVersion; before it writes any slot
   the writer has committed the head under its own stamp in its current term (restamp), so a
   deposed writer's head commit can no longer succeed once the current leader writes slots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from checkpoint_runtime.backends.base import Backend, ShardWrite
from checkpoint_runtime.constants import (
    ANNOTATION_FORMAT,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_SLOT,
    ANNOTATION_WRITE_ID,
    BASE_ENCODING,
    MAX_DECODED_ENVELOPE,
    MAX_DECODED_ROW_CHARS,
    SHARD_FORMAT,
)
from checkpoint_runtime.errors import ChunksExceededError, ConflictError, OversizeError
from checkpoint_runtime.format import codec_v3, rowblock
from checkpoint_runtime.format.codec_v3 import EncodedChunk, Manifest, Slot
from checkpoint_runtime.format.naming import Kinds
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import planner
from checkpoint_runtime.store.options import StoreOptions
from checkpoint_runtime.store.planner import Compaction, Layout


def _encode_all(shard: str, rows: Mapping[str, str], partitions: int, kinds: Kinds) -> Compaction:
    parts = codec_v3.partition(rows, partitions)
    chunks = {
        i: codec_v3.encode_chunk(shard, part, i, partitions, kinds) for i, part in enumerate(parts)
    }
    raw = tuple(chunks[i].raw_bytes for i in range(partitions))
    return Compaction(partitions, chunks, base_raw=sum(raw), base_rows=len(rows), chunk_raw=raw)


def _inline(shard: str, rows: Mapping[str, str], kinds: Kinds) -> Compaction:
    member, raw = codec_v3.encode_inline(shard, rows, kinds)
    return Compaction(0, {}, member, raw, raw, len(rows))


def encode_compaction(
    shard: str,
    rows: Mapping[str, str],
    layout: Layout | None,
    changed: set[str] | None,
    options: StoreOptions,
) -> Compaction:
    """The new base of `rows`: inline, the changed chunks of the current partitioning, or every
    chunk of a new one (`changed` None, or a base in an older encoding: everything is
    rewritten), its rows spelled by the grammar of the store's kinds. Raises ChunksExceededError
    when even the store's `max_chunks` chunks cannot hold it, and OversizeError past a decode
    bound of the whole shard (its rows' characters, or the members' bytes over every chunk
    together)."""
    max_chunks, kinds = options.max_chunks, options.kinds
    chars = rowblock.row_chars(rows)
    if chars > MAX_DECODED_ROW_CHARS:
        raise OversizeError(shard, chars, MAX_DECODED_ROW_CHARS, len(rows))
    if layout is not None and layout.encoding != BASE_ENCODING:
        changed = None
    compaction = _choose(shard, rows, layout, changed, max_chunks, kinds)
    while compaction.chunks:
        largest = max(len(chunk.blob) for chunk in compaction.chunks.values())
        more = planner.grown(compaction.partitions, largest, max_chunks)
        if more is None:
            total = sum(len(chunk.blob) for chunk in compaction.chunks.values())
            raise ChunksExceededError(shard, total, len(rows), max_chunks, largest)
        if more == compaction.partitions:
            break
        compaction = _encode_all(shard, rows, more, kinds)
    if compaction.base_raw > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, compaction.base_raw, MAX_DECODED_ENVELOPE, len(rows))
    return compaction


def _choose(
    shard: str,
    rows: Mapping[str, str],
    layout: Layout | None,
    changed: set[str] | None,
    max_chunks: int,
    kinds: Kinds,
) -> Compaction:
    current = 0 if layout is None else layout.manifest.partitions
    if current == 0:
        compaction = _inline(shard, rows, kinds)
        partitions = planner.partitions_for(len(compaction.inline or b""), 0, max_chunks)
        if partitions == 0:
            return compaction
        return _encode_all(shard, rows, partitions, kinds)
    assert layout is not None
    parts = codec_v3.partition(rows, current)
    touched = set(range(current)) if changed is None else planner.changed_chunks(changed, current)
    chunks = {i: codec_v3.encode_chunk(shard, parts[i], i, current, kinds) for i in sorted(touched)}
    manifest = layout.manifest
    kept = [manifest.slots[manifest.active_slot(i)] for i in range(current) if i not in chunks]
    total = sum(chunk.bytes for chunk in kept) + sum(len(c.blob) for c in chunks.values())
    partitions = planner.partitions_for(total, current, max_chunks)
    if partitions == 0:
        return _inline(shard, rows, kinds)
    if partitions != current:
        return _encode_all(shard, rows, partitions, kinds)
    raw = tuple(chunks[i].raw_bytes if i in chunks else _raw_of(layout, i) for i in range(current))
    return Compaction(current, chunks, base_raw=sum(raw), base_rows=len(rows), chunk_raw=raw)


def _raw_of(layout: Layout, index: int) -> int:
    """Raw bytes of an active chunk: as read or written (its share of the base's compressed
    bytes for a layout that does not record them)."""
    if len(layout.chunk_raw) == layout.manifest.partitions:
        return layout.chunk_raw[index]
    total = layout.manifest.chunk_bytes
    if not total:
        return 0
    part = layout.manifest.slots[layout.manifest.active_slot(index)].bytes
    return layout.base_raw * part // total


Prove = Callable[[], None]
"""Re-proves our leadership after a read (raises if it cannot): the guarded Lease renewal."""


def slot_write(shard: str, slot: str, chunk: EncodedChunk, write_id: str) -> ShardWrite:
    annotations = {
        ANNOTATION_SHARD_KEY: shard,
        ANNOTATION_SLOT: slot,
        ANNOTATION_FORMAT: SHARD_FORMAT,
        ANNOTATION_WRITE_ID: write_id,
    }
    return ShardWrite(shard, chunk.blob, annotations, slot)


def write_slots(
    backend: Backend,
    shard: str,
    manifest: Manifest,
    writes: Mapping[int, tuple[str, ShardWrite]],
    prove: Prove,
    deadline: Deadline,
) -> dict[int, tuple[str, Slot]]:
    """Write each chunk into its inactive slot by the rules above; returns index -> (slot,
    record). A conflict that survives read -> re-prove -> write raises ConflictError (nothing
    the head points at was touched)."""
    written: dict[int, tuple[str, Slot]] = {}
    conflicted: list[int] = []
    for index, (slot, write) in sorted(writes.items()):
        if slot in manifest.active_slots():
            raise RuntimeError(f"refusing to write active chunk slot {slot} of {shard!r}")
        known = manifest.slots.get(slot)
        deadline.check(f"writing chunk slot {slot} of shard {shard!r}")
        try:
            record = _put(backend, write, None if known is None else known.version, deadline)
        except ConflictError:
            conflicted.append(index)
            continue
        written[index] = (slot, record)
    if not conflicted:
        return written
    # The slot holds something the head does not record (a crash or a deposed writer between
    # its chunk write and its head commit, or our own uncommitted compaction): read it, then
    # prove we still lead, then write guarded by what was read.
    seen = {index: backend.read_slot(shard, writes[index][0], deadline) for index in conflicted}
    prove()
    for index in conflicted:
        slot, write = writes[index]
        stored = seen[index]
        record = _put(backend, write, None if stored is None else stored.version, deadline)
        written[index] = (slot, record)
    return written


def _put(backend: Backend, write: ShardWrite, version: str | None, deadline: Deadline) -> Slot:
    """One slot write: a create (`version` None: never written, as far as the writer knows) or
    an update guarded by `version`; the record the head keeps of it."""
    if version is None:
        result = backend.create_shard(write, deadline)
    else:
        result = backend.update_shard(write, version, deadline)
    return Slot(result.version, codec_v3.digest(write.blob), len(write.blob))
