"""Fixtures of the compatibility tier: each test asks for `minor_control_plane` (or `kube_minor`)
and so runs once per Kubernetes minor of the matrix, on that minor's own kube-apiserver (the
servers of one minor start once per session, one minor at a time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.support.kubetarget import KubeTarget


@pytest.fixture
def admin(minor_control_plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    with minor_control_plane.admin_api() as api:
        yield client.CoreV1Api(api)


@pytest.fixture
def install(minor_control_plane: ControlPlane) -> Any:
    """Factory: helm-install the chart with `values` into a fresh namespace of this minor."""

    def installed(values: dict[str, Any] | None = None) -> helm.Release:
        namespace = minor_control_plane.create_namespace("compat")
        return helm.install(minor_control_plane, namespace, values)

    return installed


@pytest.fixture
def release(install: Any) -> helm.Release:
    """The chart with its defaults (namespace scope), in a namespace of the test's own."""
    installed: helm.Release = install()
    return installed


@pytest.fixture
def target(release: helm.Release, admin: client.CoreV1Api) -> Iterator[KubeTarget]:
    """The release's store as its ServiceAccount (a TokenRequest token), and the admin view."""
    found = KubeTarget.of_release(release, admin)
    yield found
    found.close()
