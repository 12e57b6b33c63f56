"""Leader election on a `coordination.k8s.io/v1` Lease with client-go's semantics.

The Python client has no LeaseLock, so this is a small port of client-go's
`tools/leaderelection`: the same validated timings (lease > renew deadline > 1.2 x retry),
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH_BASE,
    LEADER_ELECTION_JITTER_FACTOR,
    LEASE_DURATION_SECONDS,
    RENEW_DEADLINE_SECONDS,
    RETRY_PERIOD_SECONDS,
)
from checkpoint_runtime.errors import CheckpointError, ConfigError

log = logging.getLogger(__name__)


class LeadershipLostError(CheckpointError):
    """We no longer hold the Lease within its renew deadline: stop writing."""


Clock = Callable[[], float]
WallClock = Callable[[], datetime]


@dataclass(frozen=True)
class ElectionTimings:
    """client-go's three durations, validated as NewLeaderElector validates them."""

    lease_duration: float = LEASE_DURATION_SECONDS
    renew_deadline: float = RENEW_DEADLINE_SECONDS
    retry_period: float = RETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        path = "leaderElection"
        if self.lease_duration < 1 or self.lease_duration != int(self.lease_duration):
            raise ConfigError(
                f"{path}.leaseDurationSeconds",
                f"must be a whole number of seconds >= 1 (the Lease stores int32 seconds), "
                f"got {self.lease_duration:g}",
            )
        if self.retry_period <= 0:
            raise ConfigError(f"{path}.retryPeriodSeconds", "must be greater than zero")
        if self.lease_duration <= self.renew_deadline:
            raise ConfigError(
                f"{path}.renewDeadlineSeconds",
                f"leaseDurationSeconds ({self.lease_duration:g}) must be greater than "
                f"renewDeadlineSeconds ({self.renew_deadline:g})",
            )
        if self.renew_deadline <= LEADER_ELECTION_JITTER_FACTOR * self.retry_period:
            raise ConfigError(
                f"{path}.renewDeadlineSeconds",
                f"renewDeadlineSeconds ({self.renew_deadline:g}) must be greater than "
                f"{LEADER_ELECTION_JITTER_FACTOR:g} x retryPeriodSeconds ({self.retry_period:g})",
            )


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes (client-go's LeaderElectionRecord)."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int
    epoch_base: int = 0
    """Added to lease_transitions to give the epoch (annotation; raised by `renew_above`)."""

    @property
    def epoch(self) -> int:
        return self.epoch_base + self.lease_transitions


class LeaseLock(Protocol):
    """Get/create/update of one Lease; any exception is a failed try for the elector."""

    identity: str
    uid: str
    """metadata.uid of the Lease object last read or written ("" before that)."""

    def describe(self) -> str: ...

    def get(self, timeout: float) -> LeaseRecord | None:
        """The current record, or None if the Lease does not exist."""

    def create(self, record: LeaseRecord, timeout: float) -> None: ...

    def update(self, record: LeaseRecord, timeout: float) -> None:
        """Replace the spec, guarded by the resourceVersion last seen by get/create/update."""


def default_identity(pod_name: str | None) -> str:
    """A candidate identity unique to this process lifetime, readable in `kubectl get lease`.

    The pod name alone would let a restarted container resume its predecessor's term (same
    holder) without a new epoch; the random suffix makes every process a new candidate.
    """
    return f"{pod_name or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def wire_time(value: datetime) -> datetime:
    """A timestamp the client can send as a MicroTime.

    The client serialises datetimes with isoformat(), which drops the fraction when it is zero,
    and the API server's MicroTime parser (RFC 3339 with exactly six fraction digits) answers
    such a value with 400 Bad Request (checked on the real server). One microsecond more is
    far below the resolution anyone reads a renewTime at.
    """
    value = value.astimezone(UTC)
    return value if value.microsecond else value.replace(microsecond=1)


class KubernetesLeaseLock:
    """LeaseLock over CoordinationV1Api; sends the last seen resourceVersion on every update."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str) -> None:
        if not identity:
            raise ConfigError("leaderElection", "lock identity is empty")
        if api.configuration.retries != 0:
            # urllib3's default Retry(3) re-sends a PUT whose answer was lost: the re-sent
            # renewal then fails 409 and hides that the first one committed.
            raise ValueError("the Lease client must have configuration.retries = 0")
        self._api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.uid = ""
        self._metadata: client.V1ObjectMeta | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def get(self, timeout: float) -> LeaseRecord | None:
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=timeout
            )
        except ApiException as error:
            if error.status == 404:
                self._metadata = None
                self.uid = ""
                return None
            raise
        self._remember(lease)
        return _record_of(lease.spec, lease.metadata.annotations if lease.metadata else None)

    def create(self, record: LeaseRecord, timeout: float) -> None:
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=client.V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                annotations=_with_base(None, record),
            ),
            spec=_spec_of(record),
        )
        self._remember(
            self._api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
        )

    def update(self, record: LeaseRecord, timeout: float) -> None:
        if self._metadata is None or not self._metadata.resource_version:
            raise RuntimeError(f"lease {self.describe()}: update before get or create")
        # The uid is a precondition: an update never lands on a recreated Lease of this name.
        metadata = client.V1ObjectMeta(
            name=self._metadata.name,
            namespace=self._metadata.namespace,
            resource_version=self._metadata.resource_version,
            uid=self._metadata.uid,
            labels=self._metadata.labels,
            annotations=_with_base(self._metadata.annotations, record),
        )
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=metadata,
            spec=_spec_of(record),
        )
        self._remember(
            self._api.replace_namespaced_lease(
                self.name, self.namespace, body, _request_timeout=timeout
            )
        )

    def _remember(self, lease: client.V1Lease) -> None:
        """Keep what an update must carry: name, uid, resourceVersion, labels, annotations."""
        meta = lease.metadata
        if meta is None or not meta.resource_version:
            raise RuntimeError(f"lease {self.describe()}: the server returned no resourceVersion")
        self.uid = meta.uid or ""
        self._metadata = client.V1ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            resource_version=meta.resource_version,
            uid=meta.uid,
            labels=meta.labels,
            annotations=meta.annotations,
        )


def epoch_base_of(annotations: Mapping[str, str] | None) -> int:
    """The epoch base a Lease carries (0 when absent; a value that is not a whole number is
    read as 0, which can only make our epoch lower, never let us pass a newer stamp)."""
    raw = (annotations or {}).get(ANNOTATION_EPOCH_BASE, "0")
    return int(raw) if raw.isdigit() else 0


def _with_base(annotations: Mapping[str, str] | None, record: LeaseRecord) -> dict[str, str]:
    merged = dict(annotations or {})
    if record.epoch_base or ANNOTATION_EPOCH_BASE in merged:
        merged[ANNOTATION_EPOCH_BASE] = str(record.epoch_base)
    return merged


def _record_of(
    spec: client.V1LeaseSpec | None, annotations: Mapping[str, str] | None = None
) -> LeaseRecord:
    base = epoch_base_of(annotations)
    if spec is None:
        return LeaseRecord("", 0, None, None, 0, base)
    return LeaseRecord(
        holder_identity=spec.holder_identity or "",
        lease_duration_seconds=int(spec.lease_duration_seconds or 0),
        acquire_time=spec.acquire_time,
        renew_time=spec.renew_time,
        lease_transitions=int(spec.lease_transitions or 0),
        epoch_base=base,
    )


def _spec_of(record: LeaseRecord) -> client.V1LeaseSpec:
    return client.V1LeaseSpec(
        holder_identity=record.holder_identity,
        lease_duration_seconds=record.lease_duration_seconds,
        lease_transitions=record.lease_transitions,
        acquire_time=wire_time(record.acquire_time) if record.acquire_time else None,
        renew_time=wire_time(record.renew_time) if record.renew_time else None,
    )


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
        self._renewed_at: float | None = None
        self._epoch: int | None = None
        self._lease_uid = ""
        self._writing = threading.Lock()
        """Serialises the Lease writes of the renew loop and `renew_above`."""

    # ---- what the runtime asks -------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.lock.identity

    @property
    def epoch(self) -> int | None:
        """Our current epoch (the Lease's epoch base + leaseTransitions of our acquisition), or
        None when not leading."""
        return self._epoch if self.is_leader() else None

    @property
    def lease_uid(self) -> str:
        """metadata.uid of the Lease object of our current term."""
        return self._lease_uid

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
            now = self._wall_clock()
            base = max(previous.epoch_base, epoch + 1 - previous.lease_transitions)
            renewal = replace(previous, renew_time=now, epoch_base=base)
            try:
                self.lock.update(renewal, timeout)
            except Exception as error:
                raise LeadershipLostError(
                    f"renewing lease {self.lock.describe()} to raise the epoch above {epoch} "
                    f"failed: {error}"
                ) from error
            if self.lock.uid != self._lease_uid:  # defensive: the update carried our uid
                raise LeadershipLostError(f"lease {self.lock.describe()} is another object now")
            self._succeeded(renewal, started)
            log.info(
                "renewed lease %s with epoch %s (above %s)",
                self.lock.describe(),
                renewal.epoch,
                epoch,
            )
            return renewal.epoch

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
        if not self.holds_lease() or self._renewed_at is None:
            return False
        return self._clock() - self._renewed_at < self.timings.renew_deadline

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
            previous = self._observed_record()
            renewal = replace(
                desired,
                acquire_time=previous.acquire_time,
                lease_transitions=previous.lease_transitions,
                epoch_base=previous.epoch_base,
            )
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
        if current is None:
            try:
                self.lock.create(desired, timeout)
            except Exception as error:
                log.warning("creating lease %s failed: %s", self.lock.describe(), error)
                return False
            return self._succeeded(desired, started)

        # 3. A record that changed restarts its expiry from now, by our clock.
        self._observe(current)
        if current.holder_identity and self._lease_valid(started) and not self.holds_lease():
            return False

        # 4. Renew our own term, or take over an expired or released one.
        if self.holds_lease():
            attempt = replace(
                desired,
                acquire_time=current.acquire_time,
                lease_transitions=current.lease_transitions,
                epoch_base=current.epoch_base,
            )
        else:
            attempt = replace(
                desired,
                lease_transitions=current.lease_transitions + 1,
                epoch_base=current.epoch_base,
            )
        try:
            self.lock.update(attempt, timeout)
        except Exception as error:
            log.warning("updating lease %s failed: %s", self.lock.describe(), error)
            return False
        return self._succeeded(attempt, started)

    def release(self, timeout: float | None = None) -> bool:
        """Give the lease up now (client-go ReleaseOnCancel): holder "", a 1 s lease.

        The caller must have stopped everything the lease guards first. A term whose renew
        deadline passed is not ours to release any more (someone may hold the Lease by now).
        """
        if not self.is_leader():
            return True
        timeout = self.timings.renew_deadline if timeout is None else timeout
        now = self._wall_clock()
        released = LeaseRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            lease_transitions=self._observed_record().lease_transitions,
            epoch_base=self._observed_record().epoch_base,
        )
        self._renewed_at = None
        try:
            self.lock.update(released, timeout)
        except Exception as error:
            log.warning("releasing lease %s failed: %s", self.lock.describe(), error)
            return False
        with self._mutex:
            self._observed = released
            self._observed_time = self._clock()
        self._epoch = None
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
                    self._epoch,
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
                self._epoch = None
                return False
            if self.try_acquire_or_renew(timeout=left):
                return True
            if self._sleep(stop, min(self.timings.retry_period, max(self._deadline_left(), 0))):
                return None

    # ---- internals ---------------------------------------------------------------------------

    def _deadline_left(self) -> float:
        if self._renewed_at is None:
            return 0.0
        return self.timings.renew_deadline - (self._clock() - self._renewed_at)

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

    def _observe(self, record: LeaseRecord) -> None:
        with self._mutex:
            if record != self._observed:
                self._observed = record
                self._observed_time = self._clock()

    def _succeeded(self, record: LeaseRecord, started: float) -> bool:
        with self._mutex:
            self._observed = record
            self._observed_time = self._clock()
        # Deadlines count from when the request left, the earliest the server could commit it.
        self._renewed_at = started
        self._epoch = record.epoch
        self._lease_uid = self.lock.uid
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
