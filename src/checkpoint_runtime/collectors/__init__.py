"""Collectors: each owns one collector namespace (one shard) and uses only the store's
map interface, so the same collector runs on the file and the kubernetes store."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

log = logging.getLogger(__name__)


class CheckpointMap(Protocol):
    """The part of the store a collector may use."""

    def get(self, key: str) -> str | None: ...

    def items(self, prefix: str = "") -> list[tuple[str, str]]: ...

    def set(self, key: str, value: str) -> None: ...

    def delete(self, key: str) -> None: ...

    def batch(self, changes: Mapping[str, str | None]) -> None: ...


class SourceError(Exception):
    """The collector's source (bucket, endpoint) failed; the next poll tries again."""


class Collector(Protocol):
    """One scheduled collector."""

    namespace: str
    """Its collector namespace, which is also its shard key."""
    poll_seconds: float

    def poll(self) -> int:
        """Collect once; return how many records were emitted. Store errors propagate."""


class CollectorRunner:
    """Polls each collector in its own thread until stopped.

    Source failures are logged and retried on the next poll; any other error (a store conflict,
    a write-uncertain outcome) is handed to `on_fatal` and stops that collector: the runtime
    then ends its lifecycle and restarts from the API state.
    """

    def __init__(
        self, collectors: Sequence[Collector], on_fatal: Callable[[BaseException], None]
    ) -> None:
        self.collectors = list(collectors)
        self.on_fatal = on_fatal
        self.stop_event = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(c,), name=f"collector {c.namespace}")
            for c in self.collectors
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask every collector to stop and wait for polls in progress to finish."""
        self.stop_event.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout)

    def _loop(self, collector: Collector) -> None:
        while not self.stop_event.is_set():
            try:
                emitted = collector.poll()
            except SourceError as error:
                log.warning("collector %s: source failed: %s", collector.namespace, error)
            except BaseException as error:
                log.error("collector %s stopped: %s", collector.namespace, error)
                self.on_fatal(error)
                return
            else:
                if emitted:
                    log.info("collector %s emitted %d records", collector.namespace, emitted)
            self.stop_event.wait(collector.poll_seconds)
