"""Leader election on a `coordination.k8s.io/v1` Lease with client-go's semantics.

A small port of client-go's `tools/leaderelection` rather than the Python client's
`kubernetes.leaderelection`, whose LeaseLock does not keep `leaseTransitions` (the epoch this store
fences with), whose config calls `sys.exit` on bad timings, which builds its API object from the
global default client (with the client's automatic retries), and which never releases the Lease.
This port has the same validated timings (lease > renew deadline > 1.2 x retry),
the same acquire/renew step (`try_acquire_or_renew`), expiry judged by the *local* time at which
a record was last seen to change (client-go's observedTime, immune to clock skew between nodes),
and release on shutdown (holder "" and a 1 s lease, like ReleaseOnCancel). It needs only get,
create and update on one Lease.

Leadership alone does not fence a paused ex-leader; the epoch of our acquisition is stamped into
every shard (with the Lease's uid) so the data itself fences. The epoch is the Lease's transition
count plus an epoch base kept in a Lease annotation: a leader can raise the base (a guarded update
of the Lease it holds, `renew_above`) so that its epoch passes every stamp left by an earlier
Lease object of the same name (deleted and recreated, its transitions restarted at 0).
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from checkpoint_runtime.constants import (
    LEADER_ELECTION_JITTER_FACTOR,
)
from checkpoint_runtime.election.foreign import LeaseVetting
from checkpoint_runtime.election.lease_lock import LeaseLock, LeaseRecord
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import CheckpointError, ConfigError

log = logging.getLogger(__name__)


class LeadershipLostError(CheckpointError):
    """We no longer hold the Lease within its renew deadline: stop writing."""


Clock = Callable[[], float]
WallClock = Callable[[], datetime]


def default_identity(pod_name: str | None) -> str:
    """A candidate identity unique to this process lifetime, readable in `kubectl get lease`.

    The pod name alone would let a restarted container resume its predecessor's term (same
    holder) without a new epoch; the random suffix makes every process a new candidate.
    """
    return f"{pod_name or socket.gethostname().lower()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Term:
    """One term of ours: when we last renewed (monotonic seconds), its epoch and Lease uid."""

    renewed_at: float
    epoch: int
    lease_uid: str


class LeaderElector:
    """client-go's LeaderElector as a state machine driven by `try_acquire_or_renew`.

    `clock` is monotonic seconds (observation times, deadlines); `wall_clock` stamps the record's
    acquire and renew times. Both are injectable so the pure logic is testable without sleeping.
    """

    def __init__(
        self,
        lock: LeaseLock,
        timings: ElectionTimings | None = None,
        clock: Clock = time.monotonic,
        wall_clock: WallClock | None = None,
        sleep: Callable[[threading.Event, float], bool] | None = None,
        vetting: LeaseVetting | None = None,
        layout: int | None = None,
    ) -> None:
        if not lock.identity:
            raise ConfigError("leaderElection", "lock identity is empty")
        self.lock = lock
        self.timings = timings or ElectionTimings()
        self._clock = clock
        self._wall_clock = wall_clock or (lambda: datetime.now(UTC))
        self._sleep = sleep or (lambda event, seconds: event.wait(seconds))
        self._mutex = threading.Lock()
        self._observed: LeaseRecord | None = None
        self._observed_time = 0.0
        self._term: Term | None = None
        """Our current term, replaced whole under `_mutex` so no reader sees parts of two terms."""
        self._lease_uid = ""
        """The Lease uid of our current or last term (kept after it ends), under `_mutex`."""
        self._writing = threading.Lock()
        """Serialises the Lease writes of the renew loop and `renew_above`."""
        self._vetting = vetting
        self._foreign: str | None = None
        """Why the Lease last read is not one of the store's replicas' (None: it is, or we
        hold it), under `_mutex`."""
        self._looked = False
        """A read of the Lease (or a write of it) succeeded at least once."""
        self.layout = layout
        """The bucket layout this candidate leads under (None: the Lease carries none to check:
        a bucket's own Lease). A Lease recording another layout is never acquired, and one we
        hold that starts recording another is flagged (`layout_problem`) for the runtime to
        hand over: stop, flush, release."""
        self._layout_problem: str | None = None

    # ---- what the runtime asks -------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.lock.identity

    @property
    def epoch(self) -> int | None:
        """Our current epoch (the Lease's epoch base + leaseTransitions of our acquisition), or
        None when not leading."""
        term = self.term()
        return term.epoch if term is not None else None

    @property
    def lease_uid(self) -> str:
        """metadata.uid of the Lease object of our current (or last) term."""
        with self._mutex:
            return self._lease_uid

    def term(self) -> Term | None:
        """Our current term (epoch and Lease uid read together), or None when not leading."""
        with self._mutex:
            return self._term if self._leading_locked() else None

    def renew_above(self, epoch: int, timeout: float | None = None) -> int:
        """Renew our term now, raising the Lease's epoch base so that our epoch exceeds `epoch`
        if it does not already; return our epoch.

        The write is a guarded update (the resourceVersion of our last renewal and the uid of our
        term's Lease object): it succeeds only if nobody wrote the Lease since, so it proves we
        still hold this Lease object *after* everything the caller read before calling. Raises
        LeadershipLostError otherwise (nothing was raised).
        """
        timeout = self.timings.renew_deadline if timeout is None else timeout
        with self._writing:
            started = self._clock()
            if not self.is_leader():
                raise LeadershipLostError("not leading: cannot renew the Lease")
            previous = self._observed_record()
            if self.layout is not None and (
                previous.buckets != self.layout or self.layout_problem is not None
            ):
                raise LeadershipLostError(
                    f"lease {self.lock.describe()} records {previous.buckets} bucket(s), not "
                    f"{self.layout}: not proving a term under another layout"
                )
            now = self._wall_clock()
            base = max(previous.epoch_base, epoch + 1 - previous.lease_transitions)
            renewal = replace(self._renewal(previous, now), epoch_base=base)
            try:
                self.lock.update(renewal, timeout)
            except Exception as error:
                raise LeadershipLostError(
                    f"renewing lease {self.lock.describe()} to raise the epoch above {epoch} "
                    f"failed: {error}"
                ) from error
            self._succeeded(renewal, started)
            log.info(
                "renewed lease %s with epoch %s (above %s)",
                self.lock.describe(),
                renewal.epoch,
                epoch,
            )
            return renewal.epoch

    def record_store_key(self, key: str, timeout: float | None = None) -> None:
        """Write `key` as the store key on the Lease we hold: a guarded renewal (as
        `renew_above`), so it lands only on the Lease object of our term, unchanged since.
        Raises LeadershipLostError otherwise."""
        timeout = self.timings.renew_deadline if timeout is None else timeout
        with self._writing:
            started = self._clock()
            if not self.is_leader():
                raise LeadershipLostError("not leading: cannot record the store key")
            renewal = self._renewal(self._observed_record(), self._wall_clock())
            self.lock.keep_store_key(key)
            try:
                self.lock.update(renewal, timeout)
            except Exception as error:
                raise LeadershipLostError(
                    f"recording the store key on lease {self.lock.describe()} failed: {error}"
                ) from error
            self._succeeded(renewal, started)
            log.info("recorded the store key on lease %s", self.lock.describe())

    @property
    def layout_problem(self) -> str | None:
        """Why the Lease last read records a bucket layout that is not ours (None: it does)."""
        with self._mutex:
            return self._layout_problem

    @property
    def looked(self) -> bool:
        """Whether the Lease has been read or written successfully yet: until then nobody
        knows whether the Lease this candidate waits on is the store's."""
        with self._mutex:
            return self._looked

    @property
    def foreign(self) -> str | None:
        """Why the Lease held by someone else is not one this store's replicas wrote (its
        labels, holder identity or duration; `foreign.LeaseVetting`), or None."""
        with self._mutex:
            return self._foreign

    @property
    def observed_leader(self) -> str:
        with self._mutex:
            return self._observed.holder_identity if self._observed else ""

    def holds_lease(self) -> bool:
        """The last observed record names us (client-go's IsLeader)."""
        with self._mutex:
            return self._observed is not None and self._observed.holder_identity == self.identity

    def is_leader(self) -> bool:
        """We hold the lease and renewed it within the renew deadline: safe to write."""
        with self._mutex:
            return self._leading_locked()

    def healthy(self, tolerance: float) -> bool:
        """client-go's HealthzAdaptor check: a leader whose lease ran out long ago is stuck."""
        if not self.holds_lease():
            return True
        with self._mutex:
            since = self._clock() - self._observed_time
        return since <= self.timings.lease_duration + tolerance

    # ---- one step ----------------------------------------------------------------------------

    def try_acquire_or_renew(self, timeout: float | None = None) -> bool:
        """One attempt to acquire or renew (client-go tryAcquireOrRenew); True on success."""
        with self._writing:
            return self._try_acquire_or_renew(timeout)

    def _try_acquire_or_renew(self, timeout: float | None) -> bool:
        timeout = self.timings.renew_deadline if timeout is None else timeout
        started = self._clock()
        now = self._wall_clock()
        desired = LeaseRecord(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.timings.lease_duration),
            acquire_time=now,
            renew_time=now,
            lease_transitions=0,
        )
        # 1. Fast path: the leader updates from the record it wrote last.
        if self.holds_lease() and self._lease_valid(started):
            renewal = self._renewal(self._observed_record(), now)
            try:
                self.lock.update(renewal, timeout)
            except Exception as error:
                log.info("optimistic lease renewal failed, falling back to a read: %s", error)
            else:
                return self._succeeded(renewal, started)

        # 2. Read the record, or create it.
        try:
            current = self.lock.get(timeout)
        except Exception as error:
            log.warning("reading lease %s failed: %s", self.lock.describe(), error)
            return False
        self._vet(current)
        if current is None:
            return self._send(self.lock.create, "creating", desired, timeout, started)

        # 3. A record that changed restarts its expiry from now, by our clock.
        self._observe(current)
        if current.holder_identity and self._lease_valid(started) and not self.holds_lease():
            return False
        if not self._layout_ours(current) and not self.holds_lease():
            return False  # never acquired under another layout (a held one is handed over)

        # 4. Renew our own term, or take over an expired or released one.
        if self.holds_lease():
            attempt = self._renewal(current, now)
        else:
            attempt = replace(
                desired,
                lease_transitions=current.lease_transitions + 1,
                epoch_base=current.epoch_base,
                buckets=current.buckets,
            )
        return self._send(self.lock.update, "updating", attempt, timeout, started)

    def _send(
        self,
        write: Callable[[LeaseRecord, float], object],
        doing: str,
        record: LeaseRecord,
        timeout: float,
        started: float,
    ) -> bool:
        """One create or update of the Lease; a failure is logged and is a failed try."""
        try:
            write(record, timeout)
        except Exception as error:
            log.warning("%s lease %s failed: %s", doing, self.lock.describe(), error)
            return False
        return self._succeeded(record, started)

    def release(self, timeout: float | None = None) -> bool:
        """Give the lease up now (client-go ReleaseOnCancel): holder "", a 1 s lease.

        The caller must have stopped everything the lease guards first. A term whose renew
        deadline passed is not ours to release any more (someone may hold the Lease by now).
        """
        if not self.is_leader():
            return True
        timeout = self.timings.renew_deadline if timeout is None else timeout
        now = self._wall_clock()
        last = self._observed_record()
        released = LeaseRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            lease_transitions=last.lease_transitions,
            epoch_base=last.epoch_base,
            buckets=last.buckets,
        )
        with self._mutex:
            self._term = None
        try:
            self.lock.update(released, timeout)
        except Exception as error:
            log.warning("releasing lease %s failed: %s", self.lock.describe(), error)
            return False
        with self._mutex:
            self._observed = released
            self._observed_time = self._clock()
        return True

    # ---- loops (client-go acquire and renew) -------------------------------------------------

    def acquire(self, stop: threading.Event) -> bool:
        """Try every retry period (jittered) until we lead; False if `stop` was set first."""
        while not stop.is_set():
            if self.try_acquire_or_renew():
                log.info(
                    "acquired lease %s as %s (epoch %s)",
                    self.lock.describe(),
                    self.identity,
                    self.epoch,
                )
                return True
            wait = self.timings.retry_period * (1 + random.random() * LEADER_ELECTION_JITTER_FACTOR)
            if self._sleep(stop, wait):
                break
        return False

    def renew(self, stop: threading.Event) -> bool:
        """Renew every retry period while leading; False as soon as the renew deadline passes
        without a successful renewal or another holder is seen, True if `stop` ended it."""
        while not stop.is_set():
            if self._sleep(stop, self.timings.retry_period):
                return True
            if self._renew_round(stop) is False:
                return False
        return True

    def _renew_round(self, stop: threading.Event) -> bool | None:
        """Retry a renewal within what is left of the renew deadline; None if stopped."""
        while True:
            left = self._deadline_left()
            if left <= 0 or not self.holds_lease():
                log.error(
                    "lost lease %s: no renewal within %g s (last observed holder %r)",
                    self.lock.describe(),
                    self.timings.renew_deadline,
                    self.observed_leader,
                )
                with self._mutex:
                    self._term = None
                return False
            if self.try_acquire_or_renew(timeout=left):
                return True
            if self._sleep(stop, min(self.timings.retry_period, max(self._deadline_left(), 0))):
                return None

    def available(self, timeout: float | None = None) -> bool | None:
        """Read the Lease (no write) and say whether we could take it now: absent, released,
        expired by our clock, or ours. Keeps the observation `try_acquire_or_renew` judges
        expiry by; None when the read failed (nothing is known)."""
        timeout = self.timings.renew_deadline if timeout is None else timeout
        with self._writing:
            started = self._clock()
            try:
                current = self.lock.get(timeout)
            except Exception as error:
                log.warning("reading lease %s failed: %s", self.lock.describe(), error)
                return None
            self._vet(current)
            if current is None:
                return True
            self._observe(current)
            self._layout_ours(current)
            return (
                not current.holder_identity
                or current.holder_identity == self.identity
                or not self._lease_valid(started)
            )

    # ---- internals ---------------------------------------------------------------------------

    def _layout_ours(self, record: LeaseRecord) -> bool:
        """Whether `record` carries our bucket layout; says why not in `layout_problem`."""
        if self.layout is None or record.buckets == self.layout:
            problem = None
        else:
            shown = str(record.buckets) if record.buckets else "an unreadable"
            problem = (
                f"lease {self.lock.describe()} records {shown} bucket(s); this replica is "
                f"configured with {self.layout}"
            )
        with self._mutex:
            changed, self._layout_problem = problem != self._layout_problem, problem
        if changed and problem is not None:
            log.error(problem, extra={"error": "BucketLayoutError"})
        return problem is None

    def _deadline_left(self) -> float:
        with self._mutex:
            term = self._term
        if term is None:
            return 0.0
        return self.timings.renew_deadline - (self._clock() - term.renewed_at)

    def _leading_locked(self) -> bool:
        """`is_leader` for a caller that holds `_mutex`."""
        observed, term = self._observed, self._term
        if observed is None or observed.holder_identity != self.identity or term is None:
            return False
        return self._clock() - term.renewed_at < self.timings.renew_deadline

    def _renewal(self, term: LeaseRecord, now: datetime) -> LeaseRecord:
        """Our record renewing `term` (a record of ours) at `now`: its acquire time,
        transitions and epoch base kept, our identity and lease duration."""
        return LeaseRecord(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.timings.lease_duration),
            acquire_time=term.acquire_time,
            renew_time=now,
            lease_transitions=term.lease_transitions,
            epoch_base=term.epoch_base,
            buckets=term.buckets,
        )

    def _observed_record(self) -> LeaseRecord:
        with self._mutex:
            if self._observed is None:
                raise RuntimeError("no lease record observed yet")
            return self._observed

    def _lease_valid(self, now: float) -> bool:
        with self._mutex:
            if self._observed is None:
                return False
            return self._observed_time + self._observed.lease_duration_seconds > now

    def _vet(self, current: LeaseRecord | None) -> None:
        """Judge a record just read: a foreign one is logged by name when first seen (and
        when the reason changes), and `foreign` says why until a record passes again."""
        with self._mutex:
            self._looked = True
        if self._vetting is None:
            return
        reason = None
        if current is not None and current.holder_identity != self.identity:
            reason = self._vetting.foreign(current, self.lock.labels)
        with self._mutex:
            changed, self._foreign = reason != self._foreign, reason
        if changed and reason is not None:
            log.error(
                "lease %s is not this store's: %s (held by %r); a replica cannot lead while "
                "it is held: remove it or let it expire",
                self.lock.describe(),
                reason,
                current.holder_identity if current is not None else "",
                extra={"error": "ForeignLeaseError", "lease": self.lock.describe()},
            )
        elif changed:
            log.info("lease %s is this store's again", self.lock.describe())

    def _observe(self, record: LeaseRecord) -> None:
        with self._mutex:
            if record != self._observed:
                self._observed = record
                self._observed_time = self._clock()

    def _succeeded(self, record: LeaseRecord, started: float) -> bool:
        # Deadlines count from when the request left, the earliest the server could commit it.
        term = Term(renewed_at=started, epoch=record.epoch, lease_uid=self.lock.uid)
        with self._mutex:
            self._observed = record
            self._observed_time = self._clock()
            self._term = term
            self._lease_uid = term.lease_uid
            self._foreign = None
            self._looked = True
        return True


class ElectionThread:
    """Runs acquire then renew in a daemon thread and reports through events.

    `elected` is set once we lead; `lost` once leadership ended without being asked to stop
    (the runtime then ends its lifecycle, like client-go users' OnStoppedLeading). `stop()` ends
    the loop; releasing is a separate step so the caller can flush between the two.
    """

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self.elected = threading.Event()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            if not self.elector.acquire(self._stop):
                return
            self.elected.set()
            if not self.elector.renew(self._stop):
                self.lost.set()
        except BaseException:
            # A bug here must not leave the process waiting forever or leading unrenewed.
            log.exception("leader election loop failed")
            self.lost.set()
            raise
