"""Leader election on the real API server, authenticated as the chart's ServiceAccount.

Short timings (a 3 s lease) keep the tests about losing or taking over a lease fast; a test
that asserts continuity (nobody loses the lease) uses STEADY, whose renew deadline a loaded
2-core machine does not miss. The logic is the same as with client-go's 15/10/2 defaults,
which test_election_logic.py pins.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.election.elector import ElectionThread, LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import ConfigError
from checkpoint_testenv.faultproxy import Action, FaultProxy
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.polling import wait_for

FAST = ElectionTimings(lease_duration=3, renew_deadline=2, retry_period=0.5)
STEADY = ElectionTimings(lease_duration=10, renew_deadline=8, retry_period=1)
"""A leader lets go only after failing to renew for 8 s: continuity holds under load."""


@pytest.fixture
def release(chart_install: Callable[..., Release]) -> Release:
    return chart_install()


@pytest.fixture
def clients(release: Release) -> Iterator[Callable[..., client.ApiClient]]:
    made: list[client.ApiClient] = []

    def make(host: str | None = None) -> client.ApiClient:
        api = api_client(release.configuration(host=host))
        made.append(api)
        return api

    yield make
    for api in made:
        api.close()


def make_elector(
    release: Release,
    api: client.ApiClient,
    identity: str,
    timings: ElectionTimings = FAST,
    lease_name: str | None = None,
    **kwargs: object,
) -> LeaderElector:
    lock = KubernetesLeaseLock(
        api, release.coordination_namespace, lease_name or release.lease_name, identity
    )
    return LeaderElector(lock, timings, **kwargs)  # type: ignore[arg-type]


def test_two_electors_on_one_lease_exactly_one_leads(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    threads = [
        ElectionThread(make_elector(release, clients(), name, STEADY)) for name in ("a", "b")
    ]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: any(t.elected.is_set() for t in threads), 30, "a leader")

        def renewed_past_one_lease_duration() -> bool:
            spec = release.read_lease().spec
            assert spec is not None
            held = (spec.renew_time - spec.acquire_time).total_seconds()
            return bool(held > STEADY.lease_duration)

        # The Lease the leader acquired would have expired by now: it kept renewing it.
        wait_for(renewed_past_one_lease_duration, 4 * STEADY.lease_duration, "renewals")
        leaders = [t for t in threads if t.elector.is_leader()]
        assert len(leaders) == 1
        lease = release.read_lease()
        assert lease.spec is not None
        assert lease.spec.holder_identity == leaders[0].elector.identity
        assert lease.spec.lease_transitions == 0
        assert leaders[0].elector.epoch == 0
        assert not any(t.lost.is_set() for t in threads)
    finally:
        for thread in threads:
            thread.stop()


def test_leader_that_stops_renewing_is_replaced_after_expiry_with_transitions_plus_one(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    first = make_elector(release, clients(), "first")
    assert first.try_acquire_or_renew()
    acquired = release.read_lease().spec
    assert acquired is not None
    second = ElectionThread(make_elector(release, clients(), "second"))
    stopped_at = time.monotonic()  # `first` never renews again (a paused or dead leader)
    second.start()
    try:
        waited = wait_for(second.elected.is_set, 15)
        taken = release.read_lease().spec
        assert taken is not None
        assert taken.holder_identity == "second"
        assert taken.lease_transitions == acquired.lease_transitions + 1
        assert taken.acquire_time != acquired.acquire_time
        assert second.elector.epoch == acquired.lease_transitions + 1
        # Not before the lease ran out by the candidate's own observation.
        assert time.monotonic() - stopped_at >= FAST.lease_duration
        assert waited >= FAST.lease_duration - 0.1
        assert not first.is_leader()
    finally:
        second.stop()


def test_renewals_keep_acquire_time_and_send_the_resource_version(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    elector = make_elector(release, clients(), "renewer")
    assert elector.try_acquire_or_renew()
    before = release.read_lease()
    assert elector.try_acquire_or_renew()
    after = release.read_lease()
    assert before.spec is not None
    assert after.spec is not None
    assert after.spec.acquire_time == before.spec.acquire_time
    assert after.spec.renew_time != before.spec.renew_time
    assert after.metadata is not None
    assert before.metadata is not None
    assert after.metadata.resource_version != before.metadata.resource_version
    # Someone else's write makes our remembered resourceVersion stale: the optimistic update
    # is refused by the server (no silent overwrite) and the slow path re-reads first.
    with release.plane.admin_api() as admin:
        body = release.read_lease()
        assert body.metadata is not None
        body.metadata.labels = {"touched": "yes"}
        client.CoordinationV1Api(admin).replace_namespaced_lease(
            release.lease_name, release.coordination_namespace, body
        )
    assert elector.try_acquire_or_renew()
    final = release.read_lease()
    assert final.metadata is not None
    assert final.metadata.labels == {"touched": "yes"}  # kept, not overwritten
    assert final.spec is not None
    assert final.spec.holder_identity == "renewer"


def test_release_on_shutdown_lets_the_other_take_over_at_once(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    slow = ElectionTimings(lease_duration=30, renew_deadline=10, retry_period=0.5)
    leader = ElectionThread(make_elector(release, clients(), "leader", slow))
    leader.start()
    wait_for(leader.elected.is_set, 10)
    standby = ElectionThread(make_elector(release, clients(), "standby", slow))
    standby.start()
    try:
        # The standby tried and saw the leader's valid Lease: it waits, it does not take it.
        wait_for(lambda: standby.elector.observed_leader == "leader", 10, "the standby's try")
        assert not standby.elected.is_set()
        leader.stop()
        assert leader.elector.release()
        released = release.read_lease().spec
        assert released is not None
        assert released.holder_identity in ("", None)
        assert released.lease_duration_seconds == 1
        waited = wait_for(standby.elected.is_set, 10)
        assert waited < slow.lease_duration  # the 30 s lease was not waited out
        taken = release.read_lease().spec
        assert taken is not None
        assert taken.holder_identity == "standby"
        assert taken.lease_transitions == 1
        assert not leader.lost.is_set()
    finally:
        standby.stop()


def test_the_chart_account_cannot_hold_another_lease(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    """get/update are pinned to the chart's Lease name: another name stays out of reach."""
    elector = make_elector(release, clients(), "intruder", lease_name="someone-elses-lease")
    assert not elector.try_acquire_or_renew()
    with pytest.raises(ApiException) as raised:
        elector.lock.get(5)
    assert raised.value.status == 403


def test_a_client_with_silent_retries_is_refused(release: Release) -> None:
    with (
        client.ApiClient(release.configuration()) as api,
        pytest.raises(ConfigError, match="retries"),
    ):
        KubernetesLeaseLock(api, release.coordination_namespace, release.lease_name, "x")


def test_whole_second_timestamps_are_accepted_by_the_server(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    """The client drops a zero fraction that the MicroTime parser requires (400 without care)."""
    whole = datetime(2026, 12, 1, 8, 0, 0, tzinfo=UTC)
    elector = make_elector(release, clients(), "whole", wall_clock=lambda: whole)
    assert elector.try_acquire_or_renew()
    spec = release.read_lease().spec
    assert spec is not None
    assert spec.holder_identity == "whole"


def test_a_renewal_whose_answer_is_lost_keeps_the_term(
    release: Release,
    clients: Callable[..., client.ApiClient],
    fault_proxy: Callable[[], FaultProxy],
) -> None:
    proxy = fault_proxy()
    elector = make_elector(release, clients(host=proxy.host), "through-proxy")
    assert elector.try_acquire_or_renew()
    epoch = elector.epoch
    proxy.drop_response_after_forward(count=1, method="PUT")
    # The optimistic renewal commits but its answer is lost; the same try falls back to a read,
    # sees itself as the holder and continues the same term (no transition, same epoch).
    assert elector.try_acquire_or_renew()
    dropped = [e for e in proxy.events if e.action is Action.DROP_RESPONSE_AFTER_FORWARD]
    assert [e.upstream_status for e in dropped] == [200]
    assert elector.epoch == epoch
    spec = release.read_lease().spec
    assert spec is not None
    assert spec.holder_identity == "through-proxy"
    assert spec.lease_transitions == epoch


def test_an_acquisition_whose_answer_is_lost_is_recognised_as_ours(
    release: Release,
    clients: Callable[..., client.ApiClient],
    fault_proxy: Callable[[], FaultProxy],
) -> None:
    first = make_elector(release, clients(), "first")
    assert first.try_acquire_or_renew()
    first.release()
    proxy = fault_proxy()
    second = make_elector(release, clients(host=proxy.host), "second")
    proxy.drop_response_after_forward(count=1, method="PUT")
    # The takeover commits unacknowledged; the retry reads the record naming us and renews
    # it as our own term instead of counting a second transition.
    assert not second.try_acquire_or_renew()
    assert second.try_acquire_or_renew()
    assert second.epoch == 1  # one transition, not two
    spec = release.read_lease().spec
    assert spec is not None
    assert spec.lease_transitions == 1


def test_stop_ends_the_thread_without_reporting_a_loss(
    release: Release, clients: Callable[..., client.ApiClient]
) -> None:
    thread = ElectionThread(make_elector(release, clients(), "solo", STEADY))
    thread.start()
    wait_for(thread.elected.is_set, 30)
    thread.stop(timeout=5)
    assert not thread.lost.is_set()
    assert thread.elector.holds_lease()  # stopping is not releasing: that is a separate step
