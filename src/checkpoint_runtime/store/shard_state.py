"""One shard in memory: its rows, the version and stamp of its stored copy, and what the next
write needs (dirty generation, the base a delta is written against)."""

from __future__ import annotations

from dataclasses import dataclass, field

from checkpoint_runtime.format import codec
from checkpoint_runtime.store.fencing import Stamp
from checkpoint_runtime.store.planner import Layout


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
