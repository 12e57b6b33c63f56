"""Pure logic of the Lease state machine: a fake clock and an in-memory Lease with resourceVersions.

The real API server tests (test_election_apiserver.py) cover the wire; these pin client-go's
rules step by step, where waiting for real expiry would take seconds per case.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from checkpoint_runtime.constants import LABEL_COMPONENT, LABEL_STORE
from checkpoint_runtime.election.elector import LeaderElector, LeadershipLostError
from checkpoint_runtime.election.foreign import LeaseVetting
from checkpoint_runtime.election.lease_lock import LeaseRecord, wire_time
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format.naming import lease_labels


@dataclass
class FakeClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self.now)


class Conflict(Exception):
    pass


@dataclass
class FakeLeaseServer:
    """One Lease with optimistic concurrency: a stale resourceVersion is refused (409)."""

    record: LeaseRecord | None = None
    version: int = 0
    writes: list[tuple[str, LeaseRecord]] = field(default_factory=list)
    fail_next: int = 0

    def check_fault(self) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionResetError("injected")


@dataclass
class FakeLock:
    server: FakeLeaseServer
    identity: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    seen_version: int | None = None
    after_get: Callable[[], None] | None = None

    def describe(self) -> str:
        return "fake/lease"

    def get(self, timeout: float) -> LeaseRecord | None:
        self.server.check_fault()
        self.seen_version = self.server.version if self.server.record else None
        record = self.server.record
        if self.after_get is not None:
            hook, self.after_get = self.after_get, None
            hook()
        return record

    def create(self, record: LeaseRecord, timeout: float) -> None:
        self.server.check_fault()
        if self.server.record is not None:
            raise Conflict("AlreadyExists")
        self._store(record)

    def update(self, record: LeaseRecord, timeout: float) -> None:
        self.server.check_fault()
        if self.seen_version != self.server.version:
            raise Conflict("Conflict")
        self._store(record)

    def _store(self, record: LeaseRecord) -> None:
        self.server.version += 1
        self.server.record = record
        self.server.writes.append((self.identity, record))
        self.seen_version = self.server.version


TIMINGS = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)


def elector(server: FakeLeaseServer, identity: str, clock: FakeClock) -> LeaderElector:
    return LeaderElector(FakeLock(server, identity), TIMINGS, clock=clock, wall_clock=clock.wall)


def test_defaults_are_client_go_defaults() -> None:
    timings = ElectionTimings()
    assert (timings.lease_duration, timings.renew_deadline, timings.retry_period) == (15, 10, 2)


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "knob"),
    [
        (10, 10, 2, "renewDeadlineSeconds"),  # lease must exceed renew deadline
        (15, 2.4, 2, "renewDeadlineSeconds"),  # renew deadline must exceed 1.2 x retry
        (15, 10, 0, "retryPeriodSeconds"),
        (0.5, 0.2, 0.1, "leaseDurationSeconds"),
        (15.5, 10, 2, "leaseDurationSeconds"),  # the Lease stores whole seconds
    ],
)
def test_invalid_timings_are_rejected_with_the_knob(
    lease: float, renew: float, retry: float, knob: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        ElectionTimings(lease, renew, retry)
    assert raised.value.path == f"leaderElection.{knob}"


def test_absent_lease_is_created_with_epoch_zero() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    assert a.is_leader()
    assert a.epoch == 0
    assert server.record is not None
    assert server.record.holder_identity == "a"
    assert server.record.lease_duration_seconds == 15


def test_a_held_lease_is_not_taken_before_expiry_by_the_local_clock() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b observes the record now
    clock.now += 14.9
    assert not b.try_acquire_or_renew()  # unchanged record, observed 14.9 s ago: still valid
    assert not b.is_leader()
    assert server.record is not None
    assert server.record.holder_identity == "a"


def test_expiry_counts_from_when_the_record_was_observed_not_its_renew_time() -> None:
    """A renewTime far in the past (skewed writer clock) does not make a fresh record expired."""
    clock, server = FakeClock(), FakeLeaseServer()
    old = datetime(2000, 1, 1, tzinfo=UTC)
    server.record = LeaseRecord("a", 15, old, old, 4)
    server.version = 1
    b = elector(server, "b", clock)
    assert not b.try_acquire_or_renew()
    clock.now += 15.0
    assert b.try_acquire_or_renew()
    assert b.epoch == 5


def test_takeover_after_expiry_increments_transitions_and_sets_a_new_acquire_time() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    first = server.record
    assert not b.try_acquire_or_renew()
    clock.now += 15.1  # a stopped renewing
    assert b.try_acquire_or_renew()
    assert server.record is not None
    assert first is not None
    assert server.record.holder_identity == "b"
    assert server.record.lease_transitions == first.lease_transitions + 1
    assert server.record.acquire_time != first.acquire_time
    assert b.epoch == 1


def test_renewal_keeps_acquire_time_and_transitions() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    acquired = server.record
    clock.now += 2
    assert a.try_acquire_or_renew()
    assert server.record is not None
    assert acquired is not None
    assert server.record.acquire_time == acquired.acquire_time
    assert server.record.renew_time != acquired.renew_time
    assert server.record.lease_transitions == acquired.lease_transitions


def test_a_renewal_that_keeps_renewing_keeps_a_candidate_out() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    for _ in range(20):
        clock.now += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert server.record is not None
    assert server.record.holder_identity == "a"


def test_two_candidates_racing_for_an_expired_lease_only_one_wins() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b, c = (elector(server, name, clock) for name in "abc")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert not c.try_acquire_or_renew()
    clock.now += 16
    # c reads the expired record, then b takes over before c writes: c's update carries a
    # stale resourceVersion and must fail rather than overwrite b's term.
    c_lock = c.lock
    assert isinstance(c_lock, FakeLock)
    won: list[bool] = []
    c_lock.after_get = lambda: won.append(b.try_acquire_or_renew())
    assert not c.try_acquire_or_renew()
    assert won == [True]
    assert server.record is not None
    assert server.record.holder_identity == "b"
    assert server.record.lease_transitions == 1
    assert not c.is_leader()


def test_a_stale_resource_version_is_a_failed_try_not_an_overwrite() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    # Someone else wrote in between (e.g. an operator edit): a's fast path conflicts, the
    # slow path re-reads and renews on the new version without losing its term.
    assert server.record is not None
    server.record = replace(server.record, lease_duration_seconds=15)
    server.version += 1
    clock.now += 2
    assert a.try_acquire_or_renew()
    assert a.epoch == 0


def test_leader_stops_leading_when_renewal_fails_for_the_renew_deadline() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    server.fail_next = 1000
    clock.now += 9.9
    assert not a.try_acquire_or_renew()
    assert a.is_leader()  # still inside the renew deadline
    clock.now += 0.1
    assert not a.is_leader()
    assert a.epoch is None


def test_renew_loop_returns_false_at_the_deadline_without_waiting_for_lease_expiry() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    waits: list[float] = []

    def fake_sleep(stop: threading.Event, seconds: float) -> bool:
        waits.append(seconds)
        clock.now += seconds
        if len(waits) == 3:
            server.fail_next = 1000  # the API goes away after two renewals
        return stop.is_set()

    a._sleep = fake_sleep
    assert a.try_acquire_or_renew()
    acquired_at = clock.now
    assert a.renew(threading.Event()) is False
    lost_after = clock.now - acquired_at
    # Last success at +4 s (two renewals), so leadership ends 10 s later: at +14 s, < 15 s lease.
    assert lost_after == pytest.approx(14.0)
    assert not a.is_leader()


def test_leader_seeing_another_holder_stops_at_once() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    assert server.record is not None
    server.record = replace(server.record, holder_identity="intruder", lease_transitions=7)
    server.version += 1
    clock.now += 2
    assert not a.try_acquire_or_renew()
    assert not a.holds_lease()
    assert not a.is_leader()


def test_release_lets_a_candidate_take_over_immediately() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert server.record is not None
    assert server.record.holder_identity == ""
    assert server.record.lease_duration_seconds == 1
    assert server.record.lease_transitions == 0
    assert not a.is_leader()
    assert b.try_acquire_or_renew()  # no waiting: the holder is empty
    assert b.epoch == 1


def test_release_is_a_no_op_for_a_non_leader() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    writes = len(server.writes)
    assert b.release()
    assert len(server.writes) == writes


def test_a_restarted_process_with_a_new_identity_waits_and_gets_a_new_epoch() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "pod-0_aaaa", clock)
    assert a.try_acquire_or_renew()
    again = elector(server, "pod-0_bbbb", clock)
    assert not again.try_acquire_or_renew()
    clock.now += 15
    assert again.try_acquire_or_renew()
    assert again.epoch == 1


def test_wire_time_never_sends_a_zero_fraction() -> None:
    whole = datetime(2026, 1, 1, 8, 0, 0, tzinfo=UTC)
    assert wire_time(whole).microsecond == 1
    assert wire_time(whole.replace(microsecond=7)) == whole.replace(microsecond=7)


def test_a_term_past_its_renew_deadline_is_not_released() -> None:
    """Releasing then would write over whoever holds the Lease by now."""
    clock, server = FakeClock(), FakeLeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew()
    writes = len(server.writes)
    clock.now += TIMINGS.renew_deadline
    assert a.release()
    assert len(server.writes) == writes


def test_renew_above_raises_the_epoch_base_and_every_later_term_keeps_it() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert a.epoch == 0
    assert a.renew_above(8) == 9
    assert server.record is not None
    assert (server.record.epoch_base, server.record.lease_transitions) == (9, 0)
    assert a.renew_above(3) == 9  # already above: renewed, never lowered
    assert a.try_acquire_or_renew()  # the renew loop carries the base
    assert server.record.epoch_base == 9
    assert a.release()
    assert server.record.epoch_base == 9
    assert b.try_acquire_or_renew()
    assert b.epoch == 10  # base 9 + transitions 1


def test_renew_above_by_a_deposed_leader_fails_and_raises_nothing() -> None:
    clock, server = FakeClock(), FakeLeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 15.1
    assert b.try_acquire_or_renew()  # a is deposed; by a's clock alone it could still lead
    assert a._term is not None
    a._term = replace(a._term, renewed_at=clock.now)  # as a paused leader whose clock stood still
    assert a.is_leader()
    with pytest.raises(LeadershipLostError):
        a.renew_above(100)
    assert server.record is not None
    assert (server.record.holder_identity, server.record.epoch_base) == ("b", 0)
    assert b.epoch == 1


@dataclass
class SlowUidLock(FakeLock):
    """A lock whose uid read parks the acquiring thread until the test has looked."""

    reading_uid: threading.Event = field(default_factory=threading.Event)
    release_uid: threading.Event = field(default_factory=threading.Event)

    @property  # type: ignore[override]
    def uid(self) -> str:
        if self.server.record is not None:
            self.reading_uid.set()
            self.release_uid.wait(5)
        return "lease-uid-1"

    @uid.setter
    def uid(self, value: str) -> None:
        pass


def test_a_term_is_never_seen_half_written() -> None:
    """While the acquiring thread is between learning its epoch and its Lease uid, a reader sees
    the old term whole (not leading) or the new term whole, never the new epoch with the old uid."""
    clock = FakeClock()
    lock = SlowUidLock(FakeLeaseServer(), "a")
    candidate = LeaderElector(lock, TIMINGS, clock=clock, wall_clock=clock.wall)
    acquiring = threading.Thread(target=candidate.try_acquire_or_renew)
    acquiring.start()
    try:
        assert lock.reading_uid.wait(5), "the acquisition never reached its uid read"
        seen = (candidate.epoch, candidate.lease_uid)
        assert seen == (None, ""), "a reader saw the new term's epoch beside the old Lease uid"
        assert candidate.term() is None
    finally:
        lock.release_uid.set()
        acquiring.join(5)
    term = candidate.term()
    assert term is not None
    assert (candidate.epoch, candidate.lease_uid) == (term.epoch, "lease-uid-1")


# -- a Lease none of the store's replicas wrote ---------------------------------------------------

SQUATTED = LeaseRecord("beta-squatter", 2_147_483_647, None, None, 0)


def vetted(server: FakeLeaseServer, clock: FakeClock, **lock: object) -> LeaderElector:
    return LeaderElector(
        FakeLock(server, "alpha-7d9f_0a1b2c3d", **lock),  # type: ignore[arg-type]
        TIMINGS,
        clock=clock,
        wall_clock=clock.wall,
        vetting=LeaseVetting(int(TIMINGS.lease_duration), lease_labels("alpha")),
    )


@pytest.mark.parametrize(
    ("record", "labels", "named"),
    [
        (SQUATTED, {}, "leaseDurationSeconds 2147483647"),
        (replace(SQUATTED, lease_duration_seconds=301), {}, "leaseDurationSeconds 301"),
        (
            replace(SQUATTED, holder_identity="Beta Squatter", lease_duration_seconds=15),
            {},
            "holder identity 'Beta Squatter'",
        ),
        (
            replace(SQUATTED, lease_duration_seconds=15),
            {LABEL_STORE: "0123456789abcdef"},
            f"label {LABEL_STORE}='0123456789abcdef'",
        ),
        (
            replace(SQUATTED, lease_duration_seconds=15),
            {LABEL_COMPONENT: "checkpoint-shard"},
            f"label {LABEL_COMPONENT}=",
        ),
    ],
)
def test_a_foreign_lease_is_named_at_the_first_read(
    record: LeaseRecord, labels: dict[str, str], named: str
) -> None:
    clock, server = FakeClock(), FakeLeaseServer(record=record)
    candidate = vetted(server, clock, labels=labels)
    assert not candidate.try_acquire_or_renew()
    assert candidate.foreign is not None
    assert named in candidate.foreign
    assert server.writes == []  # reported, not fought over


@pytest.mark.parametrize(
    ("record", "labels"),
    [
        (
            replace(SQUATTED, holder_identity="runtime-a", lease_duration_seconds=15),
            {},
        ),  # an earlier release's
        (
            replace(
                SQUATTED, holder_identity="alpha-5c6d7-x2k9p_0f0f0f0f", lease_duration_seconds=300
            ),
            lease_labels("alpha"),
        ),
        (
            replace(SQUATTED, holder_identity="", lease_duration_seconds=1),
            {LABEL_STORE: "other"},
        ),  # released: taken at once
    ],
)
def test_a_replicas_lease_is_not_foreign(record: LeaseRecord, labels: dict[str, str]) -> None:
    candidate = vetted(FakeLeaseServer(record=record), FakeClock(), labels=labels)
    candidate.try_acquire_or_renew()
    assert candidate.foreign is None


def test_a_foreign_lease_that_expires_is_taken_over_and_no_longer_named() -> None:
    clock = FakeClock()
    server = FakeLeaseServer(
        record=replace(SQUATTED, holder_identity="BAD", lease_duration_seconds=15)
    )
    candidate = vetted(server, clock)
    assert not candidate.try_acquire_or_renew()
    assert candidate.foreign is not None
    clock.now += 16
    assert candidate.try_acquire_or_renew()
    assert candidate.foreign is None
    assert server.record is not None
    assert server.record.holder_identity == "alpha-7d9f_0a1b2c3d"


def test_a_runtime_configured_past_the_charts_lease_duration_accepts_its_own() -> None:
    vetting = LeaseVetting(3600, lease_labels("alpha"))
    assert vetting.foreign(replace(SQUATTED, lease_duration_seconds=3600), {}) is None
    assert vetting.foreign(replace(SQUATTED, lease_duration_seconds=3601), {}) is not None
