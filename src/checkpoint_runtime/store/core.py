"""The checkpoint store: an in-memory map persisted as one shard per collector.

Reads and writes are in memory and mark the owning shard dirty. Persistence (a synchronous
batch, the debounced persist, flush) attempts every dirty shard under one shared deadline,
collects failures into one ExceptionGroup and keeps only the failed shards dirty, so a conflict
in one collector's shard never blocks another's. Each shard write is atomic and guarded by the
shard's version (resourceVersion) and leadership stamp.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

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
    DEFAULT_COMPACTION_RATIO,
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_DEBOUNCE_SECONDS,
    PERSIST_CONCURRENCY,
    SHARD_FORMAT,
)
from checkpoint_runtime.deadline import Deadline
from checkpoint_runtime.errors import (
    CheckpointError,
    ConflictError,
    CorruptShardError,
    DeadlineExceeded,
    EpochFencedError,
    ForeignShardError,
    OversizeError,
    UnconfiguredShardError,
    UnencodableTextError,
    WriteUncertainError,
)
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.keys import shard_key
from checkpoint_runtime.store.fencing import Stamp, check_not_fenced, dominates
from checkpoint_runtime.store.metrics import StoreMetrics


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
    raw_bytes: int = 0
    compressed_bytes: int = 0
    base: codec.Base | None = None
    """The stored base member a delta can be written against (None: the next write is whole)."""
    base_prior: dict[str, str | None] | None = None
    """Every row changed since `base` was written, with its value in the base (None: absent)."""
    inflight_prior: dict[str, str | None] | None = None
    """While a new base is being written: rows changed since its snapshot, as `base_prior`."""

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


def _copy(state: ShardState) -> ShardState:
    copied = {**state.__dict__, "rows": dict(state.rows)}
    for name in ("base_prior", "inflight_prior"):
        if copied[name] is not None:
            copied[name] = dict(copied[name])
    return ShardState(**copied)


def _int_annotation(annotations: Mapping[str, str], key: str) -> int:
    value = annotations.get(key, "0")
    return int(value) if value.isdigit() else 0


class Store:
    """The collectors' checkpoint map over one backend; thread-safe."""

    def __init__(
        self,
        backend: Backend,
        *,
        writer: str,
        epoch: int = 0,
        deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
        debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS,
        metrics: StoreMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        compaction_ratio: float = DEFAULT_COMPACTION_RATIO,
        shards: Iterable[str] | None = None,
        lease_uid: str = "",
    ) -> None:
        if not compaction_ratio >= 0:
            raise ValueError(f"compaction_ratio must be a number >= 0, got {compaction_ratio!r}")
        self.backend = backend
        self.compaction_ratio = compaction_ratio
        """A delta member may grow to this fraction of its base member (compressed) before the
        next persist writes a new base instead; 0 writes every shard whole."""
        self.stamp = Stamp(epoch, writer, lease_uid)
        self._renew_above: Callable[[int], int] | None = None
        """Set by take_ownership: renews our Lease, raising our epoch above the given one."""
        self._superseded: frozenset[Stamp] = frozenset()
        """Stamps we do not dominate but proved older than our term (by a renewal after
        reading them): shards carrying exactly these may be written over."""
        self.deadline_seconds = deadline_seconds
        self.debounce_seconds = debounce_seconds
        self.metrics = metrics if metrics is not None else StoreMetrics()
        self._clock = clock
        self.configured: frozenset[str] | None = None if shards is None else frozenset(shards)
        """Discovery by name: exactly these shards are read on open (get, no list), and keys
        of any other shard are refused; None discovers the store's shards by label (list)."""
        self._shards: dict[str, ShardState] = {}
        self._lock = threading.RLock()
        self._write_locks: dict[str, threading.Lock] = {}
        """Per shard: writes to one shard are serialised, writes to different shards are not."""

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        backend: Backend,
        *,
        writer: str,
        epoch: int = 0,
        deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
        debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS,
        metrics: StoreMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        migrate: bool = True,
        compaction_ratio: float = DEFAULT_COMPACTION_RATIO,
        shards: Iterable[str] | None = None,
        lease_uid: str = "",
    ) -> Store:
        """Load every shard (fail closed, no write on any error), then migrate legacy state.

        One deadline covers discovery, decoding and migration. `shards` (the configured
        collectors' namespaces) makes discovery read exactly those shards by name, for a Role
        that pins ConfigMap access by name and grants no list.
        """
        store = cls(
            backend,
            writer=writer,
            epoch=epoch,
            deadline_seconds=deadline_seconds,
            debounce_seconds=debounce_seconds,
            metrics=metrics,
            clock=clock,
            compaction_ratio=compaction_ratio,
            shards=shards,
            lease_uid=lease_uid,
        )
        deadline = store.new_deadline()
        store.load(deadline)
        if migrate:
            # Imported here: migration builds on Store, and open is its only entry point.
            from checkpoint_runtime.store.migration import migrate_on_open

            migrate_on_open(store, deadline)
        return store

    def new_deadline(self) -> Deadline:
        return Deadline(self.deadline_seconds, self._clock)

    def load(self, deadline: Deadline) -> None:
        """Replace memory with the stored shards; raises before changing anything."""
        loaded = {stored.shard: self._decode(stored) for stored in self._discover(deadline)}
        with self._lock:
            self._shards = loaded
            for state in loaded.values():
                self._observe(state)
            self.metrics.shards.set(len(loaded))

    def _discover(self, deadline: Deadline) -> list[StoredShard]:
        if self.configured is None:
            return self.backend.list_shards(deadline)
        found = (self.backend.read_shard(key, deadline) for key in sorted(self.configured))
        return [stored for stored in found if stored is not None]

    def _decode(self, stored: StoredShard) -> ShardState:
        decoded = codec.decode_stored(stored.shard, stored.blob)
        annotations = stored.annotations
        if annotations.get(ANNOTATION_SHARD_KEY) != stored.shard:
            raise CorruptShardError(stored.shard, "shard-key annotation disagrees with the object")
        if annotations.get(ANNOTATION_FORMAT) != decoded.format:
            raise CorruptShardError(
                stored.shard,
                f"format annotation {annotations.get(ANNOTATION_FORMAT)!r} disagrees with the "
                f"blob's {decoded.format!r}",
            )
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
        )

    # -- the collectors' interface ------------------------------------------------------

    def get(self, key: str) -> str | None:
        with self._lock:
            state = self._shards.get(shard_key(key))
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
        owners = {key: shard_key(key) for key in changes}
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
        read them, and a write would meet one that exists as a conflict)."""
        if self.configured is None:
            return
        unknown = sorted(set(shards) - self.configured)
        if unknown:
            raise UnconfiguredShardError(unknown, why)

    def _mark_dirty(self, state: ShardState, now: float) -> None:
        if not state.dirty:
            state.dirty_since = now
        state.generation += 1

    # -- persistence ------------------------------------------------------------------------

    def dirty_shards(self) -> list[str]:
        with self._lock:
            return sorted(key for key, state in self._shards.items() if state.dirty)

    def persist_due(self) -> bool:
        """Persist all dirty shards once the oldest change is `debounce_seconds` old.

        Called by the runtime's loop (or Debouncer); returns whether it persisted. Coalesces
        every change made within the window into one write per shard.
        """
        with self._lock:
            since = [s.dirty_since for s in self._shards.values() if s.dirty and s.dirty_since]
        if not since or self._clock() - min(since) < self.debounce_seconds:
            return False
        self._persist(self.dirty_shards(), self.new_deadline())
        return True

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
        deposed). Without `renew_above` every shard we do not dominate is refused.
        """
        if renew_above is not None:
            self._renew_above = renew_above
        with self._lock:
            stamped = [s for s in self._shards.values() if s.version is not None]
            needs_proof = [s for s in stamped if not self._may_overwrite(s.stamp)]
        if needs_proof:
            for state in needs_proof:
                if self._renew_above is None or not self.stamp.lease:
                    check_not_fenced(state.key, self.stamp, state.stamp)
                if state.stamp.lease == self.stamp.lease:  # a newer leader of our Lease object
                    check_not_fenced(state.key, self.stamp, state.stamp)
            self._supersede(frozenset(state.stamp for state in needs_proof))
        now = self._clock()
        with self._lock:
            for state in self._shards.values():
                if state.version is not None and state.stamp != self.stamp:
                    self._check_may_overwrite(state.key, state.stamp)
                    self._mark_dirty(state, now)
        self.flush()

    def _supersede(self, stamps: frozenset[Stamp]) -> None:
        """Renew our Lease now, with an epoch above every one of `stamps`: the proof, made after
        they were read, that our term is newer than theirs."""
        assert self._renew_above is not None
        epoch = self._renew_above(max(stamp.epoch for stamp in stamps))
        with self._lock:
            if epoch > self.stamp.epoch:
                self.stamp = Stamp(epoch, self.stamp.writer, self.stamp.lease)
            self._superseded |= stamps

    def _may_overwrite(self, stored: Stamp) -> bool:
        return dominates(self.stamp, stored) or stored in self._superseded

    def _check_may_overwrite(self, shard: str, stored: Stamp) -> None:
        if stored not in self._superseded:
            check_not_fenced(shard, self.stamp, stored)

    def _persist(self, keys: Iterable[str], deadline: Deadline) -> None:
        """Persist `keys` under one shared deadline: different shards concurrently (a small
        pool; the writes are I/O), every failure collected into one ExceptionGroup."""
        ordered = sorted(set(keys))
        started = time.perf_counter()
        errors: list[Exception] = []
        if len(ordered) <= 1:
            for key in ordered:
                try:
                    self._persist_locked(key, deadline)
                except Exception as failure:
                    errors.append(failure)
        else:
            workers = min(PERSIST_CONCURRENCY, len(ordered))
            with ThreadPoolExecutor(workers, thread_name_prefix="checkpoint-persist") as pool:
                futures = [pool.submit(self._persist_locked, key, deadline) for key in ordered]
            for future in futures:  # every shard is attempted; failures are collected
                error = future.exception()
                if isinstance(error, Exception):
                    errors.append(error)
                elif error is not None:
                    raise error
        self.metrics.persist_seconds.observe(time.perf_counter() - started)
        if errors:
            raise ExceptionGroup(f"{len(errors)} shard(s) failed to persist", errors)

    def _write_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._write_locks.setdefault(key, threading.Lock())

    def _persist_locked(self, key: str, deadline: Deadline) -> None:
        """Persist one shard holding its own write lock (waiting at most until the deadline)."""
        lock = self._write_lock(key)
        if not lock.acquire(timeout=max(deadline.remaining(), 0.0)):
            raise DeadlineExceeded(
                f"deadline of {deadline.seconds:g} s exceeded waiting for shard {key!r}'s "
                "previous write"
            )
        try:
            self._persist_one(key, deadline)
        finally:
            lock.release()

    def _persist_one(self, key: str, deadline: Deadline) -> None:
        with self._lock:
            state = self._shards[key]
            if not state.dirty:
                return
            version, stored_stamp, digest = state.version, state.stamp, state.legacy_digest
            stamp = self.stamp
            self._check_may_overwrite(key, stored_stamp)
        encoded, generation = self._encode(state)
        if encoded.compressed_bytes > CONFIGMAP_VALUE_LIMIT:
            self.metrics.oversize_rejections.labels(key).inc()
            with self._lock:
                state.inflight_prior = None
            raise OversizeError(key, encoded.compressed_bytes, CONFIGMAP_VALUE_LIMIT, encoded.rows)
        write = ShardWrite(key, encoded.blob, self._annotations(encoded, digest, stamp))
        try:
            deadline.check(f"writing shard {key!r}")
            if version is None:
                try:
                    result = self.backend.create_shard(write, deadline)
                except ConflictError as exists:
                    write, result = self._take_over_created(write, exists, deadline)
                    stamp = Stamp.from_annotations(key, write.annotations)
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
            with self._lock:
                prior, state.inflight_prior = state.inflight_prior, None
        if result.resolved_uncertain:
            self.metrics.uncertain_writes.labels(key).inc()
        self.metrics.writes.labels(key).inc()
        with self._lock:
            state.version = result.version
            state.stamp = stamp
            state.persisted_generation = max(state.persisted_generation, generation)
            state.raw_bytes, state.compressed_bytes = encoded.raw_bytes, encoded.compressed_bytes
            if encoded.base is not state.base:
                # A new base: later deltas hold the rows changed since its snapshot (unless the
                # shard was replaced wholesale meanwhile: then the next write is whole again).
                state.base = encoded.base if prior is not None else None
                state.base_prior = prior
            if not state.dirty:
                state.dirty_since = None
            self._observe(state, stored_rows=encoded.rows)

    def _encode(self, state: ShardState) -> tuple[codec.EncodedShard, int]:
        """The blob to write and the generation it holds: the stored base plus one delta of
        every row changed since, or (first write, a v1 shard, or a delta past the compaction
        bound or the size limit) a new base of every row."""
        with self._lock:
            generation, base, prior = state.generation, state.base, state.base_prior
            rows = len(state.rows)
            changes = None
            if base is not None and prior is not None:
                current = {row: state.rows.get(row) for row in prior}
                changes = {row: value for row, value in current.items() if value != prior[row]}
        if base is not None and changes is not None:
            try:
                delta = codec.encode_delta(state.key, base, changes, rows)
            except OversizeError:
                delta = None  # would decode past the bound: a new base instead
            if (
                delta is not None
                and delta.delta_bytes <= self.compaction_ratio * len(base.member)
                and delta.compressed_bytes <= CONFIGMAP_VALUE_LIMIT
            ):
                return delta, generation
        with self._lock:
            generation, snapshot = state.generation, dict(state.rows)
            state.inflight_prior = {}
        try:
            return codec.encode_shard(state.key, snapshot), generation
        except BaseException:
            with self._lock:
                state.inflight_prior = None
            raise

    def _take_over_created(
        self, write: ShardWrite, exists: ConflictError, deadline: Deadline
    ) -> tuple[ShardWrite, WriteResult]:
        """Our create met a shard someone else created meanwhile. Written under an older epoch
        of our Lease object (a deposed leader creating the shard of a collector it still ran),
        it is ours to take over: updated over, guarded by the resourceVersion just read. Written
        under another Lease object, the same after a renewal of our Lease proves we lead (and
        raises our epoch above it). Anything else is a conflict, as before.
        """
        try:
            stored = self.backend.read_shard(write.shard, deadline)
        except (ForeignShardError, CorruptShardError) as unreadable:
            raise exists from unreadable  # not a shard of ours: a conflict, never taken over
        if stored is None:
            raise exists
        ours, theirs = self.stamp, Stamp.from_annotations(write.shard, stored.annotations)
        if theirs == ours or (dominates(ours, theirs) and theirs.epoch < ours.epoch):
            pass  # our own create (its answer lost), or an older epoch of our Lease object
        elif theirs in self._superseded:
            pass
        elif ours.other_lease(theirs) and self._renew_above is not None:
            try:
                self._supersede(frozenset({theirs}))
            except CheckpointError as unproven:  # we could not renew: not ours to take
                raise EpochFencedError(
                    write.shard, ours.epoch, theirs.epoch, theirs.writer, other_lease=True
                ) from unproven
            ours = self.stamp
        elif not dominates(ours, theirs):
            raise EpochFencedError(
                write.shard, ours.epoch, theirs.epoch, theirs.writer, ours.other_lease(theirs)
            )
        else:
            raise exists  # the same epoch by another writer: a conflict
        annotations = {**write.annotations, **ours.annotations()}
        taken = ShardWrite(write.shard, write.blob, annotations)
        return taken, self.backend.update_shard(taken, stored.version, deadline)

    def _annotations(
        self, encoded: codec.EncodedShard, digest: str | None, stamp: Stamp
    ) -> dict[str, str]:
        annotations = {
            ANNOTATION_SHARD_KEY: encoded.shard,
            ANNOTATION_FORMAT: SHARD_FORMAT,
            ANNOTATION_LEASE: self.backend.lease_name,
            ANNOTATION_RAW_BYTES: str(encoded.raw_bytes),
            ANNOTATION_COMPRESSED_BYTES: str(encoded.compressed_bytes),
            ANNOTATION_ROWS: str(encoded.rows),
            ANNOTATION_WRITE_ID: uuid.uuid4().hex,
            **stamp.annotations(),
        }
        if digest is not None:
            annotations[ANNOTATION_LEGACY_DIGEST] = digest
        return annotations

    def _observe(self, state: ShardState, stored_rows: int | None = None) -> None:
        """Export the stored copy's sizes (rows as written, not as changed since)."""
        rows = len(state.rows) if stored_rows is None else stored_rows
        self.metrics.observe_shard(state.key, state.raw_bytes, state.compressed_bytes, rows)

    # -- introspection and migration support ----------------------------------------------

    def shard_states(self) -> dict[str, ShardState]:
        """A snapshot of every shard (copies; for inspect, migration and tests)."""
        with self._lock:
            return {key: _copy(state) for key, state in self._shards.items()}

    def install(self, key: str, rows: Mapping[str, str], legacy_digest: str | None) -> None:
        """Replace a shard's rows wholesale (migration) and mark it dirty."""
        for row in rows:
            if shard_key(row) != key:
                raise CorruptShardError(key, f"row {row!r} belongs to shard {shard_key(row)!r}")
        with self._lock:
            state = self._shards.setdefault(key, ShardState(key))
            state.rows = dict(rows)
            state.base = state.base_prior = state.inflight_prior = None  # written whole next
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
            size = codec.encode_shard(key, rows).compressed_bytes
            if size > CONFIGMAP_VALUE_LIMIT:
                self.metrics.oversize_rejections.labels(key).inc()
                errors.append(OversizeError(key, size, CONFIGMAP_VALUE_LIMIT, len(rows)))
        if errors:
            raise ExceptionGroup(f"{len(errors)} shard(s) cannot fit", errors)

    def persist_shards(self, keys: Iterable[str], deadline: Deadline) -> None:
        """Persist the given shards under `deadline` (migration's writes)."""
        self._persist(keys, deadline)


class Debouncer:
    """A background thread calling `persist_due` while `leading()` holds (stop writing as
    soon as the lease cannot be renewed). The first error goes to `on_error` and ends the
    loop: the runtime decides, and ends its lifecycle."""

    def __init__(
        self,
        store: Store,
        on_error: Callable[[BaseException], None],
        interval: float | None = None,
        leading: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.on_error = on_error
        self.leading = leading
        self.interval = interval if interval is not None else max(store.debounce_seconds / 4, 0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkpoint-debouncer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self.leading():
                return
            try:
                self.store.persist_due()
            except BaseException as error:  # handed to the runtime, which ends its lifecycle
                self.on_error(error)
                return
