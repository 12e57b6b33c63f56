"""Opening a store: discover its shards, decode each (v1, v2, or a v3 head and its chunks), and
hand the states to the store; legacy migration follows (store/migration.py).

A v3 reader checks every active chunk against the head's manifest (its content digest). A
mismatch, or an active slot that is missing, is corruption only if the head's resourceVersion is
unchanged across the read; otherwise a compaction committed meanwhile, and the shard is read
again, with backoff, inside the deadline. Nothing here writes.

Where the chunks come from (`Slots`): with discovery by label, one paged list of the store's
chunk slots taken after the heads (the backend keeps only the slots a head names active, at the
version its manifest records); otherwise, and for any slot the list did not give, a read by
name. Either way the chunk passes the same digest check before it is decoded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from checkpoint_runtime.backends.base import Backend, StoredShard
from checkpoint_runtime.constants import (
    ANNOTATION_FORMAT,
    ANNOTATION_LEGACY_DIGEST,
    ANNOTATION_RAW_BYTES,
    ANNOTATION_SHARD_KEY,
    CHUNK_REREAD_ATTEMPTS,
    SHARD_FORMAT,
)
from checkpoint_runtime.errors import CorruptShardError, DeadlineExceeded
from checkpoint_runtime.format import codec, codec_v3
from checkpoint_runtime.format.naming import COLLECTOR_KINDS, Kinds
from checkpoint_runtime.retry import Backoff, Deadline
from checkpoint_runtime.store.planner import Layout, ShardState, Stamp
from checkpoint_runtime.store.seal import Sealing


def _int_annotation(annotations: Mapping[str, str], key: str) -> int:
    value = annotations.get(key, "0")
    return int(value) if value.isascii() and value.isdigit() else 0


def discover(
    backend: Backend, configured: Collection[str] | None, deadline: Deadline
) -> list[StoredShard]:
    """The store's heads: listed by label, or read by name (configured shards only)."""
    if configured is None:
        return backend.list_shards(deadline)
    found = (backend.read_shard(key, deadline) for key in sorted(configured))
    return [stored for stored in found if stored is not None]


class Slots:
    """The chunk slots a reader decodes: taken from a list made up front when there is one,
    else read by name. A listed slot is handed out once and only at the version the manifest
    records; anything else (a slot the list lacked, a compaction since, a reread) is read by
    name. The caller verifies what it gets either way."""

    def __init__(
        self, backend: Backend, listed: dict[tuple[str, str], StoredShard] | None = None
    ) -> None:
        self.backend = backend
        self.listed = listed or {}

    def read(
        self, shard: str, slot: str, record: codec_v3.Slot, deadline: Deadline
    ) -> StoredShard | None:
        listed = self.listed.pop((shard, slot), None)
        if listed is not None and listed.version == record.version:
            return listed
        return self.backend.read_slot(shard, slot, deadline)


def heads(
    stored: list[StoredShard], kinds: Kinds = COLLECTOR_KINDS
) -> dict[str, codec_v3.DecodedHead]:
    """The decoded heads of the v3 shards among `stored` (fails closed as decode does)."""
    return {
        item.shard: codec_v3.decode_head(item.shard, item.blob, kinds)
        for item in stored
        if codec_v3.is_v3(item.shard, item.blob)
    }


def slots(
    backend: Backend,
    decoded: Mapping[str, codec_v3.DecodedHead],
    configured: Collection[str] | None,
    deadline: Deadline,
) -> Slots:
    """Where the chunks of `decoded` heads come from: one list of the active slots with
    discovery by label; by name with discovery by name (its Role grants no list)."""
    if configured is not None:
        return Slots(backend)
    wanted = {
        (shard, slot): head.manifest.slots[slot].version
        for shard, head in decoded.items()
        for slot in head.manifest.active_slots()
    }
    return Slots(backend, backend.prefetch_slots(wanted, deadline) if wanted else None)


class _Moved(Exception):
    """The head changed while its chunks were read: read the shard again."""

    def __init__(self, stored: StoredShard | None) -> None:
        super().__init__("head changed")
        self.stored = stored


def _check_annotations(stored: StoredShard, decoded_format: str) -> None:
    annotations = stored.annotations
    if annotations.get(ANNOTATION_SHARD_KEY) != stored.shard:
        raise CorruptShardError(stored.shard, "shard-key annotation disagrees with the object")
    if annotations.get(ANNOTATION_FORMAT) != decoded_format:
        raise CorruptShardError(
            stored.shard,
            f"format annotation {annotations.get(ANNOTATION_FORMAT)!r} disagrees with the "
            f"blob's {decoded_format!r}",
        )


def _state(stored: StoredShard, decoded: codec.DecodedShard) -> ShardState:
    annotations = stored.annotations
    return ShardState(
        key=stored.shard,
        rows=decoded.rows,
        base=decoded.base,
        base_prior=decoded.base_prior if decoded.base is not None else None,
        version=stored.version,
        stamp=Stamp.from_annotations(stored.shard, annotations),
        legacy_digest=annotations.get(ANNOTATION_LEGACY_DIGEST),
        raw_bytes=_int_annotation(annotations, ANNOTATION_RAW_BYTES),
        compressed_bytes=len(stored.blob),
        head_blob=stored.blob,
        head_annotations=dict(annotations),
        last_write_bytes=len(stored.blob),
    )


def _read_chunks(
    source: Slots, stored: StoredShard, head: codec_v3.DecodedHead, deadline: Deadline, kinds: Kinds
) -> tuple[list[dict[str, str]], list[int], int]:
    """Every active chunk, verified against the manifest: rows, raw bytes of each, compressed
    bytes."""
    shard, manifest = stored.shard, head.manifest
    chunks: list[dict[str, str]] = []
    budget, chars, stored_bytes = head.budget, head.chars_budget, 0
    chunk_raw: list[int] = []
    for index in range(manifest.partitions):
        slot = manifest.active_slot(index)
        record = manifest.slots[slot]
        chunk = source.read(shard, slot, record, deadline)
        problem = None
        if chunk is None:
            problem = f"active chunk slot {slot} does not exist"
        elif codec_v3.digest(chunk.blob) != record.digest:
            problem = f"active chunk slot {slot} differs from the manifest (digest)"
        if problem is not None:
            again = source.backend.read_shard(shard, deadline)
            if again is not None and again.version == stored.version:
                raise CorruptShardError(shard, f"{problem}, and the head is unchanged")
            raise _Moved(again)
        assert chunk is not None
        decoded = codec_v3.decode_chunk(
            shard,
            chunk.blob,
            index,
            manifest.partitions,
            budget,
            encoding=head.encoding,
            chars_budget=chars,
            kinds=kinds,
        )
        budget -= decoded.raw_bytes
        chars -= decoded.chars
        chunk_raw.append(decoded.raw_bytes)
        stored_bytes += len(chunk.blob)
        chunks.append(decoded.rows)
    return chunks, chunk_raw, stored_bytes


def decode(
    backend: Backend | Slots,
    stored: StoredShard | None,
    deadline: Deadline,
    head: codec_v3.DecodedHead | None = None,
    kinds: Kinds = COLLECTOR_KINDS,
    sealing: Sealing | None = None,
) -> ShardState | None:
    """A shard's state from its stored head (`head`: already decoded from `stored`) and its
    chunks, its rows spelled by the grammar of `kinds`; None if it is not stored (`stored`
    None) or disappeared meanwhile. Fails closed (CorruptShardError and its kin); never writes.
    With `sealing`, every head read (the first and any re-read) is checked before it is decoded:
    one the store did not write raises ForeignHeadError."""
    if stored is None:
        return None
    source = backend if isinstance(backend, Slots) else Slots(backend)
    backoff = Backoff()
    for _ in range(CHUNK_REREAD_ATTEMPTS):
        if sealing is not None:
            sealing.check(stored.shard, stored.name, stored.blob, stored.annotations)
        if not codec_v3.is_v3(stored.shard, stored.blob):
            decoded = codec.decode_stored(stored.shard, stored.blob, kinds)
            _check_annotations(stored, decoded.format)
            return _state(stored, decoded)
        if head is None:
            head = codec_v3.decode_head(stored.shard, stored.blob, kinds)
        _check_annotations(stored, SHARD_FORMAT)
        try:
            chunks, chunk_raw, chunk_bytes = _read_chunks(source, stored, head, deadline, kinds)
        except _Moved as moved:
            if moved.stored is None:
                return None
            stored, head = moved.stored, None
            if not backoff.pause(deadline, None):
                break
            continue
        decoded = codec_v3.assemble(stored.shard, head, chunks, kinds)
        state = _state(stored, decoded)
        state.base_prior = decoded.base_prior
        base_raw = sum(chunk_raw) if head.inline is None else head.inline_raw
        state.layout = Layout(
            head.manifest,
            head.base_rows,
            head.inline,
            head.inline_raw,
            base_raw,
            head.encoding,
            tuple(chunk_raw),
        )
        state.compressed_bytes = len(stored.blob) + chunk_bytes
        return state
    raise DeadlineExceeded(
        f"shard {stored.shard!r}: its head kept changing while its chunks were read"
    )
