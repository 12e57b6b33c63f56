"""rbac.scope=names on the real API server, as the chart's ServiceAccount.

The chart is installed with the names scope, so its Role pins ConfigMap get/update to the shard
names of the configured collectors and the legacy ConfigMap, grants create unpinned and no list.
The store, opened with those collectors' shards (discovery by name, what the runtime does for
the config the chart renders), must do everything it does in the namespace scope: open, migrate
from legacy, persist, take ownership, meet a conflict, refuse an oversize shard. Every request
it sends is judged by the API server's RBAC authorizer; none is a list. What the Role does not
grant (a list, a get or an update of an unrelated ConfigMap) comes back 403.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from store_harness import LEGACY, KubeHarness, raw_shard
from test_kubernetes_backend import record_requests, role_allows

from checkpoint_runtime import inspection
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import ANNOTATION_MIGRATED, CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.errors import (
    ApiRefusedError,
    ConflictError,
    OversizeError,
    UnconfiguredShardError,
)
from checkpoint_runtime.legacy import encode_legacy
from checkpoint_runtime.naming import shard_name
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_runtime.store import Store
from checkpoint_runtime.workload import FeedWorkload

pytestmark = pytest.mark.apiserver

FEED = "tn/objectstore/feed-a"
FLOWLOGS = "tn/flowlogs"
RETIRED = "old/flowlogs"  # a collector of an earlier config, no longer configured
VALUES = {
    "rbac": {"scope": "names"},
    "checkpoint": {
        "legacyConfigMap": LEGACY,
        "collectors": [
            {"kind": "objectstore", "tailnet": "tn", "feed": "feed-a", "url": "file:///f"},
            {"kind": "flowlogs", "tailnet": "tn", "url": "http://flows.example:8080/v1"},
        ],
    },
}


@pytest.fixture
def kube(chart_install: Any, admin_core: client.CoreV1Api) -> Iterator[KubeHarness]:
    harness = KubeHarness(chart_install(VALUES), admin_core)
    yield harness
    for backend in harness.backends:
        backend.close()


@pytest.fixture
def shards(kube: KubeHarness) -> list[str]:
    """The shards the runtime reads for the config the chart rendered (its own derivation)."""
    parsed = runtime_settings.parse(kube.release.rendered_config)
    configured = runtime_settings.configured_shards(parsed)
    assert configured is not None, "the chart's names scope must select discovery by name"
    assert sorted(configured) == sorted([FEED, FLOWLOGS])
    return configured


@pytest.fixture
def role(kube: KubeHarness, control_plane: Any) -> Any:
    with control_plane.admin_api() as api:
        (found,) = client.RbacAuthorizationV1Api(api).list_namespaced_role(kube.namespace).items
    return found


def open_by_name(kube: KubeHarness, shards: list[str], writer: str, epoch: int) -> Store:
    backend = kube.backend(LEGACY)
    return Store.open(backend, writer=writer, epoch=epoch, shards=shards)


def test_the_role_pins_exactly_the_runtimes_names(
    kube: KubeHarness, shards: list[str], role: Any
) -> None:
    rules = [rule for rule in role.rules if "configmaps" in rule.resources]
    pinned = sorted(name for rule in rules for name in rule.resource_names or [])
    assert pinned == sorted([*(shard_name(kube.lease_name, s) for s in shards), LEGACY])
    assert all("list" not in rule.verbs for rule in rules)
    assert [rule.verbs for rule in rules if not rule.resource_names] == [["create"]]


def test_every_store_operation_works_with_the_pinned_role(
    kube: KubeHarness, shards: list[str], role: Any
) -> None:
    kube.write_legacy(LEGACY, encode_legacy({f"{FEED}/cursor": "from legacy"}))
    logs: list[list[Any]] = []

    def store(writer: str, epoch: int) -> Store:
        backend = kube.backend(LEGACY)
        assert isinstance(backend, KubernetesBackend)
        logs.append(record_requests(backend))
        return Store.open(backend, writer=writer, epoch=epoch, shards=shards)

    first = store("a", 1)  # get each shard (404), get legacy, create, update the legacy marker
    assert first.get(f"{FEED}/cursor") == "from legacy"
    assert ANNOTATION_MIGRATED in kube.legacy(LEGACY)[1]
    first.batch({f"{FEED}/seen/aWQ": "t", f"{FLOWLOGS}/cursor": "c"})  # update + create
    second = store("b", 2)
    assert second.get(f"{FLOWLOGS}/cursor") == "c"
    second.take_ownership()  # update
    first.set(f"{FEED}/cursor", "stale")
    with pytest.raises(ExceptionGroup) as conflict:
        first.flush()  # refused: the shard carries a newer epoch
    assert all(isinstance(e, ConflictError) for e in conflict.value.exceptions)

    rows = FeedWorkload(FEED, 40_000, "uuid").rows
    before = raw_shard(kube, FEED)
    for key, value in rows.items():
        second.set(key, value)
    with pytest.raises(ExceptionGroup) as oversize:
        second.flush()
    (error,) = oversize.value.exceptions
    assert isinstance(error, OversizeError)
    assert error.size > CONFIGMAP_VALUE_LIMIT
    assert raw_shard(kube, FEED) == before  # the stored shard is as it was

    recorded = [request for log in logs for request in log]
    outside = sorted({r for r in recorded if not role_allows([role], r)}, key=str)
    assert outside == [], f"the store needs more than the pinned Role grants: {outside}"
    assert {(r.resource, r.verb) for r in recorded} == {
        ("configmaps", verb) for verb in ("get", "create", "update")
    }


def test_a_list_and_any_other_config_map_are_refused(
    kube: KubeHarness, admin_core: client.CoreV1Api
) -> None:
    admin_core.create_namespaced_config_map(
        kube.namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="another-app"), data={"password": "x"}
        ),
    )
    configuration = kube.release.configuration()
    configuration.retries = 0
    with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        refused = []
        # another application's ConfigMap, and the runtime's own config ("<fullname>-config")
        for name in ("another-app", f"{kube.lease_name}-config"):
            with pytest.raises(client.ApiException) as read:
                core.read_namespaced_config_map(name, kube.namespace)
            refused.append(read.value.status)
            with pytest.raises(client.ApiException) as update:
                core.replace_namespaced_config_map(
                    name,
                    kube.namespace,
                    client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name)),
                )
            refused.append(update.value.status)
        with pytest.raises(client.ApiException) as listed:
            core.list_namespaced_config_map(kube.namespace)
        refused.append(listed.value.status)
    assert refused == [403] * 5
    # and a store that discovers by label cannot open under this Role
    with pytest.raises(ApiRefusedError) as label_discovery:
        Store.open(kube.backend(), writer="a", epoch=1)
    assert label_discovery.value.status == 403


def test_retired_shards_stay_and_inspect_from_outside_reports_them(
    kube: KubeHarness, shards: list[str], control_plane: Any
) -> None:
    """A shard of a collector no longer configured is neither read nor written by the runtime
    (it has no right to), and never dropped: an operator's label listing still shows it."""
    admin = KubernetesBackend(control_plane.configuration(), kube.namespace, kube.lease_name)
    try:
        Store.open(admin, writer="earlier-release", epoch=1).batch({f"{RETIRED}/cursor": "kept"})
        store = open_by_name(kube, shards, "a", 2)
        assert store.get(f"{RETIRED}/cursor") is None
        with pytest.raises(UnconfiguredShardError, match=RETIRED):
            store.set(f"{RETIRED}/cursor", "overwritten")
        operator = Store.open(admin, writer="inspect", migrate=False)  # what `inspect` does
        reported = {row["shard"] for row in inspection.report(operator)["shards"]}
        assert RETIRED in reported
        assert operator.get(f"{RETIRED}/cursor") == "kept"
    finally:
        admin.close()


def test_legacy_rows_of_unconfigured_collectors_are_refused_before_any_write(
    kube: KubeHarness, shards: list[str]
) -> None:
    value = encode_legacy({f"{FEED}/cursor": "a", f"{RETIRED}/cursor": "b"})
    kube.write_legacy(LEGACY, value)
    with pytest.raises(UnconfiguredShardError, match=RETIRED) as refused:
        open_by_name(kube, shards, "a", 1)
    assert "nothing was migrated" in str(refused.value)
    assert kube.object_names() == []
    assert kube.legacy(LEGACY) == (value, {})
