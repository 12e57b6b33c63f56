"""The control plane's own contract: state survives restarts, and other clients can use it."""

from __future__ import annotations

import time
from collections.abc import Callable

import pykube
import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_testenv.controlplane import ControlPlane


def read_when_back(read: Callable[[], client.V1ConfigMap], seconds: float) -> client.V1ConfigMap:
    """The apiserver's etcd client reconnects with backoff; give it a moment."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return read()
        except (ApiException, urllib3.exceptions.HTTPError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_state_survives_apiserver_and_etcd_restarts(
    control_plane: ControlPlane, namespace: str
) -> None:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="durable"), data={"v": "1"})
    with control_plane.admin_api() as api:
        client.CoreV1Api(api).create_namespaced_config_map(namespace, body)

    control_plane.restart_apiserver()
    control_plane.restart_etcd()

    with control_plane.admin_api() as api:
        core = client.CoreV1Api(api)
        stored = read_when_back(lambda: core.read_namespaced_config_map("durable", namespace), 20)
    assert stored.data == {"v": "1"}


def test_requests_fail_while_etcd_is_down_and_work_after_it_starts(
    control_plane: ControlPlane, namespace: str
) -> None:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"v": "1"})
    with api_client(control_plane.configuration()) as api:
        core = client.CoreV1Api(api)
        control_plane.kill_etcd()
        try:
            assert not control_plane.etcd_running
            with pytest.raises((ApiException, urllib3.exceptions.HTTPError)):
                core.create_namespaced_config_map(namespace, body, _request_timeout=3)
        finally:
            control_plane.start_etcd()
        read_when_back(lambda: core.create_namespaced_config_map(namespace, body), 20)
        assert core.read_namespaced_config_map("cm", namespace).data == {"v": "1"}


def test_kubeconfig_serves_pytest_helm_charts_kube_cluster(
    kube_cluster: object, namespace: str
) -> None:
    """pytest-helm-charts' `kube_cluster` (pykube) is pointed at this control plane."""
    api = kube_cluster.kube_client  # type: ignore[attr-defined]
    names = {ns.name for ns in pykube.Namespace.objects(api)}
    assert namespace in names
