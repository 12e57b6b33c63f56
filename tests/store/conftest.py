"""Fixtures of the store tests: a harness per backend (see store_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from store_harness import FileHarness, Harness, KubeHarness

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_testenv.helm import ReleasePool


@pytest.fixture
def admin_core(control_plane: Any) -> Iterator[client.CoreV1Api]:
    with control_plane.admin_api() as api:
        yield client.CoreV1Api(api)


@pytest.fixture(scope="session")
def default_releases(control_plane: Any) -> Iterator[ReleasePool]:
    """The chart with its defaults, each release in a fresh namespace, one installed ahead."""
    pool = ReleasePool(control_plane)
    yield pool
    pool.close()


@pytest.fixture
def kube(
    default_releases: ReleasePool, admin_core: client.CoreV1Api, chart_install: Any
) -> Iterator[KubeHarness]:
    """The chart installed with its defaults into a namespace of the test's own (as
    `chart_install()` does; installed while the previous test ran). `chart_install` is asked
    for, not called: the plugin fails a test that reaches it unmarked `apiserver`."""
    del chart_install
    harness = KubeHarness(default_releases.take(), admin_core)
    yield harness
    harness.close()


@pytest.fixture(params=["file", pytest.param("kubernetes", marks=pytest.mark.apiserver)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    """Each behavioural test runs on the file backend and on the real API server."""
    if request.param == "file":
        return FileHarness(tmp_path / "checkpoints")
    kube_harness: KubeHarness = request.getfixturevalue("kube")
    return kube_harness


@pytest.fixture
def kube_api(kube: KubeHarness) -> Iterator[client.ApiClient]:
    """An admin client with the kubernetes client's own retries off."""
    api = api_client(kube.release.configuration())
    yield api
    api.close()
