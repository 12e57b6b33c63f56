"""Opening a store: discover its shards, decode each (v1, v2, or a v3 head and its chunks), and
hand the states to the store; legacy migration follows (store/migration.py).

A v3 reader checks every active chunk against the head's manifest (its content digest). A
mismatch, or an active slot that is missing, is corruption only if the head's resourceVersion is
unchanged across the read; otherwise a compaction committed meanwhile, and the shard is read
again, with backoff, inside the deadline. Nothing here writes.
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
from checkpoint_runtime.deadline import Deadline
from checkpoint_runtime.errors import CorruptShardError, DeadlineExceeded
from checkpoint_runtime.format import codec, codec_v3
from checkpoint_runtime.retry import Backoff
from checkpoint_runtime.store.fencing import Stamp
from checkpoint_runtime.store.planner import Layout
from checkpoint_runtime.store.shard_state import ShardState


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
    backend: Backend, stored: StoredShard, head: codec_v3.DecodedHead, deadline: Deadline
) -> tuple[list[dict[str, str]], list[int], int]:
    """Every active chunk, verified against the manifest: rows, raw bytes of each, compressed
    bytes."""
    shard, manifest = stored.shard, head.manifest
    chunks: list[dict[str, str]] = []
    budget, chars, stored_bytes = head.budget, head.chars_budget, 0
    chunk_raw: list[int] = []
    for index in range(manifest.partitions):
        slot = manifest.active_slot(index)
        chunk = backend.read_slot(shard, slot, deadline)
        record = manifest.slots[slot]
        problem = None
        if chunk is None:
            problem = f"active chunk slot {slot} does not exist"
        elif codec_v3.digest(chunk.blob) != record.digest:
            problem = f"active chunk slot {slot} differs from the manifest (digest)"
        if problem is not None:
            again = backend.read_shard(shard, deadline)
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
        )
        budget -= decoded.raw_bytes
        chars -= decoded.chars
        chunk_raw.append(decoded.raw_bytes)
        stored_bytes += len(chunk.blob)
        chunks.append(decoded.rows)
    return chunks, chunk_raw, stored_bytes


def decode(backend: Backend, stored: StoredShard, deadline: Deadline) -> ShardState | None:
    """A shard's state from its stored head (and chunks); None if it disappeared meanwhile.
    Fails closed (CorruptShardError and its kin); never writes."""
    backoff = Backoff()
    for _ in range(CHUNK_REREAD_ATTEMPTS):
        if not codec_v3.is_v3(stored.shard, stored.blob):
            decoded = codec.decode_stored(stored.shard, stored.blob)
            _check_annotations(stored, decoded.format)
            return _state(stored, decoded)
        head = codec_v3.decode_head(stored.shard, stored.blob)
        _check_annotations(stored, SHARD_FORMAT)
        try:
            chunks, chunk_raw, chunk_bytes = _read_chunks(backend, stored, head, deadline)
        except _Moved as moved:
            if moved.stored is None:
                return None
            stored = moved.stored
            if not backoff.pause(deadline, None):
                break
            continue
        decoded = codec_v3.assemble(stored.shard, head, chunks)
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
