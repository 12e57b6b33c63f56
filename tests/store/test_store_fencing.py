"""Fencing beyond one Lease object: a deposed writer's new shard, and a deleted and recreated Lease.

The creation tests run on both backends; the Lease tests run real electors (KubernetesLeaseLock,
as the chart's ServiceAccount) on the real API server. Elector clocks are frozen: a deposed
leader keeps believing it leads (a paused ex-leader whose renew deadline has not passed by its
own clock), so what refuses it is the data and the Lease, never its own timer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from store_harness import Harness, KubeHarness, open_store, raw_shard

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_EPOCH_BASE,
    ANNOTATION_LEASE_UID,
    ANNOTATION_WRITER,
)
from checkpoint_runtime.election.elector import LeaderElector, LeadershipLostError
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import ConflictError, EpochFencedError
from checkpoint_runtime.store.core import Store

FEED = "tn/objectstore/feed-a"
OTHER_FEED = "tn/objectstore/feed-b"
FLOWLOGS = "tn/flowlogs"
ROWS = {f"{FEED}/cursor": "old-cursor", f"{FLOWLOGS}/cursor": "2026-03-01T00:00:00Z"}
TIMINGS = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)


def leaf(group: pytest.ExceptionInfo[ExceptionGroup[Exception]]) -> Exception:
    (error,) = group.value.exceptions
    return error


def stamp_of(harness: Harness, shard: str) -> tuple[str, str, str]:
    stored = raw_shard(harness, shard)
    assert stored is not None
    annotations = stored.annotations
    return (
        annotations[ANNOTATION_EPOCH],
        annotations[ANNOTATION_WRITER],
        annotations.get(ANNOTATION_LEASE_UID, ""),
    )


# -- a shard created by a deposed writer --------------------------------------------------------


def test_current_leader_takes_over_a_shard_a_deposed_writer_created(harness: Harness) -> None:
    leader = open_store(harness, writer="new", epoch=5)
    deposed = open_store(harness, writer="old", epoch=4)
    deposed.batch({f"{FEED}/cursor": "from the deposed writer"})  # a brand-new shard

    leader.batch({f"{FEED}/cursor": "from the leader"})  # its create meets AlreadyExists

    assert stamp_of(harness, FEED)[:2] == ("5", "new")
    assert open_store(harness).items(FEED + "/") == [(f"{FEED}/cursor", "from the leader")]
    deposed.set(f"{FEED}/cursor", "late")
    with pytest.raises(ExceptionGroup) as raised:
        deposed.flush()
    assert isinstance(leaf(raised), ConflictError)
    leader.batch({f"{FEED}/cursor": "leader goes on"})  # the leader keeps writing
    assert open_store(harness).get(f"{FEED}/cursor") == "leader goes on"


def test_a_deposed_writer_never_takes_over_a_shard_the_leader_created(harness: Harness) -> None:
    leader = open_store(harness, writer="new", epoch=5)
    deposed = open_store(harness, writer="old", epoch=4)
    twin = open_store(harness, writer="twin", epoch=5)  # same epoch, another writer
    leader.batch({f"{FEED}/cursor": "from the leader"})

    with pytest.raises(ExceptionGroup) as raised:
        deposed.batch({f"{FEED}/cursor": "from the deposed writer"})
    error = leaf(raised)
    assert isinstance(error, EpochFencedError)
    assert (error.ours, error.stored, error.stored_writer) == (4, 5, "new")
    with pytest.raises(ExceptionGroup) as raised:
        twin.batch({f"{FEED}/cursor": "from the twin"})
    assert type(leaf(raised)) is ConflictError
    assert stamp_of(harness, FEED)[:2] == ("5", "new")
    assert open_store(harness).get(f"{FEED}/cursor") == "from the leader"


# -- the Lease deleted and recreated --------------------------------------------------------------


class FrozenClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def admin_leases(control_plane: object) -> Iterator[client.CoordinationV1Api]:
    with control_plane.admin_api() as api:  # type: ignore[attr-defined]
        yield client.CoordinationV1Api(api)


def elector(kube: KubeHarness, api: client.ApiClient, identity: str) -> LeaderElector:
    lock = KubernetesLeaseLock(api, kube.namespace, kube.lease_name, identity)
    return LeaderElector(lock, TIMINGS, clock=FrozenClock())


def lead(kube: KubeHarness, api: client.ApiClient, identity: str) -> LeaderElector:
    leader = elector(kube, api, identity)
    assert leader.try_acquire_or_renew()
    assert leader.is_leader()
    return leader


def leader_store(kube: KubeHarness, leader: LeaderElector) -> Store:
    assert leader.epoch is not None
    return Store.open(
        kube.backend(), writer=leader.identity, epoch=leader.epoch, lease_uid=leader.lease_uid
    )


@pytest.mark.apiserver
def test_a_recreated_lease_lets_the_new_leader_take_over_and_fences_every_old_leader(
    kube: KubeHarness, kube_api: client.ApiClient, admin_leases: client.CoordinationV1Api
) -> None:
    # An old Lease object with history: "old" leads at epoch 8 and writes.
    kube.target.released_lease(kube.lease_name, transitions=7)
    old = lead(kube, kube_api, "old")
    assert (old.epoch, old.lease_uid != "") == (8, True)
    old_store = leader_store(kube, old)
    old_store.take_ownership(old.renew_above)
    old_store.batch(ROWS)
    old_uid = old.lease_uid
    assert stamp_of(kube, FEED) == ("8", "old", old_uid)
    # Later terms of that Lease wrote nothing: "late" leads at epoch 20, which no shard shows.
    kube.target.released_lease(kube.lease_name, transitions=19)
    late = lead(kube, kube_api, "late")
    assert late.epoch == 20

    # The Lease is deleted and recreated: its transitions restart at 0.
    admin_leases.delete_namespaced_lease(kube.lease_name, kube.namespace)
    new = lead(kube, kube_api, "new")
    assert new.epoch == 0
    assert new.lease_uid not in ("", old_uid)
    new_store = leader_store(kube, new)
    with pytest.raises(EpochFencedError):  # without the proof of the Lease, still refused
        new_store.take_ownership()
    new_store.take_ownership(new.renew_above)  # renews, raising the epoch above every stamp

    assert new.epoch == 9
    assert new_store.stamp.epoch == 9
    lease = admin_leases.read_namespaced_lease(kube.lease_name, kube.namespace)
    assert (lease.spec.lease_transitions, lease.metadata.annotations[ANNOTATION_EPOCH_BASE]) == (
        0,
        "9",
    )
    for shard in (FEED, FLOWLOGS):
        assert stamp_of(kube, shard) == ("9", "new", new.lease_uid)
    new_store.batch({f"{FEED}/cursor": "new-cursor"})

    # Every leader of the old Lease object is fenced, whatever its epoch.
    old_store.set(f"{FEED}/cursor", "stale")
    with pytest.raises(ExceptionGroup) as raised:
        old_store.flush()  # its resourceVersion is stale
    assert isinstance(leaf(raised), ConflictError)
    assert late.is_leader()  # by its own (frozen) clock it still leads, with epoch 20 > 9
    late_store = leader_store(kube, late)
    with pytest.raises(ExceptionGroup) as raised:
        late_store.batch({f"{FEED}/cursor": "late, epoch 20"})
    error = leaf(raised)
    assert isinstance(error, EpochFencedError)
    assert "another Lease object" in str(error)
    with pytest.raises(LeadershipLostError):  # it cannot renew a Lease object that is gone
        late_store.take_ownership(late.renew_above)

    # The old Lease's leader may still create a brand-new shard; the new leader takes it over,
    # after renewing with an epoch above the creator's.
    late_store.batch({f"{OTHER_FEED}/cursor": "created by the late leader"})
    assert stamp_of(kube, OTHER_FEED) == ("20", "late", old_uid)
    new_store.batch({f"{OTHER_FEED}/cursor": "new leader's"})
    assert new.epoch == 21
    assert stamp_of(kube, OTHER_FEED) == ("21", "new", new.lease_uid)

    reread = open_store(kube, writer="observer", epoch=0)
    assert dict(reread.items()) == {
        f"{FEED}/cursor": "new-cursor",
        f"{FLOWLOGS}/cursor": ROWS[f"{FLOWLOGS}/cursor"],
        f"{OTHER_FEED}/cursor": "new leader's",
    }

    # The raised base stays on the Lease: the next leader's epoch is above every stamp.
    assert new.release()
    successor = lead(kube, kube_api, "successor")
    assert successor.lease_uid == new.lease_uid
    assert successor.epoch == 22
    successor_store = leader_store(kube, successor)
    successor_store.take_ownership(successor.renew_above)
    assert successor.epoch == 22
    assert {stamp_of(kube, s)[0] for s in (FEED, FLOWLOGS, OTHER_FEED)} == {"22"}


@pytest.mark.apiserver
def test_a_deposed_leader_of_the_current_lease_cannot_raise_its_epoch(
    kube: KubeHarness, kube_api: client.ApiClient, admin_leases: client.CoordinationV1Api
) -> None:
    """The epoch raise is a guarded renewal: only the holder of the current term passes it."""
    first = lead(kube, kube_api, "first")
    open_store(kube, writer="first", epoch=0, lease_uid=first.lease_uid).batch(ROWS)
    kube.target.released_lease(kube.lease_name, transitions=3)  # "first" is deposed meanwhile
    second = lead(kube, kube_api, "second")
    second_store = leader_store(kube, second)
    second_store.take_ownership(second.renew_above)
    assert second.epoch == 4

    assert first.is_leader()  # its own clock says so
    with pytest.raises(LeadershipLostError):
        first.renew_above(100)
    lease = admin_leases.read_namespaced_lease(kube.lease_name, kube.namespace)
    assert (lease.spec.holder_identity, lease.metadata.annotations or {}) == ("second", {})
    stale = leader_store(kube, first)  # epoch 0, same Lease object: refused outright
    with pytest.raises(EpochFencedError):
        stale.take_ownership(first.renew_above)
    assert {stamp_of(kube, s) for s in (FEED, FLOWLOGS)} == {("4", "second", second.lease_uid)}
