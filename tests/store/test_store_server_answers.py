"""How the store reads the API server's error answers, on the real API server behind the fault
proxy: 504 and 5xx mean "may have committed" (resolved by reading the write id back), 409 and
422 are definitive, a failing server is retried with bounded backoff and Retry-After is
honoured; the conflict counter and the persist histogram are fed."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pytest
from store_harness import KubeHarness, open_store

from checkpoint_runtime import retry
from checkpoint_runtime.errors import ApiRefusedError, ConflictError, WriteUncertainError
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import Action, FaultProxy, ProxyEvent

FEED = "tn/objectstore/feed-a"
CURSOR = f"{FEED}/cursor"

# The server's own "may still complete" answers: a 504 Timeout, a raw etcd error (500, empty
# reason) and an etcd-unreachable ServerTimeout (500 with a reason).
UNCERTAIN = [
    pytest.param(504, "Timeout", id="504-timeout"),
    pytest.param(500, "", id="500-empty-reason"),
    pytest.param(500, "ServerTimeout", id="500-server-timeout"),
]


@pytest.fixture
def proxy(fault_proxy: Callable[[], FaultProxy]) -> FaultProxy:
    return fault_proxy()


def proxied(kube: KubeHarness, proxy: FaultProxy, deadline: float = 15) -> Store:
    backend = kube.backend(host=proxy.host)
    return Store.open(backend, writer="w", epoch=1, deadline_seconds=deadline)


def sample(store: Store, name: str, labels: dict[str, str] | None = None) -> float | None:
    return store.metrics.registry.get_sample_value(name, labels or {})


def requests(proxy: FaultProxy, method: str, action: Action | None = None) -> list[ProxyEvent]:
    return [e for e in proxy.events if e.method == method and action in (None, e.action)]


@pytest.mark.parametrize(("status", "reason"), UNCERTAIN)
@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_a_committed_write_answered_5xx_is_recognised_by_its_write_id(
    kube: KubeHarness, proxy: FaultProxy, status: int, reason: str, method: str
) -> None:
    store = proxied(kube, proxy)
    if method == "PUT":
        store.batch({CURSOR: "1"})
    proxy.answer(status, reason, forward=True, count=1, method=method)

    store.batch({CURSOR: "2"})  # no error: the read-back finds our write id

    assert open_store(kube).get(CURSOR) == "2"
    sent = requests(proxy, method)
    assert [(e.action, e.upstream_status) for e in sent] == [
        (Action.ANSWER_AFTER_FORWARD, 201 if method == "POST" else 200)
    ]  # committed once, never re-sent
    assert sample(store, "checkpoint_uncertain_writes_total", {"shard": FEED}) == 1
    store.batch({CURSOR: "3"})  # the resourceVersion read back is current
    assert open_store(kube).get(CURSOR) == "3"


@pytest.mark.parametrize(("status", "reason"), UNCERTAIN)
def test_a_write_answered_5xx_until_the_deadline_is_write_uncertain_not_refused(
    kube: KubeHarness, proxy: FaultProxy, status: int, reason: str
) -> None:
    store = proxied(kube, proxy, deadline=3)
    store.batch({CURSOR: "1"})
    proxy.answer(status, reason, count=None, method="PUT")  # never reaches the server

    with pytest.raises(ExceptionGroup) as raised:
        store.batch({CURSOR: "2"})

    (error,) = raised.value.exceptions
    assert isinstance(error, WriteUncertainError)
    assert len(requests(proxy, "PUT", Action.ANSWER)) >= 2  # re-sent while provably not committed
    assert store.dirty_shards() == [FEED]
    proxy.passthrough()
    store.flush()
    assert open_store(kube).get(CURSOR) == "2"


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        pytest.param(409, "Conflict", ConflictError, id="409-conflict"),
        pytest.param(422, "Invalid", ApiRefusedError, id="422-invalid"),
    ],
)
def test_a_definitive_refusal_is_neither_read_back_nor_re_sent(
    kube: KubeHarness, proxy: FaultProxy, status: int, reason: str, expected: type[Exception]
) -> None:
    store = proxied(kube, proxy)
    store.batch({CURSOR: "1"})
    reads_before = len(requests(proxy, "GET"))
    proxy.answer(status, reason, count=1, method="PUT")

    with pytest.raises(ExceptionGroup) as raised:
        store.batch({CURSOR: "2"})

    (error,) = raised.value.exceptions
    assert isinstance(error, expected)
    assert len(requests(proxy, "PUT")) == 1  # the refused update (the first write was a POST)
    assert len(requests(proxy, "GET")) == reads_before  # no read-back
    assert open_store(kube).get(CURSOR) == "1"


def test_a_failing_server_is_retried_with_bounded_backoff(
    kube: KubeHarness, proxy: FaultProxy
) -> None:
    """Every PUT answered 500 for `outage` seconds: the store keeps trying within its deadline,
    at most retry.max_attempts(outage) times, and commits once the server answers again."""
    outage = 4.0
    store = proxied(kube, proxy, deadline=30)
    store.batch({CURSOR: "1"})
    proxy.answer(500, "", count=None, method="PUT", for_seconds=outage)

    store.batch({CURSOR: "2"})

    failed = requests(proxy, "PUT", Action.ANSWER)
    bound = retry.max_attempts(outage)
    print(f"outage {outage} s: {len(failed)} PUTs answered 500 (bound {bound})")
    assert 2 <= len(failed) <= bound
    assert len(requests(proxy, "GET")) <= bound + 2  # read-backs back off the same way
    assert open_store(kube).get(CURSOR) == "2"


def test_retry_after_is_honoured(kube: KubeHarness, proxy: FaultProxy) -> None:
    store = proxied(kube, proxy, deadline=30)
    store.batch({CURSOR: "1"})
    proxy.answer(429, "TooManyRequests", count=None, method="PUT", retry_after=1, for_seconds=3.5)

    store.batch({CURSOR: "2"})

    throttled = [e.at for e in requests(proxy, "PUT", Action.ANSWER)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(throttled)]
    assert len(throttled) >= 2
    assert min(gaps) >= 0.95, gaps  # never sooner than the server asked
    assert len(throttled) <= 1 + 3.5 / 1
    assert open_store(kube).get(CURSOR) == "2"


def test_a_conflict_is_counted(kube: KubeHarness) -> None:
    store = open_store(kube, writer="w")
    store.batch({CURSOR: "1"})
    rival = open_store(kube, writer="w")
    rival.batch({CURSOR: "rival"})
    assert sample(store, "checkpoint_conflicts_total", {"shard": FEED}) is None

    with pytest.raises(ExceptionGroup) as raised:
        store.batch({CURSOR: "2"})

    assert all(isinstance(error, ConflictError) for error in raised.value.exceptions)
    assert sample(store, "checkpoint_conflicts_total", {"shard": FEED}) == 1
    assert open_store(kube).get(CURSOR) == "rival"


def test_each_persist_is_observed_in_the_latency_histogram(kube: KubeHarness) -> None:
    store = open_store(kube)
    assert sample(store, "checkpoint_persist_seconds_count") == 0
    started = time.perf_counter()
    store.batch({CURSOR: "1", "tn/flowlogs/cursor": "2026-03-01T00:05:00Z"})  # two shards
    store.batch({CURSOR: "2"})
    elapsed = time.perf_counter() - started

    assert sample(store, "checkpoint_persist_seconds_count") == 2  # one per persist, not shard
    observed = sample(store, "checkpoint_persist_seconds_sum")
    assert observed is not None
    assert 0 < observed <= elapsed
    assert sample(store, "checkpoint_persist_seconds_bucket", {"le": "+Inf"}) == 2


def test_a_throttled_read_waits_for_retry_after(kube: KubeHarness, proxy: FaultProxy) -> None:
    """Opening lists the shards: a 429 on that read is retried no sooner than Retry-After."""
    open_store(kube).batch({CURSOR: "1"})
    proxy.answer(429, "TooManyRequests", count=None, method="GET", retry_after=1, for_seconds=2.5)

    store = proxied(kube, proxy, deadline=30)

    throttled = [e.at for e in requests(proxy, "GET", Action.ANSWER)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(throttled)]
    assert len(throttled) >= 2
    assert min(gaps) >= 0.95, gaps
    assert store.get(CURSOR) == "1"
