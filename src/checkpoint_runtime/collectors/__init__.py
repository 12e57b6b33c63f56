"""Collectors: each owns one collector namespace (one shard) and uses only the store's
map interface, so the same collector runs on the file and the kubernetes store."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from checkpoint_runtime.constants import COLLECTOR_BACKOFF_MAX_SECONDS

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


class SourceUnreachableError(SourceError):
    """The source's endpoint could not be reached (refused, reset, timed out)."""


class SourceAccessDeniedError(SourceError):
    """The source refused our credentials (wrong key, expired token, no permission)."""


_CONNECTION_ERROR_NAMES = frozenset(
    {
        # botocore, aiohttp and urllib3 names, matched by name so that the base install (no s3
        # extra) needs none of them
        "ConnectionError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "NewConnectionError",
        "TimeoutError",
    }
)


def _is_connection_failure(error: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError | TimeoutError):
            return True
        if any(cls.__name__ in _CONNECTION_ERROR_NAMES for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


def source_failure(action: str, error: BaseException) -> SourceError:
    """The named SourceError for a client library's exception: unreachable endpoint, refused
    credentials, or (anything else) a plain SourceError."""
    if _is_connection_failure(error):
        return SourceUnreachableError(f"{action}: endpoint unreachable: {error}")
    if isinstance(error, PermissionError):
        return SourceAccessDeniedError(f"{action}: access denied: {error}")
    return SourceError(f"{action}: {error}")


class Collector(Protocol):
    """One scheduled collector."""

    namespace: str
    """Its collector namespace, which is also its shard key."""
    poll_seconds: float

    def poll(self) -> int:
        """Collect once; return how many records were emitted. Store errors propagate."""


def backoff_seconds(poll_seconds: float, failures: int) -> float:
    """The wait before the next poll after `failures` consecutive source failures."""
    if failures <= 0:
        return poll_seconds
    ceiling = max(poll_seconds, COLLECTOR_BACKOFF_MAX_SECONDS)
    return float(min(poll_seconds * 2 ** min(failures - 1, 30), ceiling))


class CollectorRunner:
    """Polls each collector in its own thread until stopped.

    Source failures are logged (naming the error) and retried with exponential backoff
    (`backoff_seconds`); any other error (a store conflict, a write-uncertain outcome) is handed
    to `on_fatal` and stops that collector: the runtime then ends its lifecycle and restarts
    from the API state.
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
        failures = 0
        while not self.stop_event.is_set():
            try:
                emitted = collector.poll()
            except SourceError as error:
                failures += 1
                wait = backoff_seconds(collector.poll_seconds, failures)
                log.warning(
                    "collector %s: source failed (%s): %s; retrying in %.1f s",
                    collector.namespace,
                    type(error).__name__,
                    error,
                    wait,
                    extra={
                        "collector": collector.namespace,
                        "error": type(error).__name__,
                        "consecutive_failures": failures,
                        "retry_seconds": wait,
                    },
                )
                self.stop_event.wait(wait)
                continue
            except BaseException as error:
                log.error("collector %s stopped: %s", collector.namespace, error)
                self.on_fatal(error)
                return
            failures = 0
            if emitted:
                log.info("collector %s emitted %d records", collector.namespace, emitted)
            self.stop_event.wait(collector.poll_seconds)
