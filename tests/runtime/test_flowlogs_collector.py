"""The flowlogs collector against a local HTTP server started by the test, on the file store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors.flowlogs import FlowLogsCollector, parse_rfc3339
from checkpoint_runtime.format.naming import rfc3339_ns
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.flowlogs import FlowLogServer

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


class ListSink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def emit(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def numbers(self) -> list[int]:
        return [r["record"]["n"] for r in self.records]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def server() -> Iterator[FlowLogServer]:
    running = FlowLogServer()
    yield running
    running.close()


def open_store(folder: Path) -> Store:
    folder.mkdir(exist_ok=True)
    return Store.open(FileBackend(folder, "cr"), writer="test", debounce_seconds=0)


def make(store: Store, sink: ListSink, server: FlowLogServer, clock: Clock) -> FlowLogsCollector:
    return FlowLogsCollector(
        store, sink, url=server.url, tailnet="tn1", poll_seconds=10, replay_window_seconds=60,
        now=clock,
    )  # fmt: skip


def started(
    tmp_path: Path, server: FlowLogServer
) -> tuple[Clock, ListSink, Store, FlowLogsCollector]:
    """A clock at T0, a sink, a file store in `tmp_path`/cp and a collector over them."""
    clock, sink, store = Clock(), ListSink(), open_store(tmp_path / "cp")
    return clock, sink, store, make(store, sink, server, clock)


def poll_a_failing_window(flow: FlowLogsCollector, server: FlowLogServer, clock: Clock) -> int:
    """The server fails the window that ends at T0 + 10 s; what that poll emitted."""
    server.failing = True
    clock.now = T0 + timedelta(seconds=10)
    return flow.poll()


def test_polls_advance_the_time_cursor_without_repeating(
    tmp_path: Path, server: FlowLogServer
) -> None:
    clock, sink, store = Clock(), ListSink(), open_store(tmp_path / "cp")
    server.add(T0 - timedelta(seconds=5), 1)
    server.add(T0 - timedelta(seconds=30), 0)  # before the first window: not backfilled
    flow = make(store, sink, server, clock)
    assert flow.poll() == 1
    assert store.get("tn1/flowlogs/cursor") == rfc3339_ns(T0)
    server.add(T0 + timedelta(seconds=3), 2)
    clock.now = T0 + timedelta(seconds=10)
    assert flow.poll() == 1
    assert sink.numbers() == [1, 2]
    assert server.requests[-1] == (T0, T0 + timedelta(seconds=10))
    assert list(store.shard_states()) == ["tn1/flowlogs"]


def test_a_failed_window_is_replayed_after_recovery_and_its_row_removed(
    tmp_path: Path, server: FlowLogServer
) -> None:
    clock, sink, store, flow = started(tmp_path, server)
    flow.poll()
    server.add(T0 + timedelta(seconds=4), 7)
    assert poll_a_failing_window(flow, server, clock) == 0
    replay = store.items("tn1/flowlogs/replay/")
    assert [json.loads(v) for _, v in replay] == [
        {"from": rfc3339_ns(T0), "to": rfc3339_ns(T0 + timedelta(seconds=10))}
    ]
    assert store.get("tn1/flowlogs/cursor") == rfc3339_ns(clock.now)  # live data moves on
    server.failing = False
    server.add(T0 + timedelta(seconds=15), 8)
    clock.now = T0 + timedelta(seconds=20)
    assert flow.poll() == 2
    assert sink.numbers() == [7, 8]
    assert store.items("tn1/flowlogs/replay/") == []


def test_replay_windows_older_than_the_limit_are_given_up(
    tmp_path: Path, server: FlowLogServer
) -> None:
    clock, _, store, flow = started(tmp_path, server)
    flow.poll()
    poll_a_failing_window(flow, server, clock)
    assert len(store.items("tn1/flowlogs/replay/")) == 1
    clock.now = T0 + timedelta(seconds=80)  # the failed window ended 70 s ago > 60 s
    flow.poll()
    keys = [key for key, _ in store.items("tn1/flowlogs/replay/")]
    assert keys == [f"tn1/flowlogs/replay/{rfc3339_ns(T0 + timedelta(seconds=10))}"]


def test_a_restart_continues_from_the_stored_cursor(tmp_path: Path, server: FlowLogServer) -> None:
    clock, sink = Clock(), ListSink()
    server.add(T0 - timedelta(seconds=1), 1)
    make(open_store(tmp_path / "cp"), sink, server, clock).poll()
    server.add(T0 + timedelta(seconds=1), 2)
    clock.now = T0 + timedelta(seconds=5)
    again = ListSink()
    make(open_store(tmp_path / "cp"), again, server, clock).poll()
    assert again.numbers() == [2]
    assert server.requests[-1] == (T0, T0 + timedelta(seconds=5))


def test_nanosecond_timestamps_parse() -> None:
    parsed = parse_rfc3339("2026-03-01T00:00:00.123456789Z")
    assert parsed == datetime(2026, 3, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert rfc3339_ns(parsed) == "2026-03-01T00:00:00.123456000Z"
