"""rbac.scope=names on the real API server, as the chart's ServiceAccount.

The chart is installed with the names scope, so its Role pins ConfigMap get/update to the shard
names of the configured collectors (each head and its 2 x maxChunks chunk slots) and the legacy
ConfigMap, grants create unpinned and no list.
The store, opened with those collectors' shards (discovery by name, what the runtime does for
the config the chart renders), must do everything it does in the namespace scope: open, migrate
from legacy, persist, take ownership, meet a conflict, refuse an oversize shard. Every request
it sends is judged by the API server's RBAC authorizer; none is a list. What the Role does not
grant (a list, a get or an update of an unrelated ConfigMap) comes back 403.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from store_harness import LEGACY, OVERSIZE_ROWS, KubeHarness, raw_shard, refused_oversize

from checkpoint_gate.paths import CHART_DIR
from checkpoint_runtime import cli
from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import (
    ANNOTATION_MIGRATED,
    CHUNK_GENERATIONS,
    CONFIGMAP_VALUE_LIMIT,
    DEFAULT_MAX_CHUNKS,
)
from checkpoint_runtime.errors import (
    ApiRefusedError,
    ConflictError,
    UnconfiguredShardError,
)
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.naming import chunk_slot_name, shard_name
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import helm
from checkpoint_testenv.support.rbac import RecordedStores

pytestmark = pytest.mark.apiserver

FEED = "tn/objectstore/feed-a"
FLOWLOGS = "tn/flowlogs"
RETIRED = "old/flowlogs"  # a collector of an earlier config, no longer configured
VALUES = {
    "rbac": {"scope": "names"},
    "checkpoint": {
        "store": {"legacyConfigMap": LEGACY},
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
    harness.close()


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
    heads = [shard_name(kube.lease_name, s) for s in shards]
    slots = [
        chunk_slot_name(head, generation, index)
        for head in heads
        for generation in CHUNK_GENERATIONS
        for index in range(DEFAULT_MAX_CHUNKS)
    ]
    assert pinned == sorted([*heads, *slots, LEGACY])
    assert all("list" not in rule.verbs for rule in rules)
    assert [rule.verbs for rule in rules if not rule.resource_names] == [["create"]]


def test_every_store_operation_works_with_the_pinned_role(
    kube: KubeHarness, shards: list[str], role: Any
) -> None:
    kube.write_legacy(LEGACY, encode_legacy({f"{FEED}/cursor": "from legacy"}))
    # maxChunks 1: the OVERSIZE_ROWS state below cannot fit, whatever the chunk slots allow
    stores = RecordedStores(lambda: kube.backend(LEGACY), {"shards": shards, "max_chunks": 1})

    # get each shard (404), get legacy, create, update the legacy marker
    first = stores.open("a", 1)
    assert first.get(f"{FEED}/cursor") == "from legacy"
    assert ANNOTATION_MIGRATED in kube.legacy(LEGACY)[1]
    first.batch({f"{FEED}/seen/aWQ": "t", f"{FLOWLOGS}/cursor": "c"})  # update + create
    second = stores.open("b", 2)
    assert second.get(f"{FLOWLOGS}/cursor") == "c"
    second.take_ownership()  # update
    first.set(f"{FEED}/cursor", "stale")
    with pytest.raises(ExceptionGroup) as conflict:
        first.flush()  # refused: the shard carries a newer epoch
    assert all(isinstance(e, ConflictError) for e in conflict.value.exceptions)

    rows = FeedWorkload(FEED, OVERSIZE_ROWS, "uuid").rows
    before = raw_shard(kube, FEED)
    error = refused_oversize(second, rows)
    assert error.size > CONFIGMAP_VALUE_LIMIT
    assert raw_shard(kube, FEED) == before  # the stored shard is as it was

    recorded = stores.requests
    outside = stores.outside([role])
    assert outside == [], f"the store needs more than the pinned Role grants: {outside}"
    assert {(r.resource, r.verb) for r in recorded} == {
        ("configmaps", verb) for verb in ("get", "create", "update")
    }


def test_a_chunked_shard_grows_and_reopens_through_the_pinned_role(
    kube: KubeHarness, shards: list[str], role: Any
) -> None:
    """A state past one object spreads over chunk slots; every slot the store reads or writes
    is one the Role pins, and a new store reads it back by name."""
    stores = RecordedStores(lambda: kube.backend(LEGACY), {"shards": shards})
    store = stores.open("a", 1)
    rows = FeedWorkload(FEED, 40_000, "uuid").rows
    store.batch(rows)
    store.batch({f"{FEED}/cursor": "after"})  # a head-only persist
    reopened = stores.open("b", 1)  # reads the head, then each active chunk slot by name
    assert reopened.get(f"{FEED}/cursor") == "after"
    assert len(reopened.items(f"{FEED}/seen/")) == sum("/seen/" in key for key in rows)
    heads = {shard_name(kube.lease_name, s) for s in shards}
    slot_names = {r.name for r in stores.requests if r.name} - heads - {LEGACY}
    assert slot_names, "the 40,000-row state should have been read back from chunk slots"
    head = shard_name(kube.lease_name, FEED)
    assert all(name.startswith(f"{head}-c") for name in slot_names)
    assert sum(r.verb == "create" for r in stores.requests) > len(shards)  # slots created
    outside = stores.outside([role])
    assert outside == [], f"the store needs more than the pinned Role grants: {outside}"
    assert {r.verb for r in stores.requests} <= {"get", "create", "update"}


def test_a_list_and_any_other_config_map_are_refused(
    kube: KubeHarness, admin_core: client.CoreV1Api
) -> None:
    admin_core.create_namespaced_config_map(
        kube.namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="another-app"), data={"password": "x"}
        ),
    )
    with api_client(kube.release.configuration()) as api:
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
    kube: KubeHarness,
    shards: list[str],
    control_plane: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A shard of a collector no longer configured is neither read nor written by the runtime
    (it has no right to), and never dropped: `inspect --config` with an operator's credentials
    lists it, marked as owned by no configured collector."""
    admin = KubernetesBackend(control_plane.configuration(), kube.namespace, kube.lease_name)
    try:
        Store.open(admin, writer="earlier-release", epoch=1).batch({f"{RETIRED}/cursor": "kept"})
    finally:
        admin.close()
    store = open_by_name(kube, shards, "a", 2)
    store.batch({f"{FEED}/cursor": "now"})
    assert store.get(f"{RETIRED}/cursor") is None
    with pytest.raises(UnconfiguredShardError, match=RETIRED):
        store.set(f"{RETIRED}/cursor", "overwritten")

    config = tmp_path / "config.json"
    config.write_text(json.dumps(kube.release.rendered_config))
    where = ["--config", str(config), "--kubeconfig", str(control_plane.kubeconfig)]
    assert cli.main(["inspect", *where, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    marks = {row["shard"]: row["configured"] for row in document["shards"]}
    assert marks == {RETIRED: False, FEED: True}
    assert document["unconfigured_shards"] == [RETIRED]
    assert cli.main(["inspect", *where]) == 0
    table = capsys.readouterr().out
    assert f"1 shard(s) of collectors not in the config: {RETIRED} (kept, never deleted" in table
    assert "CONFIGURED" in table.splitlines()[0]


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


def test_helm_upgrade_adding_a_collector_extends_the_pinned_names(
    kube: KubeHarness, shards: list[str], control_plane: Any, tmp_path: Path
) -> None:
    """Before the upgrade the new collector's shard is out of the Role's reach (its get is
    refused); `helm upgrade` with the collector added pins its name, and the store configured
    with it then reads and writes it (the render tests show Helm applies the Role first)."""
    added = "tn2/objectstore/feed-b"
    with pytest.raises(ApiRefusedError) as before:
        kube.backend().read_shard(added, Deadline(30))
    assert before.value.status == 403

    values = json.loads(json.dumps(VALUES))
    values["checkpoint"]["collectors"].append(
        {"kind": "objectstore", "tailnet": "tn2", "feed": "feed-b", "url": "file:///g"}
    )
    values_file = tmp_path / "upgrade-values.json"
    values_file.write_text(json.dumps(values))
    chart = str(CHART_DIR)
    release = kube.release
    helm.run(control_plane, "upgrade", release.name, chart, "--namespace", release.namespace,
             "--values", str(values_file))  # fmt: skip

    upgraded = runtime_settings.configured_shards(
        runtime_settings.parse(
            helm.read_rendered_config(control_plane, release.namespace, f"{kube.lease_name}-config")
        )
    )
    assert upgraded is not None
    assert sorted(upgraded) == sorted([*shards, added])
    store = open_by_name(kube, upgraded, "a", 1)
    store.batch({f"{added}/cursor": "first"})  # create
    store.batch({f"{added}/cursor": "second"})  # update, by the pinned name
    assert open_by_name(kube, upgraded, "b", 2).get(f"{added}/cursor") == "second"
