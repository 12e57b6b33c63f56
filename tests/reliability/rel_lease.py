"""Lease deletion and recreation with running leaders, on the real API server.

One trial, with real electors (ElectionThread, real clocks, short timings) and stores as the
chart's ServiceAccount, the Lease written with admin credentials (see KubeTarget.lease_client):

1. Leader A is elected, opens the store, takes ownership and writes continuously (a batch every
   `interval` seconds, only while it leads).
2. The Lease is deleted while A runs. A's next renewal finds it gone and creates it again (as
   client-go does): writing goes on (the trial waits for the recreated Lease and three writes
   after it); the largest gap between acknowledged writes is measured.
3. A is paused (its election and writing stop, nothing is released, as SIGSTOP would) and the
   Lease is deleted again. Candidate B starts: it creates a new Lease object (transitions 0, an
   epoch below every stamp), opens the store and takes ownership, which renews the Lease with an
   epoch above every stamp. Recovery time: from the deletion to B's first acknowledged write.
4. A resumes: its stale writes and its renewal-backed take-over must all be refused.

Violations: A acknowledged after B took over, a stored shard that is not B's last acknowledged
write, a stamp that is not B's (epoch above every earlier stamp, B's Lease uid), epochs going
backwards, or B not recovering within `recovery_limit` seconds.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rel_support import leaf_errors

from checkpoint_runtime.election.elector import ElectionThread, LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import CheckpointError, ConflictError
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.polling import wait_for

SHARDS = ("tn/objectstore/feed-a", "tn/objectstore/feed-b", "tn/flowlogs")
TIMINGS = ElectionTimings(lease_duration=3, renew_deadline=2, retry_period=0.5)
"""The soak's timings (docs/reliability.md); CI passes steadier ones (test_rel_lease.py)."""
WRITES_AFTER_RECREATION = 3


class LeaseViolation(AssertionError):
    """A guarantee broken around a Lease deletion."""


@dataclass
class LeaseTrialResult:
    seed: int
    live_gap_seconds: float
    """Largest gap between A's acknowledged writes around the live deletion."""
    live_writes: int
    writes_after_recreation: int
    """A's writes acknowledged after it recreated the deleted Lease."""
    recovery_seconds: float
    """From the second deletion to the first write B had acknowledged."""
    epochs: tuple[int, int, int]
    """A's epoch, B's epoch as elected (on the new Lease object), B's epoch after its take-over."""
    stale_refused: int
    """Writes and take-overs of the resumed A, all refused."""


@dataclass
class Leader:
    """An elected process: its election thread, its store, and a writer loop."""

    name: str
    thread: ElectionThread
    store: Store
    interval: float
    elected_epoch: int
    acks: list[tuple[float, int]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    writer: threading.Thread | None = None

    @property
    def elector(self) -> LeaderElector:
        return self.thread.elector

    def start_writing(self, counter: list[int]) -> None:
        def loop() -> None:
            while not self.stop.wait(self.interval):
                if not self.elector.is_leader():
                    continue
                value = counter[0] = counter[0] + 1
                try:
                    self.store.batch({f"{shard}/cursor": str(value) for shard in SHARDS})
                except BaseException as error:  # judged by the trial
                    self.errors.append(error)
                    return
                self.acks.append((time.monotonic(), value))

        self.writer = threading.Thread(target=loop, name=f"writer-{self.name}", daemon=True)
        self.writer.start()

    def pause(self) -> None:
        """Stop writing and electing without releasing anything (SIGSTOP)."""
        self.stop.set()
        if self.writer is not None:
            self.writer.join()
        self.thread.stop()


def elect(
    target: KubeTarget, lease: str, name: str, timeout: float, timings: ElectionTimings
) -> ElectionThread:
    lock = KubernetesLeaseLock(target.lease_client(), target.namespace, lease, name)
    thread = ElectionThread(LeaderElector(lock, timings))
    thread.start()
    if not thread.elected.wait(timeout):
        thread.stop()
        raise LeaseViolation(f"{name} was not elected within {timeout} s")
    return thread


def lead(
    target: KubeTarget,
    lease: str,
    name: str,
    interval: float,
    timeout: float,
    timings: ElectionTimings,
) -> Leader:
    thread = elect(target, lease, name, timeout, timings)
    elector = thread.elector
    epoch = elector.epoch
    if epoch is None:
        raise LeaseViolation(f"{name} lost the Lease right after it was elected")
    store = Store.open(target.backend(lease), writer=name, epoch=epoch, lease_uid=elector.lease_uid)
    store.take_ownership(elector.renew_above)
    return Leader(name, thread, store, interval, epoch)


def lease_recreation_trial(
    target: KubeTarget,
    seed: int,
    *,
    interval: float = 0.1,
    live_limit: float = 30.0,
    recovery_limit: float = 30.0,
    timings: ElectionTimings = TIMINGS,
) -> LeaseTrialResult:
    lease = target.fresh_lease(f"lease{seed}")
    counter = [0]

    def fail(message: str) -> LeaseViolation:
        return LeaseViolation(f"seed {seed}, lease {lease}: {message}")

    def until(condition: Callable[[], bool], what: str) -> None:
        """Poll `condition` (or A failing) for at most `live_limit` seconds."""
        try:
            wait_for(lambda: condition() or bool(a.errors), live_limit, what, interval=0.02)
        except AssertionError:
            raise fail(f"{what}: not within {live_limit} s") from None

    # 1. A Lease with a history: A's epoch is above what a recreated Lease starts from.
    target.released_lease(lease, transitions=4 + seed % 5)
    a = lead(target, lease, "a", interval, timeout=10, timings=timings)
    a_epoch = a.store.stamp.epoch
    a.start_writing(counter)
    try:
        # 2. Deleted while A runs: A recreates it at its next renewal and keeps writing.
        until(lambda: len(a.acks) >= WRITES_AFTER_RECREATION, "A writing")
        target.delete_lease(lease)
        until(lambda: target.lease_holder(lease) == "a", "A recreating the deleted Lease")
        recreated = len(a.acks)
        until(
            lambda: len(a.acks) >= recreated + WRITES_AFTER_RECREATION,
            "A writing after recreating the Lease",
        )
        if a.errors or not a.elector.is_leader():
            raise fail(f"A stopped after a live deletion: errors {a.errors}")
        after_recreation = len(a.acks) - recreated
        times = [at for at, _ in a.acks]
        gap = max(later - earlier for earlier, later in itertools.pairwise(times))
        live_writes = len(a.acks)

        # 3. A paused, the Lease deleted again, B recovers.
        a.pause()
        a_last = a.acks[-1][1]
        deleted_at = time.monotonic()
        target.delete_lease(lease)
        b = lead(target, lease, "b", interval, timeout=recovery_limit, timings=timings)
    except BaseException:
        a.pause()
        raise
    try:
        b_epoch = b.store.stamp.epoch
        b.start_writing(counter)
        while not b.acks and not b.errors:
            if time.monotonic() - deleted_at > recovery_limit:
                raise fail(f"B wrote nothing within {recovery_limit} s of the deletion")
            time.sleep(0.01)
        if b.errors:
            raise fail(f"B failed to write after taking over: {b.errors[0]!r}")
        recovery = b.acks[0][0] - deleted_at
        b_epoch = b.store.stamp.epoch
        if b_epoch <= a_epoch:
            raise fail(f"B's epoch {b_epoch} is not above A's {a_epoch}")

        # 4. A resumes: every write and take-over of its is refused.
        refused = 0
        try:
            a.store.batch({f"{shard}/cursor": f"stale {a_last}" for shard in SHARDS})
        except ExceptionGroup as group:
            if not all(isinstance(e, ConflictError) for e in leaf_errors(group)):
                raise fail(f"A's stale write failed otherwise: {group!r}") from group
            refused += 1
        else:
            raise fail("the paused leader's write was acknowledged after B took over")
        reopened = Store.open(
            target.backend(lease),
            writer="a",
            epoch=a_epoch,
            lease_uid=a.elector.lease_uid,
        )
        try:
            reopened.take_ownership(a.elector.renew_above)
        except CheckpointError:
            refused += 1
        else:
            raise fail("the paused leader took ownership again after B took over")
        b.pause()
        if b.errors:
            raise fail(f"B failed while writing: {b.errors[0]!r}")
        last = str(b.acks[-1][1])
        stored = target.stored(lease)
        for shard in SHARDS:
            state = stored.get(shard)
            if state is None or state.rows != {f"{shard}/cursor": last}:
                raise fail(f"{shard} holds {state}, not B's last acknowledged write {last}")
            if (state.writer, state.epoch, state.lease) != ("b", b_epoch, b.elector.lease_uid):
                raise fail(f"{shard} is stamped {state}, not by B at epoch {b_epoch}")
    finally:
        b.pause()
    return LeaseTrialResult(
        seed,
        live_gap_seconds=gap,
        live_writes=live_writes,
        writes_after_recreation=after_recreation,
        recovery_seconds=recovery,
        epochs=(a_epoch, b.elected_epoch, b_epoch),
        stale_refused=refused,
    )
