"""With admissionPolicy.enabled, a store's names are its own: no neighbour can squat or forge them.

Three releases share one coordination namespace on the real API server, each `rbac.scope:
names`: alpha and gamma with the admission policy on, beta without. Every request is sent with a
real credential: beta's ServiceAccount token (the neighbour), the token of a namespace user
bound to the built-in `edit` ClusterRole, the administrator's static token (system:masters), and
an operator the administrator impersonates (`kubectl --as --as-group`). The attacks of a hostile
neighbour (squat a head or a chunk slot, forge a head, squat, hold or delete the Lease) are
refused, by admission where RBAC lets them through, with a message naming the owning release
and its ServiceAccount; alpha keeps electing and writing. Gamma's names were squatted by beta
before gamma was installed: an operator in the break-glass group deletes the squatted objects
(gamma's own Role gains nothing) and gamma elects and writes.
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
from checkpoint_runtime.constants import LABEL_STORE
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.format.naming import chunk_labels, shard_labels, shard_name, store_label
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.principals import (
    Principal,
    bind_user,
    namespace_user,
    principal,
    refused,
    wait_until_refused,
)

pytestmark = pytest.mark.apiserver

FLOWLOGS = "flowlogs"
FEED = "objectstore/audit"
BREAK_GLASS = (
    "checkpoint-runtime:break-glass"  # the chart's default admissionPolicy.breakGlassGroup
)
ONCALL = "oncall@example.com"
SQUATTER = "beta-squatter"
FOREVER = 2147483647  # the largest leaseDurationSeconds the API server takes


def values(policy: bool, feed: bool = False) -> dict[str, Any]:
    collectors: list[dict[str, Any]] = [{"kind": "flowlogs", "url": "http://flows.example:8080/v1"}]
    if feed:
        collectors.append({"kind": "objectstore", "feed": "audit", "url": "file:///f"})
    return {
        "admissionPolicy": {"enabled": policy},
        "rbac": {"scope": "names"},
        "checkpoint": {"collectors": collectors},
    }


def config_map(
    name: str, labels: dict[str, str] | None, data: str = "forged"
) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels), data={"v": data}
    )


def lease(name: str, holder: str = SQUATTER, seconds: int = FOREVER) -> client.V1Lease:
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=seconds),
    )


def owner_message(release: helm.Release) -> str:
    account = f"system:serviceaccount:{release.namespace}:{release.service_account}"
    return f"belongs to the checkpoint store of release {release.name} (ServiceAccount {account})"


@dataclass
class Neighbourhood:
    plane: ControlPlane
    namespace: str
    alpha: helm.Release
    beta: helm.Release
    gamma: helm.Release
    neighbour: Principal
    editor: Principal

    def head(self, release: helm.Release, shard: str = FLOWLOGS) -> str:
        return shard_name(release.lease_name, shard)


def write_state(
    release: helm.Release, admin: client.CoreV1Api, rows: dict[str, str], epoch: int = 1
) -> Store:
    """Elect (the Lease) and persist `rows` as the release's own ServiceAccount."""
    target = KubeTarget.of_release(release, admin)
    with api_client(release.configuration()) as api:
        lock = KubernetesLeaseLock(api, release.coordination_namespace, release.lease_name, "r-0")
        assert LeaderElector(lock).try_acquire_or_renew(timeout=10)
    shards = runtime_settings.configured_shards(runtime_settings.parse(release.rendered_config))
    store = Store.open(target.backend(), writer="r-0", epoch=epoch, shards=shards)
    store.batch(rows)
    return store


@pytest.fixture(scope="module")
def hood(control_plane: ControlPlane) -> Iterator[Neighbourhood]:
    plane = control_plane
    namespace = plane.create_namespace("iso")
    beta = helm.install(plane, namespace, values(policy=False), release="beta")
    editor_token = namespace_user(plane, namespace)
    bind_user(plane, namespace, ONCALL)
    with principal(plane, "neighbour", beta.token) as neighbour:
        # Before gamma exists, beta squats the names gamma's store will use (they derive from
        # the release name): its Lease, held "forever", and its flow-log head.
        gamma_lease = "gamma-checkpoint-runtime"
        neighbour.leases.create_namespaced_lease(namespace, lease(gamma_lease))
        neighbour.core.create_namespaced_config_map(
            namespace, config_map(shard_name(gamma_lease, FLOWLOGS), shard_labels(gamma_lease))
        )
        alpha = helm.install(plane, namespace, values(policy=True, feed=True), release="alpha")
        gamma = helm.install(plane, namespace, values(policy=True), release="gamma")
        assert gamma.lease_name == gamma_lease
        with principal(plane, "edit user", editor_token) as editor:
            found = Neighbourhood(plane, namespace, alpha, beta, gamma, neighbour, editor)
            wait_until_refused(
                lambda: neighbour.core.create_namespaced_config_map(
                    namespace,
                    config_map(found.head(alpha), shard_labels(alpha.lease_name)),
                    dry_run="All",
                )
            )
            wait_until_refused(
                lambda: editor.core.delete_namespaced_config_map(
                    found.head(gamma), namespace, dry_run="All"
                )
            )
            with plane.admin_api() as admin_api:
                write_state(alpha, client.CoreV1Api(admin_api), {f"{FLOWLOGS}/cursor": "c1"})
            yield found


Attack = Callable[[Neighbourhood, Principal], object]


def _head(h: Neighbourhood) -> str:
    return h.head(h.alpha)


def _forge(h: Neighbourhood, who: Principal) -> object:
    head = who_reads(h, who, _head(h))
    head.data = {"v": "cursor 2099-01-01T00:00:00Z"}
    return who.core.replace_namespaced_config_map(_head(h), h.namespace, head)


def who_reads(h: Neighbourhood, who: Principal, name: str) -> client.V1ConfigMap:
    """The object as `who` would send it back: read as admin when `who` may not read it (an
    attacker can guess every field but the resourceVersion, which update needs)."""
    with h.plane.admin_api() as api:
        return client.CoreV1Api(api).read_namespaced_config_map(name, h.namespace)


def _hold_lease(h: Neighbourhood, who: Principal) -> object:
    with h.plane.admin_api() as api:
        current = client.CoordinationV1Api(api).read_namespaced_lease(
            h.alpha.lease_name, h.namespace
        )
    current.spec.holder_identity = SQUATTER
    current.spec.lease_duration_seconds = FOREVER
    return who.leases.replace_namespaced_lease(h.alpha.lease_name, h.namespace, current)


ATTACKS: dict[str, Attack] = {
    "squat a head": lambda h, who: who.core.create_namespaced_config_map(
        h.namespace, config_map(h.head(h.alpha, FEED), shard_labels(h.alpha.lease_name))
    ),
    "squat a chunk slot": lambda h, who: who.core.create_namespaced_config_map(
        h.namespace, config_map(f"{_head(h)}-ca0", chunk_labels(h.alpha.lease_name))
    ),
    "squat the Lease of a store not yet elected": lambda h, who: who.leases.create_namespaced_lease(
        h.namespace, lease(h.gamma.lease_name)
    ),
    "forge a head": _forge,
    "patch a head": lambda h, who: who.core.patch_namespaced_config_map(
        _head(h), h.namespace, {"data": {"v": "cursor 2099-01-01T00:00:00Z"}}
    ),
    "delete a head": lambda h, who: who.core.delete_namespaced_config_map(_head(h), h.namespace),
    "delete the store's ConfigMaps by label": lambda h, who: (
        who.core.delete_collection_namespaced_config_map(
            h.namespace, label_selector=f"{LABEL_STORE}={store_label(h.alpha.lease_name)}"
        )
    ),
    "hold the Lease forever": _hold_lease,
    "delete the Lease": lambda h, who: who.leases.delete_namespaced_lease(
        h.alpha.lease_name, h.namespace
    ),
}
# What the neighbour's Role (names scope) lets through to admission: create, never pinned.
NEIGHBOUR_PAST_RBAC = {
    "squat a head",
    "squat a chunk slot",
    "squat the Lease of a store not yet elected",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("who", ["neighbour", "edit user"])
def test_no_one_else_can_squat_forge_or_stall_the_store(
    hood: Neighbourhood, who: str, attack: str
) -> None:
    actor = hood.neighbour if who == "neighbour" else hood.editor
    error = refused(lambda: ATTACKS[attack](hood, actor))
    body = str(error.body)
    assert error.status == 403, body
    if who == "edit user" or attack in NEIGHBOUR_PAST_RBAC:
        target = hood.gamma if "not yet elected" in attack else hood.alpha
        assert "denied request" in body, body
        assert owner_message(target) in body, body
    else:
        assert "cannot" in body, body  # RBAC's own refusal
        assert "denied request" not in body, body


def test_the_victim_keeps_electing_and_writing(hood: Neighbourhood) -> None:
    with hood.plane.admin_api() as admin_api:
        admin = client.CoreV1Api(admin_api)
        store = write_state(hood.alpha, admin, {f"{FEED}/cursor": "f1"}, epoch=2)
        assert store.get(f"{FLOWLOGS}/cursor") == "c1"
        held = client.CoordinationV1Api(admin_api).read_namespaced_lease(
            hood.alpha.lease_name, hood.namespace
        )
    assert held.spec.holder_identity == "r-0"


def test_names_outside_the_store_stay_free(hood: Neighbourhood) -> None:
    """The edit user keeps its rights on every other name, the neighbour on its own store."""
    core, namespace = hood.editor.core, hood.namespace
    created = core.create_namespaced_config_map(namespace, config_map("another-app", None, "1"))
    created.data = {"v": "2"}
    core.replace_namespaced_config_map("another-app", namespace, created)
    core.delete_namespaced_config_map("another-app", namespace)
    with hood.plane.admin_api() as admin_api:
        store = write_state(hood.beta, client.CoreV1Api(admin_api), {f"{FLOWLOGS}/cursor": "b"})
    assert store.get(f"{FLOWLOGS}/cursor") == "b"


def test_the_break_glass_group_recovers_a_squatted_store(hood: Neighbourhood) -> None:
    gamma, namespace = hood.gamma, hood.namespace
    squatted = [("Lease", gamma.lease_name), ("ConfigMap", hood.head(gamma))]
    with api_client(gamma.configuration()) as api:
        lock = KubernetesLeaseLock(api, namespace, gamma.lease_name, "g-0")
        assert not LeaderElector(lock).try_acquire_or_renew(timeout=10)  # held "forever"
        with pytest.raises(ApiException) as own:  # the store's Role has no delete, still
            client.CoordinationV1Api(api).delete_namespaced_lease(gamma.lease_name, namespace)
        assert own.value.status == 403
        assert "cannot delete" in str(own.value.body)

    def delete(who: Principal, kind: str, name: str) -> object:
        if kind == "Lease":
            return who.leases.delete_namespaced_lease(name, namespace)
        return who.core.delete_namespaced_config_map(name, namespace)

    with principal(hood.plane, "on call", impersonate=(ONCALL, None)) as outside:
        for kind, name in squatted:
            error = refused(lambda: delete(outside, kind, name))  # noqa: B023 (called at once)
            assert error.status == 403
            assert owner_message(gamma) in str(error.body)
    # kubectl -n <namespace> delete lease <lease> --as=<you> --as-group=<breakGlassGroup>
    with principal(hood.plane, "on call", impersonate=(ONCALL, BREAK_GLASS)) as operator:
        for kind, name in squatted:
            delete(operator, kind, name)
    with hood.plane.admin_api() as admin_api:
        store = write_state(gamma, client.CoreV1Api(admin_api), {f"{FLOWLOGS}/cursor": "g"})
    assert store.get(f"{FLOWLOGS}/cursor") == "g"


def test_the_largest_store_the_schema_admits_is_judged_within_the_cost_budget(
    hood: Neighbourhood,
) -> None:
    """32 collectors (the schema's most) of 256 chunk slots per generation (its most): the API
    server takes both policies (it estimates their cost at creation, strictly since 1.32) and
    judges the costliest request, a name checked against every head and its slot indexes, with
    the policy's own refusal rather than a cost error."""
    feeds = [
        {"kind": "objectstore", "tailnet": "t" * 40, "feed": f"feed-{i:02d}", "url": "file:///f"}
        for i in range(32)
    ]
    largest = {
        "admissionPolicy": {"enabled": True},
        "rbac": {"scope": "namespace"},
        "checkpoint": {"store": {"maxChunks": 256}, "collectors": feeds},
    }
    namespace = hood.plane.create_namespace("largest")
    release = helm.install(hood.plane, namespace, largest, release="largest")
    last = shard_name(release.lease_name, f"{'t' * 40}/objectstore/feed-31")
    slot = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"{last}-cb255", labels=chunk_labels(release.lease_name))
    )
    bind_user(hood.plane, namespace, ONCALL)
    with principal(hood.plane, "on call", impersonate=(ONCALL, None)) as oncall:
        wait_until_refused(
            lambda: oncall.core.create_namespaced_config_map(namespace, slot, dry_run="All")
        )
        error = refused(
            lambda: oncall.core.create_namespaced_config_map(namespace, slot, dry_run="All")
        )
    assert error.status == 403
    assert owner_message(release) in str(error.body), error.body


def test_a_namespace_being_deleted_lets_its_store_objects_go(hood: Neighbourhood) -> None:
    """The namespace controller empties a deleted namespace with deletecollection as itself:
    while the namespace terminates, the reserved names no longer hold it back."""
    plane = hood.plane
    namespace = plane.create_namespace("ending")
    delta = helm.install(plane, namespace, values(policy=True), release="delta")
    token = namespace_user(plane, namespace)
    with plane.admin_api() as admin_api:
        write_state(delta, client.CoreV1Api(admin_api), {f"{FLOWLOGS}/cursor": "d"})
    head = shard_name(delta.lease_name, FLOWLOGS)
    with principal(plane, "edit user", token) as editor:
        wait_until_refused(
            lambda: editor.core.delete_namespaced_config_map(head, namespace, dry_run="All")
        )
        with plane.admin_api() as admin_api:
            client.CoreV1Api(admin_api).delete_namespace(namespace)
        # the policy sees the namespace through the API server's informer: allowed once it knows
        deadline = time.monotonic() + 30
        while error := failure(lambda: editor.core.delete_namespaced_config_map(head, namespace)):
            assert error.status == 403, error.body
            assert owner_message(delta) in str(error.body), error.body
            assert time.monotonic() < deadline, "still refused in a terminating namespace"
            time.sleep(0.1)


def failure(attempt: Callable[[], object]) -> ApiException | None:
    """The ApiException `attempt` raises, None when it succeeds."""
    try:
        attempt()
    except ApiException as error:
        return error
    return None
