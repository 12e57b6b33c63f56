"""Every cell of the threat table in docs/rbac.md (checkpoint_gate.threats), on the real API server.

Per layout, the store's release (alpha, elected, its flow-log head written) and a neighbour
release (beta) are installed with the layout's values; each identity sends each attempt with its
own credential: the release ServiceAccounts' TokenRequest tokens, a ServiceAccount bound to the
built-in `edit` ClusterRole, the administrator's static token. Every attempt is a server-side
dry run: authentication, authorization and admission judge it exactly as a real request, and
nothing is stored, so one store serves every identity. A create of an object that exists comes
back AlreadyExists only after authorization and admission let it through: that is the proof a
squat before the store would have succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_gate.threats import ATTEMPTS, EXPECTED, LAYOUTS, PRINCIPALS, Outcome
from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.format.naming import shard_labels, shard_name
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.principals import (
    Principal,
    namespace_user,
    principal,
    wait_until_refused,
)

pytestmark = pytest.mark.apiserver

FLOWLOGS, FEED = "flowlogs", "objectstore/audit"
DRY = "All"


def values(layout: str, coordination: str | None) -> dict[str, Any]:
    store: dict[str, Any] = {"namespace": coordination} if coordination else {}
    return {
        "admissionPolicy": {"enabled": layout == "names+admission"},
        "rbac": {"scope": "namespace" if layout in ("namespace", "own-namespace") else "names"},
        "checkpoint": {
            "store": store,
            "collectors": [
                {"kind": "flowlogs", "url": "http://flows.example:8080/v1"},
                {"kind": "objectstore", "feed": "audit", "url": "file:///f"},
            ],
        },
    }


@dataclass
class Layout:
    name: str
    alpha: helm.Release
    principals: dict[str, Principal]

    @property
    def namespace(self) -> str:
        return self.alpha.coordination_namespace

    def head(self, shard: str = FLOWLOGS) -> str:
        return shard_name(self.alpha.lease_name, shard)


@pytest.fixture(scope="module", params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest, control_plane: ControlPlane) -> Iterator[Layout]:
    name: str = request.param
    plane = control_plane
    release_namespace = plane.create_namespace("threat")
    coordination = plane.create_namespace("own") if name == "own-namespace" else None
    beta = helm.install(
        plane,
        release_namespace,
        {**values(name, None), "admissionPolicy": {"enabled": False}},
        release="beta",
    )
    alpha = helm.install(plane, release_namespace, values(name, coordination), release="alpha")
    editor = namespace_user(plane, release_namespace)
    with plane.admin_api() as admin_api:
        target = KubeTarget.of_release(alpha, client.CoreV1Api(admin_api))
        with api_client(alpha.configuration()) as api:
            lock = KubernetesLeaseLock(api, alpha.coordination_namespace, alpha.lease_name, "a-0")
            assert LeaderElector(lock).try_acquire_or_renew(timeout=10)
        config = runtime_settings.parse(alpha.rendered_config)
        shards = runtime_settings.configured_shards(config)
        Store.open(target.backend(), writer="a-0", epoch=1, shards=shards).batch(
            {f"{FLOWLOGS}/cursor": "c"}
        )
        target.close()
    tokens = {"store": alpha.token, "neighbour": beta.token, "editor": editor, "admin": None}
    with (
        principal(plane, "store", tokens["store"]) as store,
        principal(plane, "neighbour", tokens["neighbour"]) as neighbour,
        principal(plane, "editor", tokens["editor"]) as edit_user,
        principal(plane, "admin") as admin,
    ):
        found = Layout(
            name,
            alpha,
            {"store": store, "neighbour": neighbour, "editor": edit_user, "admin": admin},
        )
        if name == "names+admission":
            wait_until_refused(
                lambda: neighbour.core.create_namespaced_config_map(
                    found.namespace,
                    client.V1ConfigMap(metadata=client.V1ObjectMeta(name=found.head(FEED))),
                    dry_run=DRY,
                )
            )
        yield found


def _read_head(layout: Layout) -> client.V1ConfigMap:
    """The head as an attacker would send it back (read as admin: a forger can guess every
    field but the resourceVersion, which the update needs)."""
    with layout.alpha.plane.admin_api() as api:
        return client.CoreV1Api(api).read_namespaced_config_map(layout.head(), layout.namespace)


def _forge(layout: Layout, who: Principal) -> object:
    head = _read_head(layout)  # labels kept: a forger copies them
    head.data = {**(head.data or {}), "forged": "cursor 2099-01-01T00:00:00Z"}
    return who.core.replace_namespaced_config_map(
        layout.head(), layout.namespace, head, dry_run=DRY
    )


def _hold(layout: Layout, who: Principal) -> object:
    with layout.alpha.plane.admin_api() as api:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            layout.alpha.lease_name, layout.namespace
        )
    lease.spec.holder_identity = "squatter"
    lease.spec.lease_duration_seconds = 2147483647
    return who.leases.replace_namespaced_lease(
        layout.alpha.lease_name, layout.namespace, lease, dry_run=DRY
    )


Attempt = Callable[[Layout, Principal], object]
SEND: dict[str, Attempt] = {
    "read": lambda s, who: who.core.read_namespaced_config_map(s.head(), s.namespace),
    "squat-head": lambda s, who: who.core.create_namespaced_config_map(
        s.namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=s.head(FEED), labels=shard_labels(s.alpha.lease_name)
            ),
            data={"forged": "x"},
        ),
        dry_run=DRY,
    ),
    "forge-head": _forge,
    "delete-head": lambda s, who: who.core.delete_namespaced_config_map(
        s.head(), s.namespace, dry_run=DRY
    ),
    "squat-lease": lambda s, who: who.leases.create_namespaced_lease(
        s.namespace,
        client.V1Lease(
            metadata=client.V1ObjectMeta(name=s.alpha.lease_name),
            spec=client.V1LeaseSpec(holder_identity="squatter", lease_duration_seconds=15),
        ),
        dry_run=DRY,
    ),
    "hold-lease": _hold,
    "delete-lease": lambda s, who: who.leases.delete_namespaced_lease(
        s.alpha.lease_name, s.namespace, dry_run=DRY
    ),
}


def outcome_of(attempt: Callable[[], object]) -> tuple[Outcome, str]:
    try:
        attempt()
    except ApiException as error:
        body = str(error.body)
        if error.status == 409 and '"reason":"AlreadyExists"' in body:
            return Outcome.ALLOWED, body  # past authorization and admission
        if error.status == 403:
            return (Outcome.ADMISSION if "denied request" in body else Outcome.RBAC), body
        raise
    return Outcome.ALLOWED, ""


@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_each_identity_can_do_exactly_what_the_table_says(layout: Layout, who: str) -> None:
    actor = layout.principals[who]
    expected = EXPECTED[(layout.name, who)]
    seen = {}
    for attempt in ATTEMPTS:
        outcome, body = outcome_of(lambda: SEND[attempt](layout, actor))  # noqa: B023
        seen[attempt] = outcome
        if outcome is Outcome.ADMISSION:
            assert f"checkpoint store of release {layout.alpha.name}" in body, body
    assert seen == expected
