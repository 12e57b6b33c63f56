"""Two write guards on the real API server, each made to matter by a second writer:

- an uncertain write (its answer lost) is ours only if the shard read back carries *our* write
  id: a shard another writer changed is a conflict, never taken as our commit;
- a leader taking over a shard a deposed writer created writes over it guarded by the version
  it read before its proof (the Lease renewal), never by one read afterwards: a write the
  deposed writer made meanwhile is a conflict, not silently overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client
from store_harness import KubeHarness, open_store, raw_shard

from checkpoint_runtime.constants import ANNOTATION_EPOCH, ANNOTATION_WRITER
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import ConflictError
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import Action, FaultProxy
from checkpoint_testenv.support.clocks import FrozenClock

pytestmark = pytest.mark.apiserver

FEED = "tn/objectstore/feed-a"
CURSOR = f"{FEED}/cursor"


def only_error(raised: pytest.ExceptionInfo[ExceptionGroup[Exception]]) -> Exception:
    (error,) = raised.value.exceptions
    return error


@pytest.mark.parametrize(
    ("status", "reason"),
    [pytest.param(504, "Timeout", id="504-timeout"), pytest.param(500, "", id="500-empty")],
)
def test_an_uncertain_write_is_ours_only_with_our_write_id(
    kube: KubeHarness, fault_proxy: Callable[[], FaultProxy], status: int, reason: str
) -> None:
    proxy = fault_proxy()
    store = Store.open(kube.backend(host=proxy.host), writer="w", epoch=1, deadline_seconds=15)
    store.batch({CURSOR: "1"})
    rival = open_store(kube, writer="w", epoch=1)  # same stamp: only the write id tells apart
    rival.batch({CURSOR: "rival"})  # the shard changes under its own write id
    proxy.answer(status, reason, count=None, method="PUT")  # our update: no answer we can trust

    with pytest.raises(ExceptionGroup) as raised:
        store.batch({CURSOR: "ours"})

    assert isinstance(only_error(raised), ConflictError)
    assert open_store(kube).get(CURSOR) == "rival"
    assert store.dirty_shards() == [FEED]  # ours is still to be written, not taken as done
    assert len([e for e in proxy.events if e.method == "PUT" and e.action is Action.ANSWER]) == 1


@pytest.fixture
def kube_api(kube: KubeHarness) -> Iterator[client.ApiClient]:
    configuration = kube.release.configuration()
    configuration.retries = 0
    api = client.ApiClient(configuration)
    yield api
    api.close()


def test_a_takeover_is_guarded_by_the_version_read_before_the_proof(
    kube: KubeHarness, kube_api: client.ApiClient
) -> None:
    lock = KubernetesLeaseLock(kube_api, kube.namespace, kube.lease_name, "new")
    timings = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)
    leader = LeaderElector(lock, timings, clock=FrozenClock())
    assert leader.try_acquire_or_renew()
    assert leader.epoch is not None
    leader_store = Store.open(
        kube.backend(), writer="new", epoch=leader.epoch, lease_uid=leader.lease_uid
    )
    # A writer of a Lease object since deleted: its epochs are not comparable to ours.
    theirs = leader.epoch + 3
    deposed = open_store(kube, writer="old", epoch=theirs, lease_uid="a-deleted-lease")
    deposed.batch({CURSOR: "created by the deposed writer"})
    proofs: list[int] = []

    def renew_while_the_deposed_writer_writes(epoch: int) -> int:
        if not proofs:  # after the leader read the shard, before its renewal proves its term
            deposed.batch({CURSOR: "written during the proof"})
        proofs.append(epoch)
        return leader.renew_above(epoch)

    leader_store.take_ownership(renew_while_the_deposed_writer_writes)  # nothing stored yet
    with pytest.raises(ExceptionGroup) as raised:
        leader_store.batch({CURSOR: "from the leader"})  # create meets the deposed writer's

    assert proofs == [theirs]  # the proof ran (once), raising our epoch above theirs
    assert leader.epoch > theirs
    assert isinstance(only_error(raised), ConflictError)
    assert open_store(kube).get(CURSOR) == "written during the proof"
    stored = raw_shard(kube, FEED)
    assert stored is not None
    assert stored.annotations[ANNOTATION_WRITER] == "old"
    assert leader_store.dirty_shards() == [FEED]
    leader_store.reload(FEED)  # the way back: re-read, and write over what was read
    leader_store.batch({CURSOR: "from the leader"})
    assert open_store(kube).get(CURSOR) == "from the leader"
    stored = raw_shard(kube, FEED)
    assert stored is not None
    assert (stored.annotations[ANNOTATION_EPOCH], stored.annotations[ANNOTATION_WRITER]) == (
        str(leader_store.stamp.epoch),
        "new",
    )
