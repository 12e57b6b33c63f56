"""Kubernetes-only guarantees (SPEC §7, §10; issue 4 acceptance 6 and 7) on the real API server,
as the chart's ServiceAccount: the Role suffices and nothing more is needed, writes are guarded
by resourceVersion with client retries off, and uncertain outcomes are resolved correctly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from store_harness import LEGACY, KubeHarness, open_store

from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.errors import ApiRefusedError, WriteUncertainError
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import Action, FaultProxy
from checkpoint_testenv.support.rbac import RecordedStores, Request, role_allows

FEED = "tn/objectstore/feed-a"
FLOWLOGS = "tn/flowlogs"


@pytest.fixture
def chart_roles(kube: KubeHarness, control_plane: Any) -> list[Any]:
    with control_plane.admin_api() as api:
        roles = client.RbacAuthorizationV1Api(api).list_namespaced_role(kube.namespace).items
    assert roles, "the chart must have created its Role"
    return list(roles)


def test_store_needs_no_verb_outside_the_chart_role(
    kube: KubeHarness, chart_roles: list[Any]
) -> None:
    kube.write_legacy(LEGACY, encode_legacy({f"{FEED}/cursor": "from legacy"}))
    stores = RecordedStores(lambda: kube.backend(LEGACY))

    first = stores.open("a", 1)  # list, get legacy, create shard, update legacy
    first.batch({f"{FEED}/seen/aWQ": "t", f"{FLOWLOGS}/cursor": "c"})  # update + create
    second = stores.open("b", 2)
    second.take_ownership()  # update
    first.set(f"{FEED}/cursor", "stale")
    with pytest.raises(ExceptionGroup):
        first.flush()  # a conflict, still within the Role

    recorded = stores.requests
    assert recorded
    outside = stores.outside(chart_roles)
    assert outside == [], f"the store needs more than the chart's Role grants: {outside}"
    verbs = {(r.resource, r.verb) for r in recorded}
    assert verbs == {("configmaps", v) for v in ("list", "get", "create", "update")}
    # The checker itself is able to fail: a verb the Role does not grant is caught.
    assert not role_allows(chart_roles, Request("delete", "", "configmaps", kube.namespace, "x"))
    assert not role_allows(chart_roles, Request("patch", "", "configmaps", kube.namespace, "x"))


def test_client_retries_are_forced_off_on_a_private_copy(kube: KubeHarness) -> None:
    configuration = kube.release.configuration()
    configuration.retries = None
    backend = KubernetesBackend(configuration, kube.namespace, kube.lease_name)
    assert backend.api_client.configuration.retries == 0
    assert configuration.retries is None
    backend.close()


def test_every_update_sends_the_last_observed_resource_version(kube: KubeHarness) -> None:
    backend = kube.backend()
    assert isinstance(backend, KubernetesBackend)
    sent: list[tuple[str, dict[str, Any]]] = []
    rest = backend.api_client.rest_client
    original = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method in ("PUT", "POST"):
            sent.append((method, kwargs.get("body") or {}))
        return original(method, url, *args, **kwargs)

    rest.request = request
    store = Store.open(backend, writer="w", epoch=1)
    observed: list[str | None] = []
    for value in ("1", "2", "3"):
        observed.append(store.shard_states()[FEED].version if store.shard_states() else None)
        store.batch({f"{FEED}/cursor": value})

    assert [method for method, _ in sent] == ["POST", "PUT", "PUT"]
    assert "resourceVersion" not in sent[0][1]["metadata"]  # create carries none
    assert observed[0] is None
    for (_, body), version in zip(sent[1:], observed[1:], strict=True):
        assert version
        assert body["metadata"]["resourceVersion"] == version


# -- uncertain outcomes through the fault proxy ------------------------------------------------


@pytest.fixture
def proxy(fault_proxy: Callable[[], FaultProxy]) -> FaultProxy:
    return fault_proxy()


@pytest.fixture
def proxied_store(kube: KubeHarness, proxy: FaultProxy) -> Store:
    return Store.open(kube.backend(host=proxy.host), writer="w", epoch=1, deadline_seconds=15)


def uncertain_count(store: Store, shard: str) -> float | None:
    return store.metrics.registry.get_sample_value(
        "checkpoint_uncertain_writes_total", {"shard": shard}
    )


def events(proxy: FaultProxy, method: str) -> list[tuple[Action, int | None]]:
    return [(e.action, e.upstream_status) for e in proxy.events if e.method == method]


def stored_value(kube: KubeHarness, key: str) -> str | None:
    return open_store(kube).get(key)


@pytest.mark.parametrize("fault", ["drop_response_after_forward", "reset_after_forward"])
def test_committed_but_unacknowledged_update_is_recognised_as_committed(
    kube: KubeHarness, proxy: FaultProxy, proxied_store: Store, fault: str
) -> None:
    proxied_store.batch({f"{FEED}/cursor": "1"})
    getattr(proxy, fault)(count=1, method="PUT")

    proxied_store.batch({f"{FEED}/cursor": "2"})  # no error: the write is recognised

    assert stored_value(kube, f"{FEED}/cursor") == "2"
    assert [status for _, status in events(proxy, "PUT")] == [200]  # sent once, never re-sent
    assert uncertain_count(proxied_store, FEED) == 1
    proxied_store.batch({f"{FEED}/cursor": "3"})  # the recovered resourceVersion is current
    assert stored_value(kube, f"{FEED}/cursor") == "3"


def test_committed_but_unacknowledged_create_is_recognised_as_committed(
    kube: KubeHarness, proxy: FaultProxy, proxied_store: Store
) -> None:
    proxy.drop_response_after_forward(count=1, method="POST")
    proxied_store.batch({f"{FEED}/cursor": "1"})
    assert stored_value(kube, f"{FEED}/cursor") == "1"
    assert [status for _, status in events(proxy, "POST")] == [201]
    assert uncertain_count(proxied_store, FEED) == 1


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_lost_request_is_retried_safely(
    kube: KubeHarness, proxy: FaultProxy, proxied_store: Store, method: str
) -> None:
    if method == "PUT":
        proxied_store.batch({f"{FEED}/cursor": "1"})
    proxy.reset_before_forward(count=1, method=method)

    proxied_store.batch({f"{FEED}/cursor": "2"})

    assert stored_value(kube, f"{FEED}/cursor") == "2"
    assert events(proxy, method) == [
        (Action.RESET_BEFORE_FORWARD, None),
        (Action.PASSTHROUGH, 201 if method == "POST" else 200),
    ]


def test_unresolvable_outcome_raises_write_uncertain_within_the_deadline(
    kube: KubeHarness, proxy: FaultProxy
) -> None:
    store = Store.open(kube.backend(host=proxy.host), writer="w", epoch=1, deadline_seconds=3)
    store.batch({f"{FEED}/cursor": "1"})
    proxy.stall(seconds=30, count=None)  # every answer is held past the deadline

    started = time.monotonic()
    with pytest.raises(ExceptionGroup) as raised:
        store.batch({f"{FEED}/cursor": "2"})
    elapsed = time.monotonic() - started

    (error,) = raised.value.exceptions
    assert isinstance(error, WriteUncertainError)
    assert uncertain_count(store, FEED) == 1
    assert store.dirty_shards() == [FEED]
    assert elapsed < 3 + 10  # bounded by the one shared deadline, not by retries per shard
    proxy.passthrough()
    assert open_store(kube).get(f"{FEED}/cursor") == "2"  # the stalled PUT did commit


def test_a_namespace_outside_the_role_is_a_named_refusal_not_a_retry(
    kube: KubeHarness, control_plane: Any
) -> None:
    elsewhere = control_plane.create_namespace("elsewhere")
    backend = KubernetesBackend(kube.release.configuration(), elsewhere, kube.lease_name)
    started = time.monotonic()
    with pytest.raises(ApiRefusedError) as raised:
        Store.open(backend, writer="w", deadline_seconds=20)
    assert raised.value.status == 403
    assert time.monotonic() - started < 20  # definitive: not retried until the deadline
    backend.close()


def test_a_refused_read_back_leaves_the_outcome_to_be_resolved_not_failed(
    kube: KubeHarness, proxy: FaultProxy, proxied_store: Store
) -> None:
    """A read-back answered 403 (a restarted server before its RBAC cache syncs) says nothing
    about the write: the store keeps asking within the deadline and recognises the commit."""
    proxied_store.batch({f"{FEED}/cursor": "1"})
    backend = proxied_store.backend
    assert isinstance(backend, KubernetesBackend)
    read = backend.core.read_namespaced_config_map
    refusals: list[int] = []

    def refused_once(*args: Any, **kwargs: Any) -> Any:
        if not refusals:
            refusals.append(1)
            raise client.ApiException(status=403, reason="Forbidden")
        return read(*args, **kwargs)

    backend.core.read_namespaced_config_map = refused_once  # type: ignore[method-assign]
    proxy.drop_response_after_forward(count=1, method="PUT")

    proxied_store.batch({f"{FEED}/cursor": "2"})

    assert refusals == [1]
    assert stored_value(kube, f"{FEED}/cursor") == "2"
    assert uncertain_count(proxied_store, FEED) == 1
