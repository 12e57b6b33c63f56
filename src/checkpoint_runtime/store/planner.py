"""One shard in memory: who wrote it (the fence), its state, and the pure half of its persist
(what to write: head only, or a compaction into which chunks).

The fence. Leader election alone does not fence a paused ex-leader. Every shard therefore carries
the writer identity, the leadership epoch and the uid of the Lease object that epoch belongs to
(`Stamp`); a new leader restamps its shards before collectors run (Store.take_ownership), and no
store writes over a shard it does not dominate (`dominates`): a newer epoch of the same Lease
object, or any epoch of another Lease object of the same name (deleted and recreated: its epochs
restarted and are not comparable). A leader takes over the latter only after proving, by a
guarded renewal of the Lease it holds made after reading the shards, that it is the current
leader (`Fence`, `Store.take_ownership`). Together with resourceVersion guards this closes the
deposed-leader window.

The state. `ShardState` is a shard's rows with what is known of its stored copy (version, stamp,
the v3 layout of its base) and what the next write needs (dirty generation, the rows changed since
the base).

The plan. The decisions at the end take no I/O and no locks: the store hands in what it knows of
the state (the stored layout, the rows changed since the base, sizes) and gets a decision;
`store/chunked.py` carries out a compaction.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_LEASE_UID,
    ANNOTATION_WRITER,
    BASE_ENCODING,
    CHUNK_TARGET_BYTES,
    CONFIGMAP_VALUE_LIMIT,
    HEAD_DELTA_MAX_BYTES,
    INLINE_BASE_MAX_BYTES,
)
from checkpoint_runtime.errors import CheckpointError, CorruptShardError, EpochFencedError
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.codec_v3 import EncodedChunk, Manifest, Slot, partition_of

# -- the fence: who wrote a shard, under which epoch of which Lease --------------------------------


@dataclass(frozen=True)
class Stamp:
    """Leadership epoch, writer identity and Lease object (uid) of one write.

    An empty `lease` is a stamp without a Lease object: written before stamps carried one, or by
    a store that runs without leader election (the file store, the `migrate` command).
    """

    epoch: int
    writer: str
    lease: str = ""

    def annotations(self) -> dict[str, str]:
        stamped = {ANNOTATION_EPOCH: str(self.epoch), ANNOTATION_WRITER: self.writer}
        if self.lease:
            stamped[ANNOTATION_LEASE_UID] = self.lease
        return stamped

    @classmethod
    def from_annotations(cls, shard: str, annotations: Mapping[str, str]) -> Stamp:
        """The stamp a stored shard carries (epoch 0 if it was never stamped)."""
        raw = annotations.get(ANNOTATION_EPOCH, "0")
        if not (raw.isascii() and raw.isdigit()):  # "²".isdigit() is True; int() refuses it
            raise CorruptShardError(
                shard, f"epoch annotation {raw!r} is not a non-negative integer"
            )
        return cls(
            int(raw),
            annotations.get(ANNOTATION_WRITER, ""),
            annotations.get(ANNOTATION_LEASE_UID, ""),
        )

    def other_lease(self, stored: Stamp) -> bool:
        """`stored` was written under another Lease object than ours (both known)."""
        return bool(self.lease and stored.lease and self.lease != stored.lease)


def dominates(ours: Stamp, stored: Stamp) -> bool:
    """We may write over `stored` without further proof: same Lease object (or one side
    without a Lease object) and an epoch not newer than ours."""
    return not ours.other_lease(stored) and stored.epoch <= ours.epoch


def check_not_fenced(shard: str, ours: Stamp, stored: Stamp) -> None:
    """Refuse to write over a shard we do not dominate (a newer leader stamped it)."""
    if not dominates(ours, stored):
        raise EpochFencedError(
            shard, ours.epoch, stored.epoch, stored.writer, ours.other_lease(stored)
        )


class Fence:
    """A store's side of the fence: our stamp, and which stored stamps we may write over.

    We dominate a stamp of our own Lease object with an epoch not newer than ours (`dominates`).
    A stamp of another Lease object of our Lease's name (it was deleted and recreated), or one
    without a Lease object and a newer epoch, is neither refused nor dominated: we may take it
    over once `renew_above` (our elector's guarded renewal) has proved, after the stamp was
    read, that we hold the current Lease, raising our epoch above it. A stamp of our own Lease
    object with a newer epoch is always refused: a newer leader exists.
    """

    def __init__(self, stamp: Stamp) -> None:
        self.stamp = stamp
        self.renew_above: Callable[[int], int] | None = None
        """Renews our Lease, raising our epoch above the given one; returns our epoch."""
        self._superseded: frozenset[Stamp] = frozenset()
        """Stamps proved older than our term by a renewal made after they were read."""
        self._lock = threading.Lock()

    def may_overwrite(self, stored: Stamp) -> bool:
        with self._lock:
            return dominates(self.stamp, stored) or stored in self._superseded

    def check(self, shard: str, stored: Stamp) -> None:
        """Raise EpochFencedError unless we may write over `stored`."""
        if not self.may_overwrite(stored):
            check_not_fenced(shard, self.stamp, stored)

    def provable(self, shard: str, stored: Stamp) -> None:
        """Raise EpochFencedError unless a renewal could prove us newer than `stored`."""
        if self.renew_above is None or not self.stamp.lease or stored.lease == self.stamp.lease:
            check_not_fenced(shard, self.stamp, stored)

    def supersede(self, stamps: frozenset[Stamp]) -> None:
        """Renew our Lease now with an epoch above every one of `stamps`: the proof, made
        after they were read, that our term is newer. Raises what the renewal raises."""
        if self.renew_above is None:
            raise RuntimeError("no renewal to prove our term with")
        epoch = self.renew_above(max(stamp.epoch for stamp in stamps))
        with self._lock:
            if epoch > self.stamp.epoch:
                self.stamp = Stamp(epoch, self.stamp.writer, self.stamp.lease)
            self._superseded |= stamps

    def take_over_created(self, shard: str, theirs: Stamp) -> Stamp | None:
        """Our create met a shard stamped `theirs`, created since we looked. The stamp to write
        over it with, or None if it is not ours to take (a conflict, as before); raises
        EpochFencedError if a newer leader made it.

        Taken over: our own create (its answer lost), an older epoch of our Lease object (a
        deposed leader's), or (after a renewal proves our term newer) another Lease object's.
        """
        ours = self.stamp
        if theirs == ours or theirs in self._superseded:
            return ours
        if dominates(ours, theirs):
            return ours if theirs.epoch < ours.epoch else None  # the same epoch: a conflict
        if not ours.other_lease(theirs) or self.renew_above is None:
            check_not_fenced(shard, ours, theirs)
        try:
            self.supersede(frozenset({theirs}))
        except CheckpointError as unproven:  # we could not renew: not ours to take
            raise EpochFencedError(
                shard, ours.epoch, theirs.epoch, theirs.writer, other_lease=True
            ) from unproven
        return self.stamp


# -- one shard in memory ---------------------------------------------------------------------------


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
class Compaction:
    """A new base: the chunks to write (index -> chunk) and what the head will record."""

    partitions: int
    chunks: dict[int, EncodedChunk] = field(default_factory=dict)
    inline: bytes | None = None
    inline_raw: int = 0
    base_raw: int = 0
    base_rows: int = 0
    kept_raw: int = 0
    chunk_raw: tuple[int, ...] = ()
    """Raw bytes of every chunk after the compaction, by index (kept and written)."""

    def slot_plan(self, manifest: Manifest) -> dict[int, str]:
        """Index -> the inactive slot its chunk goes to."""
        return {index: manifest.inactive_slot(index) for index in sorted(self.chunks)}

    def layout_after(self, manifest: Manifest, written: Mapping[int, tuple[str, Slot]]) -> Layout:
        """The layout the head commits once `written` (index -> slot, record) are durable."""
        slots = dict(manifest.slots)
        active = list(manifest.active[: self.partitions])
        active += ["a"] * (self.partitions - len(active))
        for index, (slot, record) in written.items():
            slots[slot] = record
            active[index] = slot[0]
        new = Manifest(self.partitions, "".join(active), slots)
        return Layout(
            new,
            self.base_rows,
            self.inline,
            self.inline_raw,
            self.base_raw,
            BASE_ENCODING,
            self.chunk_raw,
        )


@dataclass(frozen=True)
class Prepared:
    """A new base encoded between persists (`Store.prepare_compactions`) from a snapshot of the
    rows: the persist that passes the delta bound writes it, with a delta of every row changed
    since the snapshot, instead of encoding the shard's base itself."""

    layout: Layout
    """The stored base it replaces: it is written only while the shard's layout is this one."""
    compaction: Compaction


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
    prepared: Prepared | None = None
    """A new base encoded between persists, ready for the persist that passes the bound."""
    prepared_prior: dict[str, str | None] | None = None
    """Rows changed since the snapshot of `prepared` (or of one being encoded), as `base_prior`."""
    unpreparable: Layout | None = None
    """The base whose successor could not be encoded between persists (an OversizeError): not
    tried again until another base is committed (the persist meets the error itself)."""
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
    delta_growth: int = 0
    """Compressed bytes the last head-only persist added to the delta: what the next one is
    expected to add (`Store.prepare_compactions` prepares a base when it would pass the bound)."""
    delta_allowance: int = 0
    """Compressed delta bytes the head committing the current base carried (a prepared base's
    rows changed since its snapshot; 0 for a base encoded by its persist): the delta bound is
    raised by as much (`delta_bound`)."""

    def note_change(self, key: str, old: str | None) -> None:
        """Record the value a row had before its first change since the base (and since the
        snapshot of a base being written)."""
        if self.base_prior is not None and key not in self.base_prior:
            self.base_prior[key] = old
        if self.inflight_prior is not None and key not in self.inflight_prior:
            self.inflight_prior[key] = old
        if self.prepared_prior is not None and key not in self.prepared_prior:
            self.prepared_prior[key] = old

    @property
    def dirty(self) -> bool:
        return self.generation != self.persisted_generation


def copy_state(state: ShardState) -> ShardState:
    copied = {
        **state.__dict__,
        "rows": dict(state.rows),
        "head_annotations": dict(state.head_annotations),
    }
    for name in ("base_prior", "inflight_prior", "prepared_prior"):
        if copied[name] is not None:
            copied[name] = dict(copied[name])
    return ShardState(**copied)


# -- the plan of a persist -------------------------------------------------------------------------


def delta_bound(layout: Layout, compaction_ratio: float, allowance: int = 0) -> float:
    """The most compressed delta bytes a head may carry before the base is compacted; raised
    by `allowance`, the delta the head that committed a prepared base carried (the rows
    changed since its snapshot), so that prepared bases do not shorten the compaction cycle
    (which would rewrite the changed chunks more often)."""
    return min(compaction_ratio * layout.base_bytes, HEAD_DELTA_MAX_BYTES) + allowance


def head_only(
    layout: Layout,
    delta_bytes: int,
    head_bytes: int,
    compaction_ratio: float,
    allowance: int = 0,
) -> bool:
    """Whether a persist may write only the head (its delta within bounds)."""
    return delta_bytes <= delta_bound(layout, compaction_ratio, allowance) and head_bytes <= (
        CONFIGMAP_VALUE_LIMIT
    )


def next_persist_compacts(
    layout: Layout, head_delta_bytes: int, growth: int, compaction_ratio: float, allowance: int = 0
) -> bool:
    """Whether the next persist is expected to pass the delta bound: the stored head's delta
    grown once more by what the last persist added. Only then is a base prepared between
    persists, so a prepared base lags the rows by about one persist's changes (what the head
    written with it carries), not by half a compaction cycle."""
    bound = delta_bound(layout, compaction_ratio, allowance)
    return growth > 0 and head_delta_bytes + growth > bound


def prepared_fits(row_bytes: float, since: Mapping[str, str | None], bound: float) -> bool:
    """Whether the rows changed since a prepared base's snapshot make a delta that may ride on
    the head committing it: at most half the bound (estimated from the last delta's bytes per
    row), and at most a quarter of an object uncompressed, so that the head can never pass the
    object limit where a base encoded now (the rows in their chunks) would fit. Past that the
    base is too stale to be worth writing, and is encoded anew."""
    raw = sum(len(key) + len(value or "") for key, value in since.items())
    return row_bytes * len(since) <= bound / 2 and raw <= CONFIGMAP_VALUE_LIMIT // 4


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
