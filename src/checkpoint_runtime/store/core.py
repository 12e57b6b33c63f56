"""The checkpoint store: an in-memory map persisted as one shard per collector.

Reads and writes are in memory and mark the owning shard dirty. Persistence (a synchronous
batch, the debounced persist, flush) attempts every dirty shard under one shared deadline,
collects failures into one ExceptionGroup and keeps only the failed shards dirty, so a conflict
in one collector's shard never blocks another's. Each shard write is atomic and guarded by the
shard's version (resourceVersion) and leadership stamp.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from checkpoint_runtime.backends.base import Backend, ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.constants import (
    ANNOTATION_COMPRESSED_BYTES,
    ANNOTATION_FORMAT,
    ANNOTATION_LEASE,
    ANNOTATION_LEGACY_DIGEST,
    ANNOTATION_RAW_BYTES,
    ANNOTATION_ROWS,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITE_ID,
    CONFIGMAP_VALUE_LIMIT,
    PERSIST_CONCURRENCY,
    SHARD_FORMAT,
)
from checkpoint_runtime.errors import (
    CheckpointError,
    ConflictError,
    CorruptShardError,
    DeadlineExceeded,
    ForeignHeadError,
    ForeignShardError,
    OversizeError,
    UnconfiguredShardError,
    UnencodableTextError,
    WriteUncertainError,
)
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.codec_v3 import Manifest, Slot
from checkpoint_runtime.format.naming import shard_key, validate_shard_key
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import chunked, opening, planner
from checkpoint_runtime.store.budget import DueShard, WriteBudget, expected_bytes, object_bytes
from checkpoint_runtime.store.metrics import StoreMetrics
from checkpoint_runtime.store.migration import migrate_on_open
from checkpoint_runtime.store.options import StoreOptions
from checkpoint_runtime.store.planner import Fence, Layout, ShardState, Stamp, copy_state


def _id() -> str:
    return uuid.uuid4().hex


@dataclass
class Plan:
    """One persist of one shard: the head to write (with its delta), or a compaction."""

    generation: int
    rows: int
    layout: Layout | None
    head: codec_v3.EncodedHead | None
    compaction: planner.Compaction | None = None
    delta_rows: int = 0
    """Rows in the head's delta (what the write budget's estimate scales by)."""
    since: dict[str, str | None] = field(default_factory=dict)
    """The delta a compaction's head carries: the rows changed since a prepared base's
    snapshot (empty for a base encoded by this persist)."""


class Store:
    """The collectors' checkpoint map over one backend; thread-safe."""

    def __init__(
        self, backend: Backend, options: StoreOptions | None = None, **overrides: Any
    ) -> None:
        """`options` (or its fields as keywords, which override it) say how the store writes."""
        options = replace(options or StoreOptions(), **overrides)
        if options.shards is not None and not isinstance(options.shards, frozenset):
            options = replace(options, shards=frozenset(options.shards))
        self.options = options
        self.backend = backend
        self.compaction_ratio = options.compaction_ratio
        """A delta may grow to this fraction of its base (compressed) before the next persist
        writes a new base instead; 0 writes every shard whole."""
        self.fence = Fence(Stamp(options.epoch, options.writer, options.lease_uid))
        self.deadline_seconds = options.deadline_seconds
        self.debounce_seconds = options.debounce_seconds
        self.metrics = options.metrics if options.metrics is not None else StoreMetrics()
        self.metrics.write_budget.set(options.write_budget_bytes_per_second)
        self._clock = options.clock
        self.configured: frozenset[str] | None = options.shards
        """Discovery by name: exactly these shards are read on open (get, no list), and keys
        of any other shard are refused; None discovers the store's shards by label (list)."""
        self._shards: dict[str, ShardState] = {}
        self._lock = threading.RLock()
        self._write_locks: dict[str, threading.Lock] = {}
        """Per shard: writes to one shard are serialised, writes to different shards are not."""
        self.budget = WriteBudget(options.write_budget_bytes_per_second, self._clock)
        self.sealing = options.sealing
        """Heads are sealed when written and checked when read (store/seal.py); None: not."""
        self.foreign: dict[str, ForeignHeadError] = {}
        """Shards whose head the last load refused as not written by this store (not sealed
        with the store key): never read; writes to them are refused."""

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        backend: Backend,
        options: StoreOptions | None = None,
        *,
        migrate: bool = True,
        **overrides: Any,
    ) -> Store:
        """Load every shard (fail closed, no write on any error), then migrate legacy state.

        One deadline covers discovery, decoding and migration. `shards` (the configured
        collectors' namespaces) makes discovery read exactly those shards by name, for a Role
        that pins ConfigMap access by name and grants no list.
        """
        store = cls(backend, options, **overrides)
        deadline = store.new_deadline()
        store.load(deadline)
        if migrate:
            migrate_on_open(store, deadline)
        return store

    @property
    def stamp(self) -> Stamp:
        """What our writes are stamped with: writer, epoch and the uid of our Lease object."""
        return self.fence.stamp

    @stamp.setter
    def stamp(self, stamp: Stamp) -> None:
        self.fence.stamp = stamp

    def new_deadline(self) -> Deadline:
        return Deadline(self.deadline_seconds, self._clock)

    def load(self, deadline: Deadline) -> None:
        """Replace memory with the stored shards; raises before changing anything."""
        loaded: dict[str, ShardState] = {}
        foreign: dict[str, ForeignHeadError] = {}
        found = opening.discover(self.backend, self.configured, deadline)
        found = [stored for stored in found if not self._refused(stored, foreign)]
        heads = opening.heads(found, self.options.kinds)
        slots = opening.slots(self.backend, heads, self.configured, deadline)
        for stored in found:
            head = heads.pop(stored.shard, None)
            try:
                state = opening.decode(
                    slots, stored, deadline, head, self.options.kinds, self.sealing
                )
            except ForeignHeadError as refused:  # rewritten by someone else while we read
                foreign[stored.shard] = refused
                continue
            if state is not None:
                loaded[state.key] = state
        with self._lock:
            for gone in set(self._shards) - set(loaded):
                self.metrics.forget_shard(gone)
            for shard in set(self.foreign) - set(foreign):
                self.metrics.foreign.remove(shard)
            for shard in foreign:
                self.metrics.foreign.labels(shard).set(1)
            self.foreign = foreign
            self._shards = loaded
            for state in loaded.values():
                self._observe(state)
            self.metrics.shards.set(len(loaded))

    def _refused(self, stored: StoredShard, foreign: dict[str, ForeignHeadError]) -> bool:
        """Whether `stored` is a head this store did not write (recorded in `foreign`)."""
        if self.sealing is None:
            return False
        try:
            self.sealing.check(stored.shard, stored.name, stored.blob, stored.annotations)
        except ForeignHeadError as refused:
            foreign[stored.shard] = refused
            return True
        return False

    def reload(self, shard: str) -> None:
        """Replace one shard in memory with its stored copy (its rows, version and stamp).

        The way back after a ConflictError for a process that keeps running: the stale version
        that made every later write of the shard conflict is replaced by the stored one. Changes
        to that shard not yet persisted are dropped (re-apply those still wanted); other shards
        are untouched. The epoch fence still holds: a shard stamped with a newer epoch stays
        unwritable. A shard that no longer exists is dropped from memory with its gauges.
        Raises (changing nothing) if the stored copy cannot be read or decoded.
        """
        validate_shard_key(shard, self.options.kinds)
        self.require_configured([shard], "it was reloaded")
        deadline = self.new_deadline()
        with self._writing(shard, deadline, "write in flight"):
            stored = self.backend.read_shard(shard, deadline)
            state = opening.decode(
                self.backend, stored, deadline, kinds=self.options.kinds, sealing=self.sealing
            )
            with self._lock:
                if self.foreign.pop(shard, None) is not None:
                    self.metrics.foreign.remove(shard)
                if state is None:
                    self._shards.pop(shard, None)
                    self.metrics.forget_shard(shard)
                else:
                    self._shards[shard] = state
                    self._observe(state)
                self.metrics.shards.set(len(self._shards))

    # -- the collectors' interface ------------------------------------------------------

    def get(self, key: str) -> str | None:
        with self._lock:
            state = self._shards.get(shard_key(key, self.options.kinds))
            return None if state is None else state.rows.get(key)

    def items(self, prefix: str = "") -> list[tuple[str, str]]:
        """Rows whose key starts with `prefix`, sorted by key."""
        with self._lock:
            found = [
                (key, value)
                for shard, state in self._shards.items()
                if prefix.startswith(shard + "/") or (shard + "/").startswith(prefix)
                for key, value in state.rows.items()
                if key.startswith(prefix)
            ]
        return sorted(found)

    def set(self, key: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"checkpoint values are strings, got {type(value).__name__}")
        self._apply({key: value})

    def delete(self, key: str) -> None:
        self._apply({key: None})

    def batch(self, changes: Mapping[str, str | None]) -> None:
        """Apply `changes` (None deletes) and persist every touched shard before returning.

        All keys are checked before anything changes. The changes of one collector land in one
        shard write; on failure they stay in memory and dirty, and an ExceptionGroup is raised.
        """
        touched = self._apply(changes)
        self._persist(touched, self.new_deadline())

    def _apply(self, changes: Mapping[str, str | None]) -> list[str]:
        owners = {key: shard_key(key, self.options.kinds) for key in changes}
        self.require_configured(owners.values(), "a key of it was set")
        for key, value in changes.items():
            if value is not None and not isinstance(value, str):
                raise TypeError(f"value of {key!r} is {type(value).__name__}, not a string")
            try:
                key.encode("utf-8")
                if value is not None:
                    value.encode("utf-8")
            except UnicodeEncodeError:
                raise UnencodableTextError(key) from None
        now = self._clock()
        with self._lock:
            for key, value in changes.items():
                state = self._shards.get(owners[key])
                if state is None:
                    state = self._shards[owners[key]] = ShardState(owners[key])
                old = state.rows.get(key)
                if old == value:
                    continue
                state.note_change(key, old)
                if value is None:
                    del state.rows[key]
                else:
                    state.rows[key] = value
                self._mark_dirty(state, now)
            self.metrics.shards.set(len(self._shards))
        return sorted(frozenset(owners.values()))

    def require_configured(self, shards: Iterable[str], why: str) -> None:
        """With discovery by name, refuse shards the store was not configured with (it has not
        read them, and a write would meet one that exists as a conflict); and refuse a shard
        whose head is foreign (the write would meet, or replace, an object we did not write)."""
        shards = list(shards)
        with self._lock:
            refused = [self.foreign[shard] for shard in shards if shard in self.foreign]
        if refused:
            raise refused[0]
        if self.configured is None:
            return
        unknown = sorted(set(shards) - self.configured)
        if unknown:
            raise UnconfiguredShardError(unknown, why)

    def _mark_dirty(self, state: ShardState, now: float) -> None:
        if not state.dirty:
            state.dirty_since = now
        if state.changed_since_snapshot is None:
            state.changed_since_snapshot = now
        state.generation += 1

    # -- persistence ------------------------------------------------------------------------

    def dirty_shards(self) -> list[str]:
        with self._lock:
            return sorted(key for key, state in self._shards.items() if state.dirty)

    def persist_due(self) -> bool:
        """Persist the dirty shards once the oldest change is `debounce_seconds` old.

        Called by the runtime's loop (or Debouncer); returns whether it persisted. Coalesces
        every change made within the window into one write per shard. Under a write budget
        the busiest shards may wait (their debounce stretched) until the budget has room.
        """
        with self._lock:
            dirty = {key: s for key, s in self._shards.items() if s.dirty}
            since = [s.dirty_since for s in dirty.values() if s.dirty_since is not None]
            expected = {key: expected_bytes(self._due(s)) for key, s in dirty.items()}
        if not since or self._clock() - min(since) < self.debounce_seconds:
            return False
        admitted = self.budget.admit(expected)
        if not admitted:
            return False
        self._persist(admitted, self.new_deadline())
        return True

    def _due(self, state: ShardState) -> DueShard:
        """What the write budget's estimate needs of a due shard (under the store's lock)."""
        layout, prior = state.layout, state.base_prior
        return DueShard(
            head_bytes=len(state.head_blob),
            head_annotation_bytes=sum(len(k) + len(v) for k, v in state.head_annotations.items()),
            head_delta_bytes=state.head_delta_bytes,
            row_bytes=state.delta_row_bytes,
            changed_rows=len(state.rows) if prior is None else len(prior),
            base_bytes=state.compressed_bytes if layout is None else layout.base_bytes,
            base_rows=len(state.rows) if layout is None else layout.base_rows,
            chunks=0 if layout is None or layout.inline is not None else layout.manifest.partitions,
            delta_bound=0.0
            if layout is None
            else planner.delta_bound(layout, self.compaction_ratio, state.delta_allowance),
            whole=layout is None or prior is None or planner.must_compact(layout),
        )

    def flush(self) -> None:
        """Persist every dirty shard now (shutdown)."""
        self._persist(self.dirty_shards(), self.new_deadline())

    def take_ownership(self, renew_above: Callable[[int], int] | None = None) -> None:
        """Restamp every stored shard with our epoch before collectors run.

        Afterwards a deposed leader's write conflicts on resourceVersion, and a deposed leader
        that re-reads sees the newer epoch and refuses.

        `renew_above(epoch)` (the runtime passes its elector's) renews our Lease with a guarded
        update and returns our epoch, raised above `epoch` if need be. It is called when a shard
        was stamped under another Lease object of our Lease's name (the Lease was deleted and
        recreated), or without one and with a newer epoch: the renewal, made after the shards
        were read, proves we are the current leader, and the raised epoch keeps epochs growing.
        A shard stamped with a newer epoch of our own Lease object is always refused (we were
        deposed); so is every shard we do not dominate when no `renew_above` is given.

        A store adopting unsealed heads (a new store key, `Sealing.adopt`) seals every one here
        (each is restamped) and adopts nothing after.
        """
        if renew_above is not None:
            self.fence.renew_above = renew_above
        with self._lock:
            stamped = [s for s in self._shards.values() if s.version is not None]
        unproven = [s for s in stamped if not self.fence.may_overwrite(s.stamp)]
        for state in unproven:
            self.fence.provable(state.key, state.stamp)
        if unproven:
            self.fence.supersede(frozenset(state.stamp for state in unproven))
        now = self._clock()
        with self._lock:
            for state in self._shards.values():
                if state.version is not None and state.stamp != self.stamp:
                    self.fence.check(state.key, state.stamp)
                    self._mark_dirty(state, now)
        self.flush()
        if self.sealing is not None and self.sealing.adopt:
            # every head is sealed now: from here on an unsealed one is foreign
            self.sealing = replace(self.sealing, adopt=False)

    def _persist(self, keys: Iterable[str], deadline: Deadline) -> None:
        """Persist `keys` under one shared deadline: different shards concurrently (a small
        pool; the writes are I/O), every failure collected into one ExceptionGroup."""
        ordered = sorted(set(keys))
        started = time.perf_counter()
        errors: dict[str, Exception] = {}
        if len(ordered) <= 1:
            for key in ordered:
                try:
                    self._persist_locked(key, deadline)
                except Exception as failure:
                    errors[key] = failure
        else:
            workers = min(PERSIST_CONCURRENCY, len(ordered))
            with ThreadPoolExecutor(workers, thread_name_prefix="checkpoint-persist") as pool:
                futures = {key: pool.submit(self._persist_locked, key, deadline) for key in ordered}
            for key, future in futures.items():  # every shard is attempted; failures collected
                error = future.exception()
                if isinstance(error, Exception):
                    errors[key] = error
                elif error is not None:
                    raise error
        self.metrics.persist_seconds.observe(time.perf_counter() - started)
        if errors:
            raise ExceptionGroup(
                f"{len(errors)} of {len(ordered)} shard(s) failed to persist ({', '.join(errors)})",
                list(errors.values()),
            )

    @contextlib.contextmanager
    def _writing(self, key: str, deadline: Deadline, waiting_for: str) -> Iterator[None]:
        """Hold shard `key`'s write lock, waiting for it at most until the deadline."""
        with self._lock:
            lock = self._write_locks.setdefault(key, threading.Lock())
        if not lock.acquire(timeout=max(deadline.remaining(), 0.0)):
            raise DeadlineExceeded(
                f"deadline of {deadline.seconds:g} s exceeded waiting for shard {key!r}'s "
                f"{waiting_for}"
            )
        try:
            yield
        finally:
            lock.release()

    def _persist_locked(self, key: str, deadline: Deadline) -> None:
        """Persist one shard holding its own write lock (waiting at most until the deadline)."""
        with self._writing(key, deadline, "previous write"):
            self._persist_one(key, deadline)

    def _persist_one(self, key: str, deadline: Deadline) -> None:
        with self._lock:
            state = self._shards[key]
            if not state.dirty:
                return
            stored_stamp = state.stamp
        self.fence.check(key, stored_stamp)
        plan = self._plan(state)
        try:
            self._write_plan(state, plan, deadline)
        except BaseException:
            if plan.compaction is not None:
                with self._lock:
                    state.inflight_prior = None
            raise

    def _plan(self, state: ShardState) -> Plan:
        """What this persist writes: the head with a delta of every row changed since the base,
        or (first write, a v1/v2 shard, a delta past its bound) a compaction into a new base."""
        with self._lock:
            generation, layout, prior = state.generation, state.layout, state.base_prior
            allowance = state.delta_allowance
            state.changed_since_snapshot = None
            rows = len(state.rows)
            changes = None
            if layout is not None and prior is not None:
                changes = planner.changes_since(state.rows, prior)
        if layout is not None and changes is not None and not planner.must_compact(layout):
            try:
                head = codec_v3.encode_head(
                    state.key,
                    layout.manifest,
                    layout.base_rows,
                    layout.inline,
                    layout.inline_raw,
                    changes,
                    rows,
                )
            except OversizeError:
                head = None  # would decode past the bound: compact instead
            if head is not None and planner.head_only(
                layout, head.delta_bytes, len(head.blob), self.compaction_ratio, allowance
            ):
                return Plan(generation, rows, layout, head, delta_rows=len(changes))
        with self._lock:
            plan = self._prepared_plan(state, layout)
            if plan is not None:
                return plan
            generation, snapshot = state.generation, dict(state.rows)
            changed = None if layout is None or prior is None else set(prior)
            state.changed_since_snapshot = None
            state.inflight_prior = {}
        try:
            compaction = chunked.encode_compaction(
                state.key, snapshot, layout, changed, self.options
            )
        except BaseException as error:
            with self._lock:
                state.inflight_prior = None
            if isinstance(error, OversizeError):
                self.metrics.oversize_rejections.labels(state.key).inc()
            raise
        return Plan(generation, len(snapshot), layout, None, compaction)

    def _prepared_plan(self, state: ShardState, layout: Layout | None) -> Plan | None:
        """The compaction prepared between persists, when it still fits (under the store's
        lock): the persist writes its base with a delta of the rows changed since its snapshot.
        The rows changed from then on become the new base's `base_prior` once it commits."""
        prepared, since_prior = state.prepared, state.prepared_prior
        if prepared is None or since_prior is None or layout is None:
            return None  # none prepared, or one still being encoded (it stays in flight)
        state.prepared = state.prepared_prior = None
        if prepared.layout is not layout or state.base_prior is None:
            return None  # stale: a base committed since its snapshot, or the rows replaced
        since = planner.changes_since(state.rows, since_prior)
        bound = planner.delta_bound(layout, self.compaction_ratio)
        if not planner.prepared_fits(state.delta_row_bytes, since, bound):
            return None
        state.changed_since_snapshot = None
        state.inflight_prior = since_prior
        compaction = prepared.compaction
        return Plan(state.generation, len(state.rows), layout, None, compaction, len(since), since)

    def prepare_compactions(self, keys: Iterable[str] | None = None) -> int:
        """Encode now, between persists, the new base of every shard whose next persist is
        expected to pass its delta bound (`keys`: of these shards, whenever the base is known),
        so that the persist passing it writes the prepared base with a delta of the rows changed
        since, and no single persist pays for re-encoding a whole shard. The runtime's debounce
        loop calls it when nothing is due. Returns how many bases were prepared; an encoding
        that fails prepares nothing (the persist meets, and raises, the same error)."""
        with self._lock:
            candidates = sorted(self._shards if keys is None else set(keys) & set(self._shards))
        prepared = 0
        for key in candidates:
            with self._lock:
                found = self._shards.get(key)
                if found is None:
                    continue  # dropped meanwhile (a reload of a shard that is gone)
                state = found
                layout, prior = state.layout, state.base_prior
                if layout is None or not prior or planner.must_compact(layout):
                    continue  # no stored base, nothing changed since it, or compacted whole
                if state.prepared_prior is not None or state.unpreparable is layout:
                    continue  # prepared already, being prepared, or failed on this base
                if keys is None and not planner.next_persist_compacts(
                    layout,
                    state.head_delta_bytes,
                    state.delta_growth,
                    self.compaction_ratio,
                    state.delta_allowance,
                ):
                    continue
                snapshot, changed = dict(state.rows), set(prior)
                since_prior: dict[str, str | None] = {}
                state.prepared_prior = since_prior
            try:
                compaction = chunked.encode_compaction(key, snapshot, layout, changed, self.options)
            except CheckpointError:
                compaction = None
            del snapshot
            with self._lock:  # only this call sets `prepared` while `prepared_prior` is ours
                if compaction is None:
                    state.prepared_prior, state.unpreparable = None, layout
                    continue
                state.prepared = planner.Prepared(layout, compaction)
                prepared += 1
        return prepared

    def _write_plan(self, state: ShardState, plan: Plan, deadline: Deadline) -> None:
        key = state.key
        with self._lock:
            version, stored_stamp, digest = state.version, state.stamp, state.legacy_digest
        stamp = self.stamp
        sent = 0
        layout, head = plan.layout, plan.head
        compaction = plan.compaction
        try:
            if compaction is not None:
                manifest = layout.manifest if layout is not None else Manifest()
                written: dict[int, tuple[str, Slot]] = {}
                if compaction.chunks:
                    version, stored_stamp, sent = self._claim_head(
                        state, version, stored_stamp, deadline
                    )
                    writes = {
                        index: (
                            slot,
                            chunked.slot_write(key, slot, compaction.chunks[index], _id()),
                        )
                        for index, slot in compaction.slot_plan(manifest).items()
                    }
                    written = chunked.write_slots(
                        self.backend,
                        key,
                        manifest,
                        writes,
                        self._prover(key, version, deadline),
                        deadline,
                    )
                    sent += sum(
                        object_bytes(len(write.blob), write.annotations)
                        for _, write in writes.values()
                    )
                    self.metrics.api_bytes_written.labels(key).inc(
                        sum(len(write.blob) for _, write in writes.values())
                    )
                layout = compaction.layout_after(manifest, written)
                head = codec_v3.encode_head(
                    key,
                    layout.manifest,
                    layout.base_rows,
                    layout.inline,
                    layout.inline_raw,
                    plan.since,
                    plan.rows,
                )
            assert head is not None
            assert layout is not None
            if len(head.blob) > CONFIGMAP_VALUE_LIMIT:
                raise OversizeError(key, len(head.blob), CONFIGMAP_VALUE_LIMIT, plan.rows)
            raw = head.raw_bytes + (layout.base_raw if layout.inline is None else 0)
            write = ShardWrite(
                key, head.blob, self._annotations(key, raw, head, plan.rows, digest, stamp)
            )
            deadline.check(f"writing shard {key!r}")
            if version is None:
                try:
                    result = self.backend.create_shard(write, deadline)
                except ConflictError as exists:
                    stamp, result = self._take_over_created(write, exists, deadline)
            else:
                result = self.backend.update_shard(write, version, deadline)
        except ConflictError:
            self.metrics.conflicts.labels(key).inc()
            raise
        except WriteUncertainError:
            self.metrics.uncertain_writes.labels(key).inc()
            raise
        except OversizeError:
            self.metrics.oversize_rejections.labels(key).inc()
            raise
        finally:
            if sent:
                self.budget.record(key, sent)
        if result.resolved_uncertain:
            self.metrics.uncertain_writes.labels(key).inc()
        self.metrics.writes.labels(key).inc()
        self.metrics.api_bytes_written.labels(key).inc(len(head.blob))
        self.budget.record(key, object_bytes(len(head.blob), write.annotations))
        if compaction is not None and compaction.chunks:
            self.metrics.compactions.labels(key).inc()
        with self._lock:
            state.version = result.version
            state.stamp = stamp
            state.head_blob, state.head_annotations = head.blob, dict(write.annotations)
            state.last_write_bytes = len(head.blob) + (
                0 if compaction is None else sum(len(c.blob) for c in compaction.chunks.values())
            )
            if compaction is None:
                state.delta_growth = max(0, head.delta_bytes - state.head_delta_bytes)
            state.head_delta_bytes = head.delta_bytes
            if plan.delta_rows:
                state.delta_row_bytes = head.delta_bytes / plan.delta_rows
            state.persisted_generation = max(state.persisted_generation, plan.generation)
            state.raw_bytes = raw
            state.compressed_bytes = len(head.blob) + (
                layout.manifest.chunk_bytes if layout.inline is None else 0
            )
            state.base = None
            if compaction is not None:
                # A new base: later deltas hold the rows changed since its snapshot (unless the
                # shard was replaced wholesale meanwhile: then the next write is whole again).
                state.layout = layout  # what the head names: R1 plans from it
                state.base_prior = state.inflight_prior
                state.inflight_prior = None
                state.delta_allowance = head.delta_bytes  # a prepared base's lag, else 0
            # Still dirty: changed while the write was in flight. Those changes wait their own
            # debounce from when they were made, not from the change the write carried.
            changed = state.changed_since_snapshot
            if not state.dirty:
                state.dirty_since = None
            else:
                state.dirty_since = changed if changed is not None else self._clock()
            self._observe(state, stored_rows=plan.rows)

    def _claim_head(
        self, state: ShardState, version: str | None, stored: Stamp, deadline: Deadline
    ) -> tuple[str | None, Stamp, int]:
        """Before any chunk slot is written, the head must be committed under our stamp in our
        term: then no older writer's head commit can succeed any more. A head stamped by
        another writer or term is re-sent as it is, with our stamp, guarded by its version; a
        shard never written is created first with no rows (its rows follow in the same persist).
        Returns the head's version and stamp, and the bytes sent."""
        stamp = self.stamp
        if version is not None and stored == stamp:
            return version, stored, 0
        key = state.key
        if version is None:
            head = codec_v3.encode_head(key, Manifest(), 0, *codec_v3.encode_inline(key, {}), {}, 0)
            annotations = self._annotations(key, head.raw_bytes, head, 0, None, stamp)
            write = ShardWrite(key, head.blob, annotations)
            try:
                result = self.backend.create_shard(write, deadline)
            except ConflictError as exists:
                stamp, result = self._take_over_created(write, exists, deadline)
        else:
            annotations = self._sealed(
                key,
                state.head_blob,
                {**state.head_annotations, **stamp.annotations(), ANNOTATION_WRITE_ID: _id()},
            )
            write = ShardWrite(key, state.head_blob, annotations)
            result = self.backend.update_shard(write, version, deadline)
        self.metrics.api_bytes_written.labels(key).inc(len(write.blob))
        with self._lock:
            state.version, state.stamp = result.version, stamp
            state.head_annotations = dict(annotations)
            if version is None:
                state.head_blob = write.blob
        return result.version, stamp, object_bytes(len(write.blob), write.annotations)

    def _prover(self, key: str, version: str | None, deadline: Deadline) -> chunked.Prove:
        """The re-proof made after reading a slot and before writing it: a guarded renewal of
        our Lease (when we lead by one), then the head, read again, still the one we hold."""

        def prove() -> None:
            renew = self.fence.renew_above
            if renew is not None:
                try:
                    renew(self.stamp.epoch - 1)
                except Exception as lost:
                    raise ConflictError(
                        key, f"could not re-prove leadership before writing a chunk slot: {lost}"
                    ) from lost
            stored = self.backend.read_shard(key, deadline)
            if (None if stored is None else stored.version) != version:
                raise ConflictError(key, "the head changed while its chunk slots were written")

        return prove

    def _take_over_created(
        self, write: ShardWrite, exists: ConflictError, deadline: Deadline
    ) -> tuple[Stamp, WriteResult]:
        """Our create met a shard someone created meanwhile: if the fence makes it ours to
        take (a deposed writer's), write over it, guarded by the version just read; if not,
        the conflict (or a newer leader's fence) stands."""
        try:
            stored = self.backend.read_shard(write.shard, deadline)
        except (ForeignShardError, CorruptShardError) as unreadable:
            raise exists from unreadable  # not a shard of ours: a conflict, never taken over
        if stored is None:
            raise exists
        if self.sealing is not None:  # a neighbour's object under our shard's name: named
            self.sealing.check(stored.shard, stored.name, stored.blob, stored.annotations)
        theirs = Stamp.from_annotations(write.shard, stored.annotations)
        stamp = self.fence.take_over_created(write.shard, theirs)
        if stamp is None:
            raise exists
        annotations = self._sealed(
            write.shard, write.blob, {**write.annotations, **stamp.annotations()}
        )
        taken = ShardWrite(write.shard, write.blob, annotations)
        return stamp, self.backend.update_shard(taken, stored.version, deadline)

    def _annotations(
        self,
        key: str,
        raw_bytes: int,
        head: codec_v3.EncodedHead,
        rows: int,
        digest: str | None,
        stamp: Stamp,
    ) -> dict[str, str]:
        annotations = {
            ANNOTATION_SHARD_KEY: key,
            ANNOTATION_FORMAT: SHARD_FORMAT,
            ANNOTATION_LEASE: self.backend.lease_name,
            ANNOTATION_RAW_BYTES: str(raw_bytes),
            ANNOTATION_COMPRESSED_BYTES: str(len(head.blob)),
            ANNOTATION_ROWS: str(rows),
            ANNOTATION_WRITE_ID: _id(),
            **stamp.annotations(),
        }
        if digest is not None:
            annotations[ANNOTATION_LEGACY_DIGEST] = digest
        return self._sealed(key, head.blob, annotations)

    def _sealed(self, key: str, blob: bytes, annotations: dict[str, str]) -> dict[str, str]:
        """A head's annotations with its seal, when the store seals."""
        return annotations if self.sealing is None else self.sealing.sealed(key, blob, annotations)

    def _observe(self, state: ShardState, stored_rows: int | None = None) -> None:
        """Export the stored copy's sizes (rows as written, not as changed since)."""
        rows = len(state.rows) if stored_rows is None else stored_rows
        chunks = 0 if state.layout is None else state.layout.manifest.partitions
        capacity = CONFIGMAP_VALUE_LIMIT * (self.options.max_chunks if chunks else 1)
        self.metrics.observe_shard(
            state.key, state.raw_bytes, state.compressed_bytes, rows, capacity
        )
        self.metrics.chunks.labels(state.key).set(chunks)

    # -- introspection and migration support ----------------------------------------------

    def shard_states(self) -> dict[str, ShardState]:
        """A snapshot of every shard (copies; for inspect, migration and tests)."""
        with self._lock:
            return {key: copy_state(state) for key, state in self._shards.items()}

    def install(self, key: str, rows: Mapping[str, str], legacy_digest: str | None) -> None:
        """Replace a shard's rows wholesale (migration) and mark it dirty."""
        for row in rows:
            if (owner := shard_key(row, self.options.kinds)) != key:
                raise CorruptShardError(key, f"row {row!r} belongs to shard {owner!r}")
        with self._lock:
            state = self._shards.setdefault(key, ShardState(key))
            state.rows = dict(rows)
            # Written whole next; the layout stays: its active slots must never be written.
            state.base = state.base_prior = state.inflight_prior = None
            state.legacy_digest = legacy_digest
            self._mark_dirty(state, self._clock())
            self.metrics.shards.set(len(self._shards))

    def check_fits(self, keys: Iterable[str]) -> None:
        """Raise an ExceptionGroup of OversizeError for every given shard that could not be
        written, before anything is (migration: no error path writes during open)."""
        errors: list[Exception] = []
        for key in sorted(keys):
            with self._lock:
                rows = dict(self._shards[key].rows)
            try:
                chunked.encode_compaction(key, rows, None, None, self.options)
            except OversizeError as error:
                self.metrics.oversize_rejections.labels(key).inc()
                errors.append(error)
        if errors:
            raise ExceptionGroup(f"{len(errors)} shard(s) cannot fit", errors)

    def persist_shards(self, keys: Iterable[str], deadline: Deadline) -> None:
        """Persist the given shards under `deadline` (migration's writes)."""
        self._persist(keys, deadline)
