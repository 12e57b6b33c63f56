"""Fixtures of the node tests: the session's node comes from the test environment plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from checkpoint_testenv import s3server
from checkpoint_testenv.binaries import BinariesMissing
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    holder_pod,
    install_ready,
    lease_holder,
    restricted_namespace,
    runtime_pods,
    shard_writers,
    wait_for,
)
from checkpoint_testenv.node.tokens import (
    TOKEN_EXPIRATION_SECONDS,
    FirstToken,
    projected_token_file,
)
from checkpoint_testenv.s3server import S3Server, start_s3_server


@pytest.fixture(scope="module")
def flow_feed(node_cluster: NodeCluster) -> Iterator[FlowFeed]:
    """A numbered flow-log feed the node's pods reach (on the node link's host address)."""
    assert node_cluster.netns is not None
    feed = FlowFeed(node_cluster.netns.host_ip)
    yield feed
    feed.close()


@pytest.fixture(scope="module")
def node_s3(
    node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[S3Server]:
    """An S3 server on the node link's host address (reachable from the node's pods)."""
    assert node_cluster.netns is not None
    try:
        weed = s3server.locate() / "weed"
    except BinariesMissing as missing:
        pytest.fail(f"S3 test server unavailable: {missing}", pytrace=False)
    server = start_s3_server(
        weed, tmp_path_factory.mktemp("node-s3"), host=node_cluster.netns.host_ip
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bucket(node_s3: S3Server) -> str:
    return node_s3.create_bucket("node")


TOKEN_ROTATION_TEST = "test_node_token_rotation.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The token-rotation test waits out a token's life (at least 10 minutes). Its release is
    installed when the node tests start (`_start_the_token_clock`) and the test itself runs
    after every other node test, so that wait overlaps theirs instead of adding to it."""
    token = [item for item in items if item.path.name == TOKEN_ROTATION_TEST]
    if not token:
        return
    rest = [item for item in items if item.path.name != TOKEN_ROTATION_TEST]
    node = [index for index, item in enumerate(rest) if item.path.parent.name == "node"]
    at = node[-1] + 1 if node else len(rest)
    items[:] = rest[:at] + token + rest[at:]


@pytest.fixture(scope="session")
def token_release(node_cluster: NodeCluster) -> Iterator[FirstToken]:
    """A release whose pods hold a projected token of the shortest lifetime, its leader, and
    the leader's first token as the kubelet wrote it."""
    assert node_cluster.netns is not None
    plane = node_cluster.control_plane
    feed = FlowFeed(node_cluster.netns.host_ip)
    try:
        namespace = restricted_namespace(plane, "token")
        values = {
            "serviceAccount": {"tokenExpirationSeconds": TOKEN_EXPIRATION_SECONDS},
            "checkpoint": {
                "collectors": [{"kind": "flowlogs", "url": feed.url, "pollSeconds": 0.5}]
            },
        }
        release = install_ready(plane, namespace, values)
        wait_for(lambda: bool(shard_writers(release)), 60, "a shard written")
        holder = lease_holder(release)
        (leader,) = [p for p in runtime_pods(release) if p.metadata.name == holder_pod(holder)]
        token_file = projected_token_file(node_cluster, leader)
        yield FirstToken(release, holder, leader.metadata.name, token_file, token_file.read_text())
    finally:
        feed.close()


@pytest.fixture(scope="session", autouse=True)
def _start_the_token_clock(request: pytest.FixtureRequest) -> None:
    """Install the token-rotation release as soon as the node tests start (when it is selected)."""
    if any(item.path.name == TOKEN_ROTATION_TEST for item in request.session.items):
        request.getfixturevalue("token_release")
