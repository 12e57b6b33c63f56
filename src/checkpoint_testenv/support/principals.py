"""The identities that may act on a store's namespace, each with a real credential.

A principal is a client of the real API server as one identity: a release's ServiceAccount (a
TokenRequest token, what its pods hold), a namespace user with the built-in `edit` role (a
ServiceAccount of its own, bound to the ClusterRole the API server bootstraps), the cluster
administrator (the static token in system:masters), or an operator the administrator
impersonates with chosen groups (the Impersonate-User/-Group headers `kubectl --as
--as-group` sends; the API server judges the request as that user and those groups).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_testenv.controlplane import ControlPlane


@dataclass
class Principal:
    """One identity's clients of the core and coordination APIs."""

    name: str
    core: client.CoreV1Api
    leases: client.CoordinationV1Api


@contextmanager
def principal(
    plane: ControlPlane,
    name: str,
    token: str | None = None,
    impersonate: tuple[str, str | None] | None = None,
) -> Iterator[Principal]:
    """A principal with `token` (the administrator without one), optionally impersonating
    (user, group or None) as `kubectl --as=<user> [--as-group=<group>]` does."""
    with api_client(plane.configuration(token=token)) as api:
        if impersonate is not None:
            user, group = impersonate
            api.set_default_header("Impersonate-User", user)
            if group is not None:
                api.set_default_header("Impersonate-Group", group)
        yield Principal(name, client.CoreV1Api(api), client.CoordinationV1Api(api))


def aggregate(api: client.ApiClient, role: str) -> None:
    """Fill the built-in ClusterRole `role` (edit, admin, view: aggregated roles the API server
    bootstraps with an aggregationRule and no rules) with the rules of the ClusterRoles its
    selectors match: the work of kube-controller-manager's clusterrole-aggregation controller,
    which the bare control plane does not run. Idempotent."""
    rbac = client.RbacAuthorizationV1Api(api)
    aggregated = rbac.read_cluster_role(role)
    rules: list[client.V1PolicyRule] = []
    assert aggregated.aggregation_rule is not None, f"{role} is not an aggregated ClusterRole"
    for selector in aggregated.aggregation_rule.cluster_role_selectors or []:
        labels = ",".join(f"{k}={v}" for k, v in sorted((selector.match_labels or {}).items()))
        for source in rbac.list_cluster_role(label_selector=labels).items:
            if source.aggregation_rule is not None:  # view is aggregated into edit, and so on
                name = str(source.metadata and source.metadata.name)
                aggregate(api, name)
                source = rbac.read_cluster_role(name)
            rules.extend(rule for rule in source.rules or [] if rule not in rules)
    aggregated.rules = rules
    rbac.replace_cluster_role(role, aggregated)


def namespace_user(plane: ControlPlane, namespace: str, role: str = "edit") -> str:
    """A ServiceAccount in `namespace` bound there to the built-in ClusterRole `role` (a
    namespace user as a platform team makes one); its token."""
    name = f"user-{role}"
    with plane.admin_api() as api:
        aggregate(api, role)
        client.CoreV1Api(api).create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
        )
        bind(
            api,
            namespace,
            name,
            role,
            client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=namespace),
        )
    return plane.service_account_token(namespace, name)


def bind_user(plane: ControlPlane, namespace: str, user: str, role: str = "edit") -> None:
    """Bind the built-in ClusterRole `role` to the user `user` in `namespace`."""
    with plane.admin_api() as api:
        aggregate(api, role)
        subject = client.RbacV1Subject(
            kind="User", name=user, api_group="rbac.authorization.k8s.io"
        )
        bind(api, namespace, f"{user}-{role}", role, subject)


def bind(
    api: client.ApiClient, namespace: str, name: str, role: str, subject: client.RbacV1Subject
) -> None:
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name=name),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role
            ),
            subjects=[subject],
        ),
    )


def refused(attempt: Callable[[], object]) -> ApiException:
    """The ApiException `attempt` raises (AssertionError when it succeeds)."""
    try:
        attempt()
    except ApiException as error:
        return error
    raise AssertionError("the request was allowed")


def wait_until_refused(probe: Callable[[], object], timeout_seconds: float = 60) -> None:
    """Admission policies and bindings reach the API server's admission cache asynchronously:
    repeat `probe` (a dry run: admission runs, nothing is stored) until admission refuses it."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            probe()
        except ApiException as error:
            if error.status == 403 and "denied request" in str(error.body):
                return
            raise
        assert time.monotonic() < deadline, "the admission policy was never enforced"
        time.sleep(0.1)  # a dry run: the caller goes on within 0.1 s of the policy's arrival
