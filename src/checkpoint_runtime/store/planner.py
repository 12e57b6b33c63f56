"""The pure half of a persist: what to write (head only, or a compaction into which chunks).

No I/O and no locks: the store hands in what it knows (the stored layout, the rows changed since
the base, sizes) and gets a decision; `store/chunked.py` carries it out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from checkpoint_runtime.constants import (
    BASE_ENCODING,
    CHUNK_TARGET_BYTES,
    CONFIGMAP_VALUE_LIMIT,
    HEAD_DELTA_MAX_BYTES,
    INLINE_BASE_MAX_BYTES,
)
from checkpoint_runtime.format.codec_v3 import Manifest, partition_of


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
    current = {row: rows.get(row) for row in prior}
    return {row: value for row, value in current.items() if value != prior[row]}
