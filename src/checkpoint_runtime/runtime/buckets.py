"""The runtime with several leadership buckets (`store.buckets` > 1): one replica leads the
buckets the placement rule gives it (`election.buckets`), each as a store of its own.

Every election round (one retry period, jittered) the replica:

1. reads the store's Lease (named `store.leaseName`): it must record this replica's number of
   buckets, carry the store key, and have no live holder (a replica of the one-bucket layout
   leads through it). It is created (released, with the layout and a new store key) when it
   does not exist. Otherwise the replica hands over every bucket it leads and leads none;
2. holds one membership slot (acquired once, renewed by a thread of its own) and counts the
   live slots: R;
3. reads the bucket Leases it does not hold (free: none, released or expired by its clock);
4. applies `election.buckets.placement`: hands over its surplus, takes free buckets up to
   ⌈B/R⌉.

A bucket it leads is a `Store` of that bucket's shards only, opened with the bucket Lease's
epoch and uid (every shard of the bucket carries them), its own collectors and persist loop,
and a thread renewing its Lease. Taking a bucket: acquire its Lease, open the store, take the
shards over (the proof renews the bucket Lease and then reads the store's Lease: the layout
must still be ours), start the collectors. Handing one over, always in this order: stop its
collectors and persist loop, flush it (only while its Lease is still ours), release the Lease.
A bucket whose Lease is lost (not renewed within the renew deadline) ends the lifecycle, as
the one Lease does without buckets. Each bucket's store gets 1/B of the write budget, so the
release's writes stay within the budget whatever the placement.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.collectors.runner import CollectorRunner
from checkpoint_runtime.collectors.sink import Sink
from checkpoint_runtime.constants import LEADER_ELECTION_JITTER_FACTOR
from checkpoint_runtime.election import buckets as layout
from checkpoint_runtime.election.elector import ElectionThread, LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock, LeaseRecord
from checkpoint_runtime.errors import CheckpointError, LeadershipLostError
from checkpoint_runtime.runtime import repair
from checkpoint_runtime.runtime.guards import CountingCollector, LeaderGuardedMap
from checkpoint_runtime.runtime.lease import lease_lock, vetting
from checkpoint_runtime.runtime.metrics import RuntimeMetrics
from checkpoint_runtime.runtime.settings import RuntimeSettings
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer
from checkpoint_runtime.store.seal import Sealing, key_bytes, new_store_key

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("checkpoint_runtime.runtime")


@dataclass
class HeldBucket:
    """One bucket this replica leads: its Lease's elector and renewal thread, its store, its
    collectors and persist loop."""

    index: int
    elector: LeaderElector
    election: ElectionThread
    store: Store | None = None
    runner: CollectorRunner | None = None
    persister: Debouncer | None = None
    steps: list[str] = field(default_factory=list)
    """The handover's steps as done, in order (for the log and the tests)."""

    def leading(self) -> bool:
        return self.elector.is_leader()


@dataclass
class _Observed:
    """When this replica last saw a bucket with a live holder (monotonic seconds)."""

    led_at: float


class BucketLeadership:
    """The election rounds and the buckets this replica leads (see the module doc)."""

    def __init__(
        self,
        settings: RuntimeSettings,
        identity: str,
        metrics: RuntimeMetrics,
        backend: Backend,
        api: client.ApiClient,
        namespace: str,
        sink: Sink,
        on_fatal: Callable[[BaseException], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self.metrics = metrics
        self.backend = backend
        self.api = api
        self.namespace = namespace
        self.sink = sink
        self.on_fatal = on_fatal
        self._clock = clock
        store = settings.store
        self.buckets = store.buckets
        self.lease_name = store.lease_name
        timings = settings.timings
        shape = vetting(store.lease_name, int(timings.lease_duration))

        def elector(name: str, check_layout: bool = False) -> LeaderElector:
            lock = lease_lock(api, namespace, name, identity, store.lease_name)
            return LeaderElector(
                lock, timings, vetting=shape, layout=self.buckets if check_layout else None
            )

        self.root = elector(store.lease_name, check_layout=True)
        self.bucket_electors = [
            elector(name) for name in layout.bucket_lease_names(store.lease_name, self.buckets)
        ]
        self.member_electors = [
            elector(name) for name in layout.member_lease_names(store.lease_name, self.buckets)
        ]
        self.member: int | None = None
        self._member_election: ElectionThread | None = None
        self.held: dict[int, HeldBucket] = {}
        self.members = 0
        self.share = self.buckets
        self.problem: str | None = None
        """Why this replica leads no bucket now (the store's Lease), or None."""
        self.rounds = 0
        now = clock()
        self._observed = [_Observed(now) for _ in range(self.buckets)]
        self.handed_over: list[HeldBucket] = []
        """Every bucket handed over by this process, in order (its steps kept)."""

    # ---- what the runtime asks ---------------------------------------------------------------

    def leading_any(self) -> bool:
        return any(held.leading() for held in list(self.held.values()))

    def healthy(self, tolerance: float) -> bool:
        return all(held.elector.healthy(tolerance) for held in list(self.held.values()))

    def foreign_heads(self) -> list[str]:
        """Shards of the buckets led whose head the open refused (their collectors do not run)."""
        return sorted(
            shard
            for held in list(self.held.values())
            if held.store is not None
            for shard in held.store.foreign
        )

    def lost(self) -> int | None:
        """A bucket whose Lease was lost (not renewed in time), or None."""
        for index, held in list(self.held.items()):
            if held.election.lost.is_set():
                return index
        if self._member_election is not None and self._member_election.lost.is_set():
            return -1
        return None

    # ---- the rounds --------------------------------------------------------------------------

    def run(self, stopping: Callable[[], bool], pause: Callable[[float], None]) -> None:
        """Election rounds until `stopping()`; a lost Lease ends them (reported as fatal)."""
        retry = self.settings.timings.retry_period
        while not stopping():
            lost = self.lost()
            if lost is not None:
                what = "the membership slot" if lost < 0 else f"bucket {lost}"
                self.on_fatal(LeadershipLostError(f"lost the Lease of {what}"))
                return
            try:
                self.round()
            except (CheckpointError, ExceptionGroup) as error:
                self.on_fatal(repair.with_repair(error, self.backend))
                return
            pause(retry * (1 + random.random() * LEADER_ELECTION_JITTER_FACTOR))

    def round(self) -> None:
        """One election round (see the module doc). A read that fails decides nothing: the
        round ends there, leading what it led (its Leases are renewed by their own threads)."""
        self.rounds += 1
        root = self.root.available()
        if root is None and self.root.looked:
            return  # a failed read of the store's Lease: nothing known, nothing changed
        self.problem = self._root_problem(bool(root))
        if self.problem is not None:
            for index in sorted(self.held):
                self.hand_over(index)
            self._update_metrics(set())
            return
        self._hold_member_slot()
        members = [
            True if slot == self.member else elector.available()
            for slot, elector in enumerate(self.member_electors)
        ]
        buckets = {
            index: elector.available()
            for index, elector in enumerate(self.bucket_electors)
            if index not in self.held
        }
        if None in members or None in buckets.values():
            return  # a failed read: R or the free buckets are not known this round
        self.members = max(
            sum(1 for slot, free in enumerate(members) if slot == self.member or not free), 1
        )
        free = {index for index, available in buckets.items() if available}
        decision = layout.placement(self.buckets, self.member, self.members, self.held, free)
        self.share = decision.share
        for index in decision.release:
            log.info(
                "handing bucket %s over (leading %s, share %s)",
                index,
                len(self.held),
                decision.share,
            )
            self.hand_over(index)
        for index in decision.take:
            self.take(index)
        self._update_metrics(free - set(self.held))

    def _root_problem(self, available: bool) -> str | None:
        """Why no bucket may be led now, from the store's Lease just read (`available`: it has
        no live holder), created when absent."""
        root = self.root
        if not root.looked:
            return f"the store's Lease {root.lock.describe()} could not be read"
        lock = root.lock
        if not lock.uid:  # absent: created released, recording our layout and a new key
            self._create_root(lock)
            return f"created the store's Lease {lock.describe()}; leading from the next round"
        if root.layout_problem is not None:
            return root.layout_problem
        if not available:
            return (
                f"the store's Lease {lock.describe()} is held by {root.observed_leader!r} (a "
                "replica leading every collector with one bucket): waiting for its handover"
            )
        if not lock.store_key or key_bytes(lock.store_key) is None:
            return (
                f"the store's Lease {lock.describe()} carries no store key: run the release "
                "with store.buckets 1 until it leads once (it seals the shards and records "
                "the key), then raise buckets"
            )
        return None

    def _create_root(self, lock: object) -> None:
        assert isinstance(lock, KubernetesLeaseLock)
        lock.keep_store_key(new_store_key())
        record = LeaseRecord("", 1, None, None, 0, 0, self.buckets)
        try:
            lock.create(record, self.settings.timings.renew_deadline)
        except Exception as error:
            log.warning("creating lease %s failed: %s", lock.describe(), error)
        else:
            log.info(
                "created the store's lease %s recording %s buckets",
                lock.describe(),
                self.buckets,
            )

    def _hold_member_slot(self) -> None:
        if self.member is not None:
            return
        order = sorted(
            range(len(self.member_electors)),
            key=lambda slot: hashlib.sha256(f"{self.identity}/{slot}".encode()).digest(),
        )
        for slot in order:
            elector = self.member_electors[slot]
            if elector.available() is True and elector.try_acquire_or_renew():
                self.member = slot
                self._member_election = ElectionThread(elector)
                self._member_election.start()
                log.info(
                    "holding membership slot %s", slot, extra={"lease": elector.lock.describe()}
                )
                return

    # ---- taking and handing over ------------------------------------------------------------

    def take(self, index: int) -> bool:
        """Acquire bucket `index`'s Lease, open its store, take its shards over and start its
        collectors; False when another replica got the Lease first."""
        elector = self.bucket_electors[index]
        if not elector.try_acquire_or_renew():
            return False
        election = ElectionThread(elector)
        election.start()  # its first step renews the term just acquired, then it keeps it
        held = HeldBucket(index, elector, election)
        self.held[index] = held
        term = elector.term()
        if term is None:
            raise LeadershipLostError(f"bucket {index}: lost right after it was acquired")
        log.info(
            "leading bucket %s",
            index,
            extra={"epoch": term.epoch, "lease": elector.lock.describe()},
        )
        settings = self.settings
        shards = layout.shards_of_bucket(
            [c.namespace for c in settings.collectors], index, self.buckets
        )
        key = key_bytes(self.root.lock.store_key)
        assert key is not None  # _root_problem refused a Lease without one
        store = Store.open(
            self.backend,
            writer=self.identity,
            epoch=term.epoch,
            deadline_seconds=settings.store.deadline_seconds,
            debounce_seconds=settings.store.debounce_seconds,
            metrics=self.metrics.store,
            shards=shards,
            lease_uid=term.lease_uid,
            max_chunks=settings.store.max_chunks,
            write_budget_bytes_per_second=settings.store.write_budget_bytes_per_second
            / self.buckets,
            kinds=settings.kinds.shapes,
            sealing=Sealing(key, self.lease_name),
            migrate=False,
        )
        held.store = store
        for shard, refused in sorted(store.foreign.items()):
            log.error(
                "%s. %s",
                refused,
                repair.hint(self.backend, shard),  # type: ignore[arg-type]
                extra={"error": type(refused).__name__, "shard": shard, "object": refused.name},
            )
        deadline = store.new_deadline()
        found = store.shard_states()
        for shard in shards:  # as without buckets: an object there that is not ours is named
            if shard not in found and shard not in store.foreign:
                self.backend.read_shard(shard, deadline)
        store.take_ownership(self._prover(held))
        guarded = LeaderGuardedMap(store, held.leading)
        kinds = settings.kinds
        collectors = [
            CountingCollector(
                kinds.kind(c.kind).build(guarded, self.sink, c), self.metrics, held.leading
            )
            for c in settings.collectors
            if c.namespace in shards and c.namespace not in store.foreign
        ]
        held.runner = CollectorRunner(collectors, self.on_fatal)
        held.persister = Debouncer(store, self.on_fatal, leading=held.leading)
        held.runner.start()
        held.persister.start()
        self.metrics.bucket_leader.labels(str(index)).set(1)
        log.info("collecting bucket %s", index, extra={"collectors": len(collectors)})
        return True

    def _prover(self, held: HeldBucket) -> Callable[[int], int]:
        def recorded() -> int:
            reader = lease_lock(self.api, self.namespace, self.lease_name, self.identity)
            record = reader.get(self.settings.timings.renew_deadline)
            return 1 if record is None else record.buckets

        return layout_proof(held.elector, self.buckets, recorded, f"bucket {held.index}")

    def hand_over(self, index: int) -> None:
        """Give bucket `index` up, in the only safe order: stop its collectors and persist
        loop, flush its store while its Lease is still ours, release the Lease. A flush that
        fails is raised after the release (nothing of the bucket runs any more by then)."""
        held = self.held.pop(index)
        try:
            if held.runner is not None:
                held.runner.stop()
            if held.persister is not None:
                held.persister.stop()
            held.steps.append("stopped")
            if held.store is not None and held.leading():
                held.store.flush()
                held.steps.append("flushed")
        finally:
            held.election.stop(self.settings.timings.renew_deadline)
            if held.elector.release():
                held.steps.append("released")
                log.info("released bucket %s", index, extra={"lease": held.elector.lock.describe()})
            self.metrics.bucket_leader.labels(str(index)).set(0)
            self.metrics.bucket_handovers.labels(str(index)).inc()
            self.handed_over.append(held)

    def stop(self) -> list[BaseException]:
        """Hand every bucket over (shutdown), then release the membership slot; the errors of
        flushes that failed (such a bucket's Lease is released all the same)."""
        errors: list[BaseException] = []
        for index in sorted(self.held):
            try:
                self.hand_over(index)
            except (CheckpointError, ExceptionGroup) as error:
                errors.append(error)
        if self._member_election is not None:
            self._member_election.stop(self.settings.timings.renew_deadline)
            self._member_election.elector.release()
        self.metrics.store.leader.set(0)
        return errors

    # ---- metrics -----------------------------------------------------------------------------

    def _update_metrics(self, leaderless: set[int]) -> None:
        now = self._clock()
        for index in range(self.buckets):
            observed = self._observed[index]
            if index not in leaderless:
                observed.led_at = now
            self.metrics.bucket_leaderless.labels(str(index)).set(now - observed.led_at)
        self.metrics.buckets_led.set(len(self.held))
        self.metrics.bucket_share.set(self.share)
        self.metrics.bucket_members.set(self.members)
        self.metrics.store.leader.set(1 if self.held else 0)


def layout_proof(
    elector: LeaderElector, buckets: int, recorded: Callable[[], int], what: str
) -> Callable[[int], int]:
    """The proof a bucket's store makes before writing over another Lease object's stamp: a
    guarded renewal of the bucket's Lease (`renew_above`), then `recorded()`, a read of the
    number of buckets the store's Lease records, which must still be `buckets`. Read after the
    renewal, it sees any change of layout made before a shard's stamp was written by the other
    layout (which changes the record first), so a replica of a replaced layout never writes
    over the shards of the layout that replaced it."""

    def prove(epoch: int) -> int:
        ours = elector.renew_above(epoch)
        found = recorded()
        if found != buckets:
            raise LeadershipLostError(
                f"{what}: the store's Lease records {found} bucket(s), not {buckets}: not "
                "writing over another layout's shards"
            )
        return ours

    return prove
