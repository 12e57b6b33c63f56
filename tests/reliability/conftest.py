"""Fixtures of the reliability campaign: one chart install per module, stores as its account."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.support.kubetarget import KubeTarget


@pytest.fixture(scope="module")
def release(control_plane: ControlPlane) -> helm.Release:
    """The chart installed once per module: its ServiceAccount's RBAC is what stores get."""
    return helm.install(control_plane, control_plane.create_namespace("rel"))


@pytest.fixture
def target(control_plane: ControlPlane, release: helm.Release) -> Iterator[KubeTarget]:
    """Stores act as the chart's ServiceAccount; the checker reads as admin."""
    with control_plane.admin_api() as api:
        kube = KubeTarget.of_release(release, client.CoreV1Api(api))
        yield kube
        kube.close()
