"""The collector runner: each collector polls in its own thread until stopped, and the errors
that tell a failing source (retried) from anything else (the end of the lifecycle).

A collector turns its client library's exceptions into a named SourceError with
`source_failure`; the runner retries those with the runtime's one retry policy
(`checkpoint_runtime.retry.collector_backoff`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from checkpoint_runtime.collectors import Collector
from checkpoint_runtime.retry import collector_backoff

log = logging.getLogger("checkpoint_runtime.collectors")


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


class CollectorRunner:
    """Polls each collector in its own thread until stopped.

    Source failures are logged (naming the error) and retried with the runtime's retry policy
    (`retry.collector_backoff`); any other error (a store conflict, a write-uncertain outcome)
    is handed to `on_fatal` and stops that collector: the runtime then ends its lifecycle and
    restarts from the API state.
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
        backoff = collector_backoff(collector.poll_seconds)
        while not self.stop_event.is_set():
            try:
                emitted = collector.poll()
            except SourceError as error:
                failures += 1
                wait = backoff.delay(error)
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
            if failures:
                failures, backoff = 0, collector_backoff(collector.poll_seconds)
            if emitted:
                log.info("collector %s emitted %d records", collector.namespace, emitted)
            self.stop_event.wait(collector.poll_seconds)
