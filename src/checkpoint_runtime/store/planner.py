"""One shard in memory, and the pure half of its persist: what to write (head only, or a
compaction into which chunks).

`ShardState` is a shard's rows with what is known of its stored copy (version, stamp, the v3
layout of its base) and what the next write needs (dirty generation, the rows changed since the
base). The decisions below take no I/O and no locks: the store hands in what it knows of the state
(the stored layout, the rows changed since the base, sizes) and gets a decision; `store/chunked.py`
carries out a compaction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from checkpoint_runtime.constants import (
    BASE_ENCODING,
    CHUNK_TARGET_BYTES,
    CONFIGMAP_VALUE_LIMIT,
    HEAD_DELTA_MAX_BYTES,
    INLINE_BASE_MAX_BYTES,
)
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.codec_v3 import Manifest, partition_of
from checkpoint_runtime.store.fencing import Stamp


@dataclass(frozen=True)
class Layout:
    """A v3 shard's stored base, as its last head read or commit recorded it."""

    manifest: Manifest
    base_rows: int
    inline: bytes | None
    """The inline base member (None: the base is in the manifest's active chunks)."""
    inline_raw: int = 0
    base_raw: int = 0
    """Raw bytes of the whole base (inline member or every active chunk)."""
    encoding: str = BASE_ENCODING
    """The layout of its base members (codec_v3.JSON_COLUMNS: v3 as first written)."""
    chunk_raw: tuple[int, ...] = ()
    """Raw (inflated) bytes of each active chunk, by index."""

    @property
    def base_bytes(self) -> int:
        """Compressed bytes of the base (inline member or every active chunk)."""
        return len(self.inline) if self.inline is not None else self.manifest.chunk_bytes


@dataclass
class ShardState:
    """One shard in memory, with what is known of its stored copy."""

    key: str
    rows: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    """Version of the stored copy we last saw; None if it does not exist yet."""
    stamp: Stamp = field(default_factory=lambda: Stamp(0, ""))
    legacy_digest: str | None = None
    generation: int = 0
    persisted_generation: int = 0
    dirty_since: float | None = None
    """When the oldest change not yet persisted was made (the debounce counts from it)."""
    changed_since_snapshot: float | None = None
    """When the first change after the snapshot of the write in flight was made: what
    `dirty_since` becomes if the shard is still dirty once that write commits."""
    raw_bytes: int = 0
    compressed_bytes: int = 0
    base: codec.Base | None = None
    """The stored base member a delta can be written against (None: the next write is whole)."""
    base_prior: dict[str, str | None] | None = None
    """Every row changed since `base` was written, with its value in the base (None: absent)."""
    inflight_prior: dict[str, str | None] | None = None
    """While a new base is being written: rows changed since its snapshot, as `base_prior`."""
    layout: Layout | None = None
    """A v3 shard's stored base (manifest, inline base); None for v1/v2 or never written."""
    head_blob: bytes = b""
    head_annotations: dict[str, str] = field(default_factory=dict)
    """The stored head as last read or written (re-sent with our stamp before a compaction
    writes chunk slots over a head stamped by another writer or term)."""
    last_write_bytes: int = 0
    """Value bytes the last write of this shard sent."""
    head_delta_bytes: int = 0
    """Compressed bytes of the delta the stored head carries (as last written)."""
    delta_row_bytes: float = 0.0
    """Compressed bytes per row of the last delta written (0: none yet): what the write
    budget's estimate of the next persist scales by the rows changed since the base."""

    def note_change(self, key: str, old: str | None) -> None:
        """Record the value a row had before its first change since the base (and since the
        snapshot of a base being written)."""
        if self.base_prior is not None and key not in self.base_prior:
            self.base_prior[key] = old
        if self.inflight_prior is not None and key not in self.inflight_prior:
            self.inflight_prior[key] = old

    @property
    def dirty(self) -> bool:
        return self.generation != self.persisted_generation


def copy_state(state: ShardState) -> ShardState:
    copied = {
        **state.__dict__,
        "rows": dict(state.rows),
        "head_annotations": dict(state.head_annotations),
    }
    for name in ("base_prior", "inflight_prior"):
        if copied[name] is not None:
            copied[name] = dict(copied[name])
    return ShardState(**copied)


# -- the plan of a persist -------------------------------------------------------------------------


def delta_bound(layout: Layout, compaction_ratio: float) -> float:
    """The most compressed delta bytes a head may carry before the base is compacted."""
    return min(compaction_ratio * layout.base_bytes, HEAD_DELTA_MAX_BYTES)


def head_only(layout: Layout, delta_bytes: int, head_bytes: int, compaction_ratio: float) -> bool:
    """Whether a persist may write only the head (its delta within bounds)."""
    return delta_bytes <= delta_bound(layout, compaction_ratio) and head_bytes <= (
        CONFIGMAP_VALUE_LIMIT
    )


def must_compact(layout: Layout) -> bool:
    """An inline base past its bound (a shard's first write keeps every row in the head):
    the next persist moves it into chunks; a base in an older encoding: the next persist
    rewrites it whole (a head names one encoding for all its base members)."""
    if layout.encoding != BASE_ENCODING:
        return True
    return layout.inline is not None and len(layout.inline) > INLINE_BASE_MAX_BYTES


def changed_chunks(changed: Iterable[str], partitions: int) -> set[int]:
    """The chunk indexes whose rows `changed` (a 1-row change touches one chunk)."""
    return {partition_of(key, partitions) for key in changed}


def partitions_for(base_bytes: int, current: int, max_chunks: int) -> int:
    """How many chunks should hold a base of `base_bytes` compressed bytes (0: inline), given
    the current count. Hysteresis keeps a shard near a boundary from being repartitioned (every
    row moved) at each compaction: inline until the base passes INLINE_BASE_MAX_BYTES, back
    inline below half of it; more chunks once they average past twice CHUNK_TARGET_BYTES,
    fewer once they average under half of it."""
    want = min(max_chunks, max(1, math.ceil(base_bytes / CHUNK_TARGET_BYTES)))
    if current == 0:
        return 0 if base_bytes <= INLINE_BASE_MAX_BYTES else want
    if base_bytes <= INLINE_BASE_MAX_BYTES // 2:
        return 0
    average = base_bytes / current
    if (average > 2 * CHUNK_TARGET_BYTES and current < max_chunks) or current > max_chunks:
        return want
    if average < CHUNK_TARGET_BYTES / 2 and want < current:
        return want
    return current


def grown(current: int, largest_chunk: int, max_chunks: int) -> int | None:
    """More chunks when one would not fit the ConfigMap limit (None: none left)."""
    if largest_chunk <= CONFIGMAP_VALUE_LIMIT:
        return current
    if current >= max_chunks:
        return None
    return min(max_chunks, max(current + 1, 2 * current))


def changes_since(
    rows: Mapping[str, str], prior: Mapping[str, str | None]
) -> dict[str, str | None]:
    """Rows whose value differs from the base (None: deleted), from the base's prior values."""
    return {row: value for row, old in prior.items() if (value := rows.get(row)) != old}
