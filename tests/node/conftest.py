"""Fixtures of the node tests: the session's node comes from the test environment plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from checkpoint_testenv import s3server
from checkpoint_testenv.binaries import BinariesMissing
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster
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
