"""Leader election on the Lease of every minor's own API server, as the chart's ServiceAccount.

A leader that stops renewing is replaced once its Lease has run out (transitions + 1, a new
epoch); a Lease deleted under a leader is recreated by the next candidate (a new object, its
transitions from 0), whose store then takes over the shards stamped under the old Lease by
raising its epoch above theirs, as the runtime does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.constants import ANNOTATION_EPOCH_BASE
from checkpoint_runtime.election.elector import ElectionThread, LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.polling import wait_for

FAST = ElectionTimings(lease_duration=3, renew_deadline=2, retry_period=0.5)
FEED = "tn/objectstore/feed-a"


@pytest.fixture
def electors(release: Release) -> Iterator[Callable[[str], LeaderElector]]:
    """Factory: an elector on the release's Lease as its ServiceAccount, with FAST timings."""
    made: list[client.ApiClient] = []

    def make(identity: str) -> LeaderElector:
        api = api_client(release.configuration())
        made.append(api)
        lock = KubernetesLeaseLock(
            api, release.coordination_namespace, release.lease_name, identity
        )
        return LeaderElector(lock, FAST)

    yield make
    for api in made:
        api.close()


def test_a_leader_that_stops_renewing_is_taken_over_after_its_lease_runs_out(
    release: Release, electors: Callable[[str], LeaderElector]
) -> None:
    first = electors("first")
    assert first.try_acquire_or_renew()
    acquired = release.read_lease().spec
    assert acquired is not None
    second = ElectionThread(electors("second"))
    second.start()  # `first` never renews again (a paused or dead leader)
    try:
        waited = wait_for(second.elected.is_set, 15, "the takeover")
        taken = release.read_lease().spec
        assert taken is not None
        assert taken.holder_identity == "second"
        assert taken.lease_transitions == acquired.lease_transitions + 1
        assert second.elector.epoch == acquired.lease_transitions + 1
        assert waited >= FAST.lease_duration - 0.5  # not before the lease ran out
        assert not first.try_acquire_or_renew()  # the old leader sees it is deposed
    finally:
        second.stop()


def test_a_deleted_lease_is_recreated_and_its_leader_takes_over_the_shards(
    release: Release, electors: Callable[[str], LeaderElector], target: KubeTarget
) -> None:
    first = electors("first")
    assert first.try_acquire_or_renew()  # creates the Lease as the ServiceAccount
    old = release.read_lease()
    assert old.metadata is not None
    assert first.epoch == 0
    store = Store.open(target.backend(), writer="first", epoch=0, lease_uid=first.lease_uid)
    store.batch({f"{FEED}/cursor": "before"})
    assert target.stored()[FEED].lease == old.metadata.uid

    assert target.delete_lease(release.lease_name)
    second = electors("second")
    assert second.try_acquire_or_renew()  # recreates it
    new = release.read_lease()
    assert new.metadata is not None
    assert new.spec is not None
    assert new.metadata.uid != old.metadata.uid
    assert (new.spec.holder_identity, new.spec.lease_transitions) == ("second", 0)

    taking = Store.open(target.backend(), writer="second", epoch=0, lease_uid=second.lease_uid)
    taking.take_ownership(second.renew_above)  # shards of the old Lease: raise the epoch
    assert second.epoch == 1
    lease = release.read_lease()
    assert lease.metadata is not None
    assert (lease.metadata.annotations or {}).get(ANNOTATION_EPOCH_BASE) == "1"
    taking.batch({f"{FEED}/cursor": "after"})
    stored = target.stored()[FEED]
    assert (stored.writer, stored.epoch, stored.lease) == ("second", 1, new.metadata.uid)
    assert stored.rows == {f"{FEED}/cursor": "after"}
    assert not first.try_acquire_or_renew()  # the old leader cannot take the new Lease
