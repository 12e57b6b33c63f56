"""Fixtures of the node tests: the session's node comes from the test environment plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster


@pytest.fixture(scope="module")
def flow_feed(node_cluster: NodeCluster) -> Iterator[FlowFeed]:
    """A numbered flow-log feed the node's pods reach (on the node link's host address)."""
    assert node_cluster.netns is not None
    feed = FlowFeed(node_cluster.netns.host_ip)
    yield feed
    feed.close()
