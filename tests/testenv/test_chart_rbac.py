"""After `helm install`, the chart's ServiceAccount has exactly the permissions the store needs.

Every request here is a real one, authenticated with a TokenRequest token for the chart's
ServiceAccount and judged by the API server's RBAC authorizer: the allowed ones must succeed and
every other verb, resource, name or namespace must come back 403.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane

OTHER_LEASE = "someone-elses-lease"


@dataclass
class Subject:
    """The chart's identity plus the places it may and may not touch."""

    release: helm.Release
    core: client.CoreV1Api
    leases: client.CoordinationV1Api
    other_namespace: str

    @property
    def namespace(self) -> str:
        return self.release.coordination_namespace


def config_map(name: str, **fields: Any) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), **fields)


def lease(name: str, holder: str) -> client.V1Lease:
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15),
    )


@pytest.fixture(scope="module")
def subject(control_plane: ControlPlane) -> Iterator[Subject]:
    """One install for the module: these tests only read the permissions, never change them."""
    release = helm.install(control_plane, control_plane.create_namespace("rbac"))
    other = control_plane.create_namespace("other")
    with control_plane.admin_api() as admin:
        # Objects the chart must not reach, so a 403 cannot be mistaken for a 404.
        client.CoreV1Api(admin).create_namespaced_config_map(other, config_map("theirs"))
        client.CoordinationV1Api(admin).create_namespaced_lease(
            release.coordination_namespace, lease(OTHER_LEASE, "someone")
        )
        client.CoreV1Api(admin).create_namespaced_config_map(
            release.coordination_namespace, config_map("existing", data={"v": "1"})
        )
    with api_client(release.configuration()) as api:
        yield Subject(release, client.CoreV1Api(api), client.CoordinationV1Api(api), other)


def test_chart_install_fixture_gives_the_chart_identity(
    chart_install: Callable[..., helm.Release], control_plane: ControlPlane
) -> None:
    release = chart_install()
    assert release.name == helm.DEFAULT_RELEASE
    assert release.rendered_config["store"]["backend"] == "kubernetes"
    with control_plane.admin_api() as admin:
        review = client.AuthenticationV1Api(admin).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=release.token))
        )
    assert review.status.authenticated
    expected = f"system:serviceaccount:{release.namespace}:{release.service_account}"
    assert review.status.user.username == expected


def test_service_account_can_create_get_list_and_update_config_maps(subject: Subject) -> None:
    core, namespace = subject.core, subject.namespace
    created = core.create_namespaced_config_map(namespace, config_map("shard-0", data={"v": "1"}))
    assert core.read_namespaced_config_map("shard-0", namespace).data == {"v": "1"}
    names = {item.metadata.name for item in core.list_namespaced_config_map(namespace).items}
    assert {"shard-0", "existing"} <= names
    created.data = {"v": "2"}
    updated = core.replace_namespaced_config_map("shard-0", namespace, created)
    assert updated.data == {"v": "2"}


def test_service_account_can_create_get_and_update_its_lease(subject: Subject) -> None:
    leases, namespace, name = subject.leases, subject.namespace, subject.release.lease_name
    leases.create_namespaced_lease(namespace, lease(name, "replica-a"))
    current = leases.read_namespaced_lease(name, namespace)
    current.spec.holder_identity = "replica-b"
    assert leases.replace_namespaced_lease(name, namespace, current).spec.holder_identity == (
        "replica-b"
    )


Forbidden = Callable[[Subject], object]
FORBIDDEN: dict[str, Forbidden] = {
    "delete configmap": lambda s: s.core.delete_namespaced_config_map("existing", s.namespace),
    "watch configmaps": lambda s: s.core.list_namespaced_config_map(
        s.namespace, watch=True, timeout_seconds=1
    ),
    "patch configmap": lambda s: s.core.patch_namespaced_config_map(
        "existing", s.namespace, {"data": {"v": "patched"}}
    ),
    "deletecollection configmaps": lambda s: s.core.delete_collection_namespaced_config_map(
        s.namespace
    ),
    "get secrets": lambda s: s.core.read_namespaced_secret("anything", s.namespace),
    "list secrets": lambda s: s.core.list_namespaced_secret(s.namespace),
    "create secret": lambda s: s.core.create_namespaced_secret(
        s.namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="mine"))
    ),
    "list pods": lambda s: s.core.list_namespaced_pod(s.namespace),
    "get configmap in another namespace": lambda s: s.core.read_namespaced_config_map(
        "theirs", s.other_namespace
    ),
    "list configmaps in another namespace": lambda s: s.core.list_namespaced_config_map(
        s.other_namespace
    ),
    "create configmap in another namespace": lambda s: s.core.create_namespaced_config_map(
        s.other_namespace, config_map("intruder")
    ),
    "list configmaps in all namespaces": lambda s: s.core.list_config_map_for_all_namespaces(),
    "get another lease": lambda s: s.leases.read_namespaced_lease(OTHER_LEASE, s.namespace),
    "update another lease": lambda s: s.leases.replace_namespaced_lease(
        OTHER_LEASE, s.namespace, lease(OTHER_LEASE, "hijacked")
    ),
    "list leases": lambda s: s.leases.list_namespaced_lease(s.namespace),
    "delete own lease": lambda s: s.leases.delete_namespaced_lease(
        s.release.lease_name, s.namespace
    ),
    "patch own lease": lambda s: s.leases.patch_namespaced_lease(
        s.release.lease_name, s.namespace, {"spec": {"holderIdentity": "patched"}}
    ),
    "create lease in another namespace": lambda s: s.leases.create_namespaced_lease(
        s.other_namespace, lease(s.release.lease_name, "replica-a")
    ),
}


@pytest.mark.parametrize("attempt", FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_everything_else_is_forbidden(subject: Subject, attempt: Forbidden) -> None:
    with pytest.raises(ApiException) as raised:
        attempt(subject)
    assert raised.value.status == 403
    assert '"reason":"Forbidden"' in raised.value.body


def test_a_forbidden_probe_passes_once_rbac_grants_it(
    chart_install: Callable[..., helm.Release], control_plane: ControlPlane
) -> None:
    """The 403s above come from the chart's Role, not from a broken token: grant one more verb
    beside the chart and the same probe succeeds."""
    release = chart_install()
    namespace = release.coordination_namespace
    account = client.RbacV1Subject(
        kind="ServiceAccount", name=release.service_account, namespace=release.namespace
    )
    with control_plane.admin_api() as admin:
        rbac = client.RbacAuthorizationV1Api(admin)
        rbac.create_namespaced_role(
            namespace,
            client.V1Role(
                metadata=client.V1ObjectMeta(name="extra"),
                rules=[
                    client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["delete"])
                ],
            ),
        )
        rbac.create_namespaced_role_binding(
            namespace,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="extra"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="Role", name="extra"
                ),
                subjects=[account],
            ),
        )
        client.CoreV1Api(admin).create_namespaced_config_map(namespace, config_map("existing"))
    with client.ApiClient(release.configuration()) as api:
        core = client.CoreV1Api(api)
        leases = client.CoordinationV1Api(api)
        FORBIDDEN["delete configmap"](Subject(release, core, leases, "unused"))
