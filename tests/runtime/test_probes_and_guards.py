"""Health endpoints, liveness of a stuck leader, and the leadership guards on writes."""

from __future__ import annotations

import gzip
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.election.elector import LeaderElector, LeadershipLostError
from checkpoint_runtime.election.lease_lock import LeaseRecord
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.runtime.guards import LeaderGuardedMap
from checkpoint_runtime.runtime.http import HealthServer
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer
from checkpoint_testenv.support.clocks import FrozenClock
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import http_get


def test_health_server_routes() -> None:
    registry = CollectorRegistry()
    Gauge("demo_value", "a value", registry=registry).set(7)
    state = {"healthy": True, "ready": False}
    server = HealthServer(
        "127.0.0.1",
        0,
        registry,
        lambda: (state["healthy"], "h"),
        lambda: (state["ready"], "r"),
    )
    server.start()
    try:
        assert http_get(server.port, "/healthz")[0] == 200
        assert http_get(server.port, "/readyz")[0] == 503
        state["ready"], state["healthy"] = True, False
        assert http_get(server.port, "/readyz")[0] == 200
        assert http_get(server.port, "/healthz")[0] == 503
        status, body = http_get(server.port, "/metrics")
        assert status == 200
        assert "demo_value 7.0" in body
        assert http_get(server.port, "/nope")[0] == 404
        for path in ("/healthz", "/readyz", "/metrics"):  # only GET reads a probe or the series
            post = urllib.request.Request(
                f"http://127.0.0.1:{server.port}{path}", data=b"", method="POST"
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(post, timeout=5)
            assert refused.value.code == 405, path
    finally:
        server.stop()


def test_metrics_is_prometheus_clients_own_app() -> None:
    """/metrics answers like prometheus_client's exporter: OpenMetrics when asked, gzip when
    accepted, one series with `name[]`."""
    registry = CollectorRegistry()
    Gauge("demo_value", "a value", registry=registry).set(7)
    Gauge("other_value", "another", registry=registry).set(1)
    server = HealthServer("127.0.0.1", 0, registry, lambda: (True, "h"), lambda: (True, "r"))
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        ask = urllib.request.Request(url, headers={"Accept": "application/openmetrics-text"})
        with urllib.request.urlopen(ask, timeout=5) as answer:
            assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
            assert answer.read().decode().endswith("# EOF\n")
        ask = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(ask, timeout=5) as answer:
            assert answer.headers["Content-Encoding"] == "gzip"
            assert b"demo_value 7.0" in gzip.decompress(answer.read())
        status, body = http_get(server.port, "/metrics?name[]=other_value")
        assert status == 200
        assert "other_value 1.0" in body
        assert "demo_value" not in body
    finally:
        server.stop()


class StaticLock:
    """A lock that always succeeds once, then fails: enough to reach the leader state."""

    identity = "me"
    uid = ""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.fail = False

    def describe(self) -> str:
        return "static"

    def get(self, timeout: float) -> LeaseRecord | None:
        if self.fail:
            raise ConnectionError("down")
        return self.record

    def create(self, record: LeaseRecord, timeout: float) -> None:
        self.record = record

    def update(self, record: LeaseRecord, timeout: float) -> None:
        if self.fail:
            raise ConnectionError("down")
        self.record = record


def test_liveness_fails_for_a_leader_that_stopped_renewing_long_ago() -> None:
    now = [0.0]
    lock = StaticLock()
    elector = LeaderElector(lock, ElectionTimings(15, 10, 2), clock=lambda: now[0])
    assert elector.healthy(20)  # not leading: a standby is healthy
    assert elector.try_acquire_or_renew()
    now[0] = 30.0
    assert elector.healthy(20)
    now[0] = 35.1  # lease 15 s + tolerance 20 s since the last observation
    assert not elector.healthy(20)


def test_writes_through_the_guard_need_leadership(tmp_path: Path) -> None:
    store = Store.open(FileBackend(tmp_path, "cr"), writer="w", debounce_seconds=0)
    leading = [True]
    guarded = LeaderGuardedMap(store, lambda: leading[0])
    guarded.batch({"flowlogs/cursor": "a"})
    leading[0] = False
    assert guarded.get("flowlogs/cursor") == "a"
    assert guarded.items("flowlogs/") == [("flowlogs/cursor", "a")]
    for write in (
        lambda: guarded.set("flowlogs/cursor", "b"),
        lambda: guarded.delete("flowlogs/cursor"),
        lambda: guarded.batch({"flowlogs/cursor": "b"}),
    ):
        with pytest.raises(LeadershipLostError):
            write()
    assert store.get("flowlogs/cursor") == "a"


class GatedLeadership:
    """The Debouncer's `leading()`: True until `lose()`; then the next call blocks until
    `answer()`, so the test knows the loop reached its decision and what it decided on."""

    def __init__(self) -> None:
        self.lost = False
        self.asked = threading.Event()
        self.answered = threading.Event()
        self._go = threading.Event()

    def lose(self) -> None:
        self.lost = True

    def __call__(self) -> bool:
        if not self.lost:
            return True
        self.asked.set()
        self._go.wait(30)
        self.answered.set()
        return False

    def answer(self) -> None:
        self._go.set()


def test_the_debounced_persist_stops_when_leadership_ends(tmp_path: Path) -> None:
    """No bare sleep decides this: the store's clock is the test's, and the loop's decision
    point is held until a change is due, so a loop that persisted without leadership would
    have written it before stop() returns."""
    clock = FrozenClock()
    store = Store.open(FileBackend(tmp_path, "cr"), writer="w", debounce_seconds=0.05, clock=clock)
    leading = GatedLeadership()
    errors: list[BaseException] = []
    persister = Debouncer(store, errors.append, interval=0.01, leading=leading)
    persister.start()
    try:
        store.set("flowlogs/cursor", "a")
        clock.now += 1  # due
        wait_for(lambda: store.dirty_shards() == [], 10, "the change persisted while leading")
        leading.lose()
        assert leading.asked.wait(10), "the loop never asked whether it leads"
        store.set("flowlogs/cursor", "b")
        clock.now += 1  # due: a loop that went on would persist it at once
        leading.answer()
        assert leading.answered.wait(10)
    finally:
        persister.stop()  # joins the loop: nothing can be written after this
    assert store.dirty_shards() == ["flowlogs"]  # nothing written without leadership
    assert store.get("flowlogs/cursor") == "b"
    assert errors == []
