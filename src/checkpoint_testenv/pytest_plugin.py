"""pytest fixtures for the real test control plane (registered from tests/conftest.py).

`control_plane` starts one etcd + kube-apiserver per session, lazily, only when a test asks for
it (`small_quota_control_plane` a separate one per test module whose etcd has a small space
quota, for tests that fill it); `node_cluster` likewise starts one whole node (control plane,
kubelet, containerd, CNI, kube-proxy, CoreDNS, the project's image imported) once per session,
`s3_server` one S3-compatible server (SeaweedFS) and `oci_registry` one OCI registry (crane
registry serve). If the binaries are missing or cannot be built, or the machine cannot run a
node, the fixture errors with the reason: a test that needs them must never pass or skip
silently without them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from checkpoint_testenv import binaries, helm, matrix, registry, s3server
from checkpoint_testenv.controlplane import (
    SMALL_ETCD_QUOTA_BYTES,
    ControlPlane,
    start_control_plane,
)
from checkpoint_testenv.faultproxy import FaultProxy, ProxyPool
from checkpoint_testenv.node import images, preflight
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.registry import Registry, start_registry
from checkpoint_testenv.s3server import S3Server, start_s3_server

ChartInstaller = Callable[..., helm.Release]
ProxyFactory = Callable[[], FaultProxy]

_APISERVER_FIXTURES = {
    "control_plane",
    "namespace",
    "chart_install",
    "fault_proxy",
    "small_quota_control_plane",
    "minor_control_plane",
}
_NODE_FIXTURES = {"node_cluster"}
_S3_FIXTURES = {"s3_server", "s3_bucket"}
_REGISTRY_FIXTURES = {"oci_registry"}
_STARTED = pytest.StashKey[list[ControlPlane]]()
_NODES = pytest.StashKey[list[NodeCluster]]()
_S3_STARTED = pytest.StashKey[list[S3Server]]()
_REGISTRIES = pytest.StashKey[list[Registry]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that use the control plane `apiserver`, the node `node` and the S3 server
    `s3` (for `-m`)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _APISERVER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.apiserver)
        if _S3_FIXTURES & fixtures:
            item.add_marker(pytest.mark.s3)
        if _REGISTRY_FIXTURES & fixtures:
            item.add_marker(pytest.mark.registry)
        if _NODE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.node)


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> None:
    """Fail a test that reaches the control plane unmarked (a fixture fetched it at run time
    with `request.getfixturevalue`): `-m "not apiserver"` would have selected it."""
    if fixturedef.argname not in _APISERVER_FIXTURES or fixturedef.scope != "function":
        return
    node = request.node
    if isinstance(node, pytest.Item) and node.get_closest_marker("apiserver") is None:
        pytest.fail(
            f"{node.nodeid} uses {fixturedef.argname!r} at run time but is not marked "
            "`apiserver`; mark the parameter or fixture that fetches it "
            "(pytest.param(..., marks=pytest.mark.apiserver))",
            pytrace=False,
        )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Report how long the control plane took to start, and every restart a test asked for."""
    for plane in config.stash.get(_STARTED, []):
        etcd = ", ".join(f"{seconds:.2f}" for seconds in plane.startup.etcd)
        apiserver = ", ".join(f"{seconds:.2f}" for seconds in plane.startup.apiserver)
        terminalreporter.write_line(
            f"testenv: control plane up in {plane.startup_total:.2f} s "
            f"(etcd ready [{etcd}] s, kube-apiserver ready [{apiserver}] s, restarts included)"
        )
    for node in config.stash.get(_NODES, []):
        times = node.times
        imports = ", ".join(
            f"{name} {seconds:.1f}" for name, seconds in times.image_imports.items()
        )
        terminalreporter.write_line(
            f"testenv: node up in {times.total:.1f} s (control plane {times.control_plane:.1f} s, "
            f"image imports [{imports}] s, kubelet to Ready {times.node_ready:.1f} s); "
            f"teardown {times.teardown:.1f} s"
        )
    for server in config.stash.get(_S3_STARTED, []):
        starts = ", ".join(f"{seconds:.2f}" for seconds in server.startups)
        terminalreporter.write_line(
            f"testenv: S3 server (SeaweedFS) ready in [{starts}] s (restarts included)"
        )
    for started in config.stash.get(_REGISTRIES, []):
        terminalreporter.write_line(
            f"testenv: OCI registry (crane) ready in {started.startup_seconds:.2f} s"
        )


@pytest.fixture(scope="session")
def control_plane(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[ControlPlane]:
    """One real etcd + kube-apiserver for the whole session."""
    yield from _started_control_plane(tmp_path_factory, pytestconfig, "controlplane")


@pytest.fixture(scope="module")
def small_quota_control_plane(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[ControlPlane]:
    """A separate etcd + kube-apiserver whose etcd quota is SMALL_ETCD_QUOTA_BYTES, for the
    tests of one module that fill it (a full etcd refuses every write: never the session's)."""
    yield from _started_control_plane(
        tmp_path_factory, pytestconfig, "smallquota", quota_backend_bytes=SMALL_ETCD_QUOTA_BYTES
    )


@pytest.fixture(scope="session", params=[minor.name for minor in matrix.matrix()])
def kube_minor(request: pytest.FixtureRequest) -> matrix.Minor:
    """Each Kubernetes minor of the matrix in turn (a test asking for it runs once per minor,
    with the minor's name, e.g. "1.34", in its id)."""
    return matrix.by_name(request.param)


@pytest.fixture(scope="session")
def minor_control_plane(
    kube_minor: matrix.Minor,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[ControlPlane]:
    """etcd + the kube-apiserver of `kube_minor`, started once per session for each minor (the
    main minor's is `control_plane`; another's runs over the main build's etcd), one at a time:
    pytest runs the tests of one minor together and stops its servers before the next."""
    if kube_minor.main:
        yield request.getfixturevalue("control_plane")
        return
    yield from _started_control_plane(
        tmp_path_factory, pytestconfig, f"controlplane-{kube_minor.name}", apiserver=kube_minor
    )


def _started_control_plane(
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
    folder: str,
    quota_backend_bytes: int | None = None,
    apiserver: matrix.Minor | None = None,
) -> Iterator[ControlPlane]:
    """Start a control plane in a fresh `folder` (reported in the summary), stop it after;
    with `apiserver`, that minor's kube-apiserver."""
    try:
        bin_dir = binaries.locate()
        binary = matrix.apiserver_binary(apiserver) if apiserver is not None else None
    except binaries.BinariesMissing as missing:
        pytest.fail(f"test control plane unavailable: {missing}", pytrace=False)
    plane = start_control_plane(
        bin_dir,
        tmp_path_factory.mktemp(folder),
        quota_backend_bytes=quota_backend_bytes,
        apiserver=binary,
    )
    pytestconfig.stash.setdefault(_STARTED, []).append(plane)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def s3_server(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[S3Server]:
    """One real S3-compatible server (`weed server -s3`) for the whole session."""
    try:
        folder = s3server.locate()
    except binaries.BinariesMissing as missing:
        pytest.fail(f"S3 test server unavailable: {missing}", pytrace=False)
    server = start_s3_server(folder / "weed", tmp_path_factory.mktemp("s3server"))
    pytestconfig.stash.setdefault(_S3_STARTED, []).append(server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def oci_registry(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[Registry]:
    """One real OCI registry (`crane registry serve`) on loopback for the whole session."""
    try:
        folder = registry.locate()
    except binaries.BinariesMissing as missing:
        pytest.fail(f"OCI test registry unavailable: {missing}", pytrace=False)
    server = start_registry(folder / "crane", tmp_path_factory.mktemp("registry"))
    pytestconfig.stash.setdefault(_REGISTRIES, []).append(server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A bucket on the S3 server that no other test has used."""
    return s3_server.create_bucket()


@pytest.fixture(scope="session")
def node_cluster(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[NodeCluster]:
    """One real single-node cluster, with the project's image imported, for the whole session."""
    try:
        preflight.check()
        control_bin = binaries.locate()
        node_bin = binaries.locate_node()
        app_image = images.app_image_archive()
    except (binaries.BinariesMissing, preflight.NodeUnavailable) as missing:
        pytest.fail(f"test node unavailable: {missing}", pytrace=False)
    node = NodeCluster(control_bin, node_bin, tmp_path_factory.mktemp("node"))
    pytestconfig.stash.setdefault(_NODES, []).append(node)
    try:
        node.start([app_image])
        yield node
    finally:
        node.stop()


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A namespace no other test has used (without a controller-manager none is ever removed)."""
    return control_plane.create_namespace()


@pytest.fixture
def chart_install(control_plane: ControlPlane) -> ChartInstaller:
    """Factory: helm-install the chart (default release "cr") into a fresh or given namespace."""

    def install(
        values: dict[str, Any] | None = None,
        namespace: str | None = None,
        release: str = helm.DEFAULT_RELEASE,
    ) -> helm.Release:
        target = namespace or control_plane.create_namespace("chart")
        return helm.install(control_plane, target, values, release=release)

    return install


@pytest.fixture
def fault_proxy(control_plane: ControlPlane) -> Iterator[ProxyFactory]:
    """Factory of fault-injecting proxies in front of the API server, closed after the test."""
    pool = ProxyPool(control_plane)
    yield pool.make
    pool.close()


@pytest.fixture(scope="module")
def kube_config(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> str:
    """pytest-helm-charts' kubeconfig: --kubeconfig if given, else the test control plane's.

    Overrides that plugin's fixture of the same name so its `kube_cluster` (pykube) talks to
    the real test API server without any command-line option.
    """
    given = pytestconfig.getoption("kubeconfig", default=None)
    if given:
        return str(given)
    plane: ControlPlane = request.getfixturevalue("control_plane")
    return str(plane.kubeconfig)
