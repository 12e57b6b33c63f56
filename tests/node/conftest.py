"""Fixtures of the node tests: the session's node (from the test environment plugin) and a feed."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from checkpoint_testenv.flowlogs import FlowLogServer
from checkpoint_testenv.node.cluster import NodeCluster


class FlowFeed:
    """A flow-log endpoint the node's pods reach, fed one numbered record every `interval` s.

    Each record's time lies a second ahead of when it is added, so every window a collector
    asks for that covers it is asked after it exists: a record is never missed by the timing
    of the test itself.
    """

    def __init__(self, host: str, interval: float = 0.1) -> None:
        self.server = FlowLogServer(host)
        self.url = self.server.url
        self.interval = interval
        self._numbers = itertools.count(1)
        self.added: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._feed, daemon=True)
        self._thread.start()

    def _feed(self) -> None:
        while not self._stop.wait(self.interval):
            number = next(self._numbers)
            self.server.add(datetime.now(UTC) + timedelta(seconds=1), number)
            self.added.append(number)

    def stop(self) -> list[int]:
        """Stop adding; the numbers added (all due within a second)."""
        self._stop.set()
        self._thread.join()
        return list(self.added)

    def close(self) -> None:
        self.stop()
        self.server.close()


@pytest.fixture(scope="module")
def flow_feed(node_cluster: NodeCluster) -> Iterator[FlowFeed]:
    assert node_cluster.netns is not None
    feed = FlowFeed(node_cluster.netns.host_ip)
    yield feed
    feed.close()
