"""The chart's opt-in admission policy on the real API server, as the chart's ServiceAccount.

`helm install` with admissionPolicy.enabled renders a ValidatingAdmissionPolicy and its binding;
the API server (v1.36, ValidatingAdmissionPolicy GA) then judges every ConfigMap and Lease write
of the chart's ServiceAccount (a TokenRequest token, exactly what the pod holds). What RBAC
cannot pin is refused by admission, with the policy's message: a ConfigMap create outside the
store's derived names and labels, a Lease create other than the store's own, and (namespace
scope, where RBAC grants update on every ConfigMap) an update of an object that is not the
store's. The store's own life cycle still works with the policy on: elect (Lease create),
migrate from legacy, persist, take over, and grow into chunk slots by their derived names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.constants import (
    ANNOTATION_MIGRATED,
    COMPONENT_CHUNK,
    COMPONENT_SHARD,
    LABEL_COMPONENT,
    LABEL_STORE,
)
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.naming import chunk_labels, shard_labels, shard_name, store_label
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.support.kubetarget import KubeTarget

pytestmark = pytest.mark.apiserver

LEGACY = "collector-checkpoints"
FEED = "tn/objectstore/feed-a"
FLOWLOGS = "tn/flowlogs"
MAX_CHUNKS = 8  # the chunk slots per generation the chart pins (checkpoint.store.maxChunks)
SCOPES = ["namespace", "names"]


def values(scope: str) -> dict[str, Any]:
    return {
        "admissionPolicy": {"enabled": True},
        "rbac": {"scope": scope},
        "checkpoint": {
            "store": {"legacyConfigMap": LEGACY},
            "collectors": [
                {"kind": "objectstore", "tailnet": "tn", "feed": "feed-a", "url": "file:///f"},
                {"kind": "flowlogs", "tailnet": "tn", "url": "http://flows.example:8080/v1"},
            ],
        },
    }


@dataclass
class Subject:
    """A release with the policy on, and clients as its ServiceAccount and as admin."""

    release: helm.Release
    scope: str
    core: client.CoreV1Api
    leases: client.CoordinationV1Api
    admin: client.CoreV1Api

    @property
    def namespace(self) -> str:
        return self.release.coordination_namespace

    @property
    def lease(self) -> str:
        return self.release.lease_name

    def head(self, shard: str = FLOWLOGS) -> str:
        return shard_name(self.lease, shard)


def config_map(name: str, labels: dict[str, str] | None = None) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels), data={"v": "1"}
    )


def lease_object(name: str) -> client.V1Lease:
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1LeaseSpec(holder_identity="x", lease_duration_seconds=15),
    )


def pinned_names(subject: Subject) -> set[str]:
    """The ConfigMap names the release's Role pins (names scope)."""
    with subject.release.plane.admin_api() as api:
        (role,) = client.RbacAuthorizationV1Api(api).list_namespaced_role(subject.namespace).items
    return {name for rule in role.rules for name in rule.resource_names or []}


def wait_until_enforced(subject: Subject) -> None:
    """The policy and its binding reach the API server's admission cache asynchronously: probe
    with a dry-run create (admission runs, nothing is stored) until it is refused."""
    deadline = time.monotonic() + 60
    while True:
        try:
            subject.core.create_namespaced_config_map(
                subject.namespace, config_map("enforcement-probe"), dry_run="All"
            )
        except ApiException as refused:
            if refused.status == 403 and "denied request" in str(refused.body):
                return
            raise
        assert time.monotonic() < deadline, "the admission policy was never enforced"
        time.sleep(0.1)  # a dry run: the test goes on within 0.1 s of the policy being enforced


@pytest.fixture(scope="module", params=SCOPES)
def subject(request: pytest.FixtureRequest, control_plane: ControlPlane) -> Iterator[Subject]:
    scope: str = request.param
    release = helm.install(
        control_plane, control_plane.create_namespace(f"vap-{scope}"), values(scope)
    )
    with api_client(release.configuration()) as api, control_plane.admin_api() as admin_api:
        admin = client.CoreV1Api(admin_api)
        # Objects that exist before the pod acts: an application's ConfigMap and the legacy one.
        admin.create_namespaced_config_map(
            release.coordination_namespace, config_map("another-app")
        )
        found = Subject(release, scope, client.CoreV1Api(api), client.CoordinationV1Api(api), admin)
        wait_until_enforced(found)
        yield found


def assert_refused_by_admission(subject: Subject, attempt: Callable[[], object], what: str) -> None:
    with pytest.raises(ApiException) as refused:
        attempt()
    body = str(refused.value.body)
    policy = f"{subject.release.name}-checkpoint-runtime.{subject.release.namespace}"
    assert refused.value.status == 403, body
    assert f"ValidatingAdmissionPolicy '{policy}'" in body, body
    assert "denied request" in body, body
    assert f"checkpoint-runtime admission policy {policy}" in body, body
    assert what in body, body


# Each attempt: (name, call, what the policy's message says). All are creates and updates RBAC
# lets through in the scope; admission alone refuses them.
Attempt = Callable[[Subject], object]


def _create(
    name: Callable[[Subject], str], labels: Callable[[Subject], dict[str, str] | None]
) -> Attempt:
    return lambda s: s.core.create_namespaced_config_map(
        s.namespace, config_map(name(s), labels(s))
    )


CREATE_REFUSED = "may create only its store's shard and chunk-slot ConfigMaps"
CREATES: dict[str, tuple[Attempt, str]] = {
    "create an unrelated ConfigMap": (_create(lambda s: "mine", lambda s: None), CREATE_REFUSED),
    "create an unrelated name with the store's labels": (
        _create(lambda s: "mine-labelled", lambda s: shard_labels(s.lease)),
        CREATE_REFUSED,
    ),
    "create a shard name without the store's labels": (
        _create(lambda s: s.head(), lambda s: None),
        CREATE_REFUSED,
    ),
    "create a shard name labelled as another store's": (
        _create(lambda s: s.head(), lambda s: shard_labels("another-release")),
        CREATE_REFUSED,
    ),
    "create another release's future shard": (
        _create(lambda s: shard_name("another-release", FLOWLOGS), lambda s: shard_labels(s.lease)),
        CREATE_REFUSED,
    ),
    "create a shard of an unconfigured collector": (
        _create(
            lambda s: shard_name(s.lease, "tn/objectstore/feed-z"), lambda s: shard_labels(s.lease)
        ),
        CREATE_REFUSED,
    ),
    "create a chunk slot past maxChunks": (
        _create(lambda s: f"{s.head()}-ca{MAX_CHUNKS}", lambda s: chunk_labels(s.lease)),
        CREATE_REFUSED,
    ),
    "create a chunk slot of a third generation": (
        _create(lambda s: f"{s.head()}-cc0", lambda s: chunk_labels(s.lease)),
        CREATE_REFUSED,
    ),
    "create a ConfigMap named like the runtime's config": (
        _create(lambda s: f"{s.lease}-config-2", lambda s: shard_labels(s.lease)),
        CREATE_REFUSED,
    ),
    "create another Lease": (
        lambda s: s.leases.create_namespaced_lease(
            s.namespace, lease_object("someone-elses-lease")
        ),
        "may create only its own Lease",
    ),
}

UPDATE_REFUSED = "may update only ConfigMaps that carry its store's labels before and after"


def _update(name: str, labels: Callable[[Subject], dict[str, str] | None]) -> Attempt:
    def attempt(s: Subject) -> object:
        current = s.core.read_namespaced_config_map(name, s.namespace)
        current.metadata.labels = labels(s)
        current.data = {"v": "overwritten"}
        return s.core.replace_namespaced_config_map(name, s.namespace, current)

    return attempt


# Namespace scope only: there RBAC grants update on every ConfigMap of the namespace.
UPDATES: dict[str, tuple[Attempt, str]] = {
    "update another application's ConfigMap": (
        _update("another-app", lambda s: None),
        UPDATE_REFUSED,
    ),
    "hijack another ConfigMap by adding the store's labels": (
        _update("another-app", lambda s: shard_labels(s.lease)),
        UPDATE_REFUSED,
    ),
    "update the runtime's own config": (
        _update("cr-checkpoint-runtime-config", lambda s: None),
        UPDATE_REFUSED,
    ),
}


@pytest.mark.parametrize("name", sorted(CREATES))
def test_a_create_outside_the_store_is_refused_by_admission(subject: Subject, name: str) -> None:
    attempt, message = CREATES[name]
    assert_refused_by_admission(subject, lambda: attempt(subject), message)


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_an_update_outside_the_store_is_refused_by_admission(subject: Subject, name: str) -> None:
    if subject.scope == "names":
        pytest.skip("names scope: RBAC already refuses updates outside the pinned names (403)")
    attempt, message = UPDATES[name]
    assert_refused_by_admission(subject, lambda: attempt(subject), message)


def test_the_store_life_cycle_works_under_the_policy(subject: Subject) -> None:
    """Elect, migrate, persist, take over, and grow into chunk slots, all as the ServiceAccount."""
    target = KubeTarget.of_release(subject.release, subject.admin)
    try:
        with api_client(subject.release.configuration()) as api:
            lock = KubernetesLeaseLock(api, subject.namespace, subject.lease, "replica-a")
            assert LeaderElector(lock).try_acquire_or_renew(timeout=10)  # creates the Lease

            target.write_legacy(LEGACY, encode_legacy({f"{FEED}/cursor": "from legacy"}))
            parsed = runtime_settings.parse(subject.release.rendered_config)
            shards = runtime_settings.configured_shards(parsed)
            assert (shards is None) is (subject.scope == "namespace")
            first = Store.open(
                target.backend(legacy_name=LEGACY), writer="a", epoch=1, shards=shards
            )
            assert first.get(f"{FEED}/cursor") == "from legacy"  # migrated: shard create
            assert ANNOTATION_MIGRATED in target.legacy(LEGACY)[1]  # legacy mark: update
            first.batch({f"{FEED}/cursor": "persisted", f"{FLOWLOGS}/cursor": "c"})
            second = Store.open(
                target.backend(legacy_name=LEGACY), writer="b", epoch=2, shards=shards
            )
            second.take_ownership()  # every shard restamped: updates
            second.batch({f"{FEED}/cursor": "after takeover"})
            third = Store.open(
                target.backend(legacy_name=LEGACY), writer="c", epoch=3, shards=shards
            )
            assert third.get(f"{FEED}/cursor") == "after takeover"

            # The store grows past one object into chunk slots it creates itself, and a new
            # leader reads them back by name.
            grown = FeedWorkload(FEED, 10_000, "uuid").rows
            third.batch(grown)
            fourth = Store.open(
                target.backend(legacy_name=LEGACY), writer="d", epoch=4, shards=shards
            )
            assert len(fourth.items(f"{FEED}/seen/")) == sum("/seen/" in key for key in grown)
            slots = subject.admin.list_namespaced_config_map(
                subject.namespace, label_selector=f"{LABEL_COMPONENT}={COMPONENT_CHUNK}"
            ).items
            assert slots, "a 10,000-row state should have grown into chunk slots"
            feed_head = subject.head(FEED)
            assert all(slot.metadata.name.startswith(f"{feed_head}-c") for slot in slots)
            head = subject.head()

            # The last slot of each generation (indexes below maxChunks) can be created too.
            for slot in (f"{head}-ca{MAX_CHUNKS - 1}", f"{head}-cb{MAX_CHUNKS - 1}"):
                created = subject.core.create_namespaced_config_map(
                    subject.namespace, config_map(slot, chunk_labels(subject.lease))
                )
                assert created.metadata.labels[LABEL_STORE] == store_label(subject.lease)
                assert created.metadata.labels[LABEL_COMPONENT] == COMPONENT_CHUNK
            last = f"{head}-ca{MAX_CHUNKS - 1}"
            if subject.scope == "namespace" or last in pinned_names(subject):
                slot = subject.core.read_namespaced_config_map(last, subject.namespace)
                slot.data = {"v": "2"}
                subject.core.replace_namespaced_config_map(last, subject.namespace, slot)
            stored = subject.admin.read_namespaced_config_map(head, subject.namespace)
            assert stored.metadata.labels[LABEL_COMPONENT] == COMPONENT_SHARD

            if subject.scope == "namespace":  # RBAC would let this update through
                stored.metadata.labels = {}
                assert_refused_by_admission(
                    subject,
                    lambda: subject.core.replace_namespaced_config_map(
                        head, subject.namespace, stored
                    ),
                    UPDATE_REFUSED,
                )
    finally:
        target.close()
