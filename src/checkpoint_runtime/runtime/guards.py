"""What stands between a collector and the store while the process runs: writes and polls go
through only while this process still leads, and every poll is counted on /metrics."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from checkpoint_runtime.collectors import Collector
from checkpoint_runtime.collectors.runner import SourceError
from checkpoint_runtime.election.elector import LeadershipLostError
from checkpoint_runtime.runtime.metrics import RuntimeMetrics
from checkpoint_runtime.store.core import Store


class LeaderGuardedMap:
    """The store as collectors see it: every write first checks that we still lead, so a
    paused or partitioned ex-leader stops writing as soon as its renew deadline has passed,
    before the shards' epoch fence even has to refuse it."""

    def __init__(self, store: Store, leading: Callable[[], bool]) -> None:
        self._store = store
        self._leading = leading

    def _check(self) -> None:
        if not self._leading():
            raise LeadershipLostError("not leading any more: refusing to write checkpoints")

    def get(self, key: str) -> str | None:
        return self._store.get(key)

    def items(self, prefix: str = "") -> list[tuple[str, str]]:
        return self._store.items(prefix)

    def set(self, key: str, value: str) -> None:
        self._check()
        self._store.set(key, value)

    def delete(self, key: str) -> None:
        self._check()
        self._store.delete(key)

    def batch(self, changes: Mapping[str, str | None]) -> None:
        self._check()
        self._store.batch(changes)


class CountingCollector:
    """Wraps a collector to count its polls, failed polls and records in /metrics (with the
    time of the last successful poll), and to poll only while leading (a deposed leader must
    not emit either)."""

    def __init__(
        self, inner: Collector, metrics: RuntimeMetrics, leading: Callable[[], bool]
    ) -> None:
        self.inner = inner
        self.namespace = inner.namespace
        self.poll_seconds = inner.poll_seconds
        self._leading = leading
        self._records = metrics.records.labels(inner.namespace)
        self._polls = metrics.polls.labels(inner.namespace)
        self._failures = metrics.poll_failures
        self._last_success = metrics.last_success.labels(inner.namespace)

    def poll(self) -> int:
        if not self._leading():
            raise LeadershipLostError("not leading any more: collector stopped")
        try:
            emitted = self.inner.poll()
        except SourceError as error:
            self._failures.labels(self.namespace, type(error).__name__).inc()
            raise
        self._records.inc(emitted)
        self._polls.inc()
        self._last_success.set_to_current_time()
        return emitted
