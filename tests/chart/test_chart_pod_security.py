"""Every pod the chart can start passes Kubernetes' own Pod Security admission, profile restricted.

The gate's policies restate the restricted profile; this asks the upstream implementation. A
namespace labelled `pod-security.kubernetes.io/enforce: restricted` makes the kube-apiserver's
PodSecurity admission reject a non-conforming Pod, and a server-side dry run evaluates the Pod
without storing it. The runtime's pod template and the helm test pod are both submitted.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from chart_helpers import CI_VALUES, Manifest, Render, load_yaml, one
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_testenv.controlplane import ControlPlane  # type: ignore[import-untyped, unused-ignore]

ENFORCE = {"pod-security.kubernetes.io/enforce": "restricted"}


@pytest.fixture(scope="module")
def restricted_namespace(control_plane: ControlPlane) -> str:
    name: str = control_plane.create_namespace("restricted")
    with control_plane.admin_api() as api:
        client.CoreV1Api(api).patch_namespace(name, {"metadata": {"labels": ENFORCE}})
    return name


@pytest.fixture
def core(control_plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    with control_plane.admin_api() as api:
        yield client.CoreV1Api(api)


def pods_of(objects: list[Manifest]) -> list[Manifest]:
    """The runtime pod (from the Deployment's template) and the helm test pod."""
    template = one(objects, "Deployment")["spec"]["template"]
    runtime = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "runtime", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    return [runtime, one(objects, "Pod")]


def admit(core: client.CoreV1Api, namespace: str, pod: Manifest) -> None:
    body: Any = copy.deepcopy(pod)  # the client sends plain dicts as they are
    body["metadata"].pop("namespace", None)
    core.create_namespaced_pod(namespace, body, dry_run="All")


def ensure_priority_class(control_plane: ControlPlane, name: str) -> None:
    """A pod naming a PriorityClass is admitted only when the class exists (a platform's own)."""
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"}
    body |= {"metadata": {"name": name}, "value": 1000}
    with control_plane.admin_api() as api:
        try:
            client.SchedulingV1Api(api).create_priority_class(body)
        except ApiException as error:
            if error.status != 409:
                raise


@pytest.mark.parametrize("values_file", CI_VALUES, ids=lambda path: path.name)
def test_chart_pods_pass_restricted_pod_security_admission(
    render: Render,
    core: client.CoreV1Api,
    control_plane: ControlPlane,
    restricted_namespace: str,
    values_file: Any,
) -> None:
    values = load_yaml(values_file)
    if values.get("priorityClassName"):
        ensure_priority_class(control_plane, values["priorityClassName"])
    for pod in pods_of(render(values)):
        admit(core, restricted_namespace, pod)


@pytest.mark.parametrize(
    ("field", "value"),
    [("allowPrivilegeEscalation", True), ("capabilities", {"add": ["NET_RAW"]})],
)
def test_admission_rejects_a_weakened_pod(
    render: Render,
    core: client.CoreV1Api,
    restricted_namespace: str,
    field: str,
    value: Any,
) -> None:
    """The control: the same namespace refuses the chart's pod with one field weakened."""
    pod = pods_of(render())[0]
    pod["spec"]["containers"][0]["securityContext"][field] = value
    with pytest.raises(ApiException) as refused:
        admit(core, restricted_namespace, pod)
    assert refused.value.status == 403
    assert "restricted" in str(refused.value.body)
