"""The chart installed by the helm CLI into the real kube-apiserver, and its RBAC exercised.

Rendering proves the templates; installing proves the API server accepts every object the
matrix produces (server-side validation, not a schema copy), and the ServiceAccount token shows
that the Role grants exactly SPEC §10: what the store needs is allowed, everything else is 403.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART_DIR, CI_VALUES, load_yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_testenv.controlplane import ControlPlane  # type: ignore[import-untyped, unused-ignore]
from checkpoint_testenv.helm import Release  # type: ignore[import-untyped, unused-ignore]

Installer = Callable[..., Release]
# prometheus-operator kinds need CRDs the test control plane does not have.
WITHOUT_CRD_KINDS = {"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}}


def installable(values: dict[str, Any], coordination_namespace: str) -> dict[str, Any]:
    """A CI values document adapted to a shared API server: fresh namespaces, no CRD kinds."""
    adapted = copy.deepcopy(values)
    for key, override in WITHOUT_CRD_KINDS.items():
        adapted.setdefault(key, {}).update(override)
    store = adapted.get("checkpoint", {}).get("store", {})
    if store.get("namespace"):
        store["namespace"] = coordination_namespace
    return adapted


def helm_install(
    plane: ControlPlane, namespace: str, values: dict[str, Any], tmp: Path
) -> list[Any]:
    """`helm install` with the pinned CLI; returns the manifest the server accepted.

    Called directly (not through chart_install) because this test covers the file store too,
    which has no Lease for that fixture to report.
    """
    values_file = tmp / "values.json"
    values_file.write_text(json.dumps(values))
    env = {"HOME": str(tmp), "HELM_CACHE_HOME": str(tmp / "cache"), "HELM_CONFIG_HOME": str(tmp)}
    command = [str(plane.bin_dir / "helm"), "install", "cr", str(CHART_DIR), "--namespace"]
    command += [namespace, "--values", str(values_file), "--kubeconfig", str(plane.kubeconfig)]
    command += ["--output", "json"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)["manifest"]
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


@pytest.mark.parametrize("values_file", CI_VALUES, ids=lambda path: path.name)
def test_api_server_accepts_every_object_of_the_matrix(
    control_plane: ControlPlane, tmp_path: Path, values_file: Any
) -> None:
    namespace = control_plane.create_namespace("chart")
    coordination = control_plane.create_namespace("coord")
    values = installable(load_yaml(values_file), coordination)
    manifest = helm_install(control_plane, namespace, values, tmp_path)
    assert {"Deployment", "ConfigMap", "Service"} <= {obj["kind"] for obj in manifest}
    with control_plane.admin_api() as api:
        stored = client.AppsV1Api(api).read_namespaced_deployment(
            "cr-checkpoint-runtime", namespace
        )
        roles = client.RbacAuthorizationV1Api(api).list_namespaced_role(coordination).items
    assert stored.spec is not None
    assert stored.spec.template.spec is not None
    pod_security = stored.spec.template.spec.security_context
    assert pod_security is not None
    assert pod_security.run_as_non_root is True
    if values.get("checkpoint", {}).get("store", {}).get("namespace"):
        assert [(role.metadata or client.V1ObjectMeta()).name for role in roles] == [
            "cr-checkpoint-runtime"
        ]


@pytest.fixture
def installed(chart_install: Installer) -> Release:
    return chart_install()


@pytest.fixture
def as_chart(installed: Release) -> Iterator[client.ApiClient]:
    with api_client(installed.configuration()) as api:
        yield api


def allowed(
    api: client.ApiClient, namespace: str, verb: str, resource: str, name: str | None = None
) -> bool:
    """SelfSubjectAccessReview as the chart's ServiceAccount: the authorizer's own verdict."""
    group, _, plural = resource.rpartition("/")
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                namespace=namespace, verb=verb, group=group, resource=plural, name=name
            )
        )
    )
    answer = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
    assert answer.status is not None
    return bool(answer.status.allowed)


def test_service_account_has_exactly_the_spec_permissions(
    control_plane: ControlPlane, installed: Release, as_chart: client.ApiClient
) -> None:
    ns, lease = installed.namespace, installed.lease_name
    for verb in ("get", "list", "update", "create"):
        assert allowed(as_chart, ns, verb, "configmaps"), verb
    for verb in ("delete", "deletecollection", "watch", "patch"):
        assert not allowed(as_chart, ns, verb, "configmaps"), verb
    assert allowed(as_chart, ns, "create", "coordination.k8s.io/leases")
    for verb in ("get", "update"):
        assert allowed(as_chart, ns, verb, "coordination.k8s.io/leases", name=lease), verb
        assert not allowed(as_chart, ns, verb, "coordination.k8s.io/leases", name="other"), verb
    for verb in ("list", "watch", "patch", "delete"):
        assert not allowed(as_chart, ns, verb, "coordination.k8s.io/leases", name=lease), verb
    for resource in ("secrets", "pods", "serviceaccounts", "rbac.authorization.k8s.io/roles"):
        assert not allowed(as_chart, ns, "get", resource), resource
    elsewhere = control_plane.create_namespace("elsewhere")
    assert not allowed(as_chart, elsewhere, "list", "configmaps")
    assert not allowed(as_chart, elsewhere, "create", "coordination.k8s.io/leases")


def test_shard_lifecycle_calls_succeed_and_delete_is_forbidden(
    installed: Release, as_chart: client.ApiClient
) -> None:
    core = client.CoreV1Api(as_chart)
    ns = installed.namespace
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="shard-probe", labels={"probe": "yes"}),
        data={"k": "v"},
    )
    created = core.create_namespaced_config_map(ns, body)
    listed = core.list_namespaced_config_map(ns, label_selector="probe=yes")
    assert [(item.metadata or client.V1ObjectMeta()).name for item in listed.items] == [
        "shard-probe"
    ]
    created.data = {"k": "v2"}
    core.replace_namespaced_config_map("shard-probe", ns, created)
    with pytest.raises(ApiException) as forbidden:
        core.delete_namespaced_config_map("shard-probe", ns)
    assert forbidden.value.status == 403


def test_file_store_install_grants_nothing(control_plane: ControlPlane, tmp_path: Path) -> None:
    namespace = control_plane.create_namespace("file")
    manifest = helm_install(
        control_plane, namespace, {"checkpoint": {"store": {"backend": "file"}}}, tmp_path
    )
    assert not {"Role", "RoleBinding"} & {obj["kind"] for obj in manifest}
    token = control_plane.service_account_token(namespace, "cr-checkpoint-runtime")
    with api_client(control_plane.configuration(token=token)) as api:
        assert not allowed(api, namespace, "list", "configmaps")
        assert not allowed(api, namespace, "create", "coordination.k8s.io/leases")
