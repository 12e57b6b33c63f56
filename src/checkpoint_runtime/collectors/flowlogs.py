"""The flowlogs collector (rows `cursor`, `replay/<id>`).

Polls an HTTP JSON endpoint for the window `[cursor, now)` (`GET <url>?start=<t>&end=<t>`,
RFC 3339 ns; the answer is a JSON list of records or `{"logs": [...]}`), emits the records and
moves `cursor` to the window's end. A window that fails is kept as `replay/<start>` =
`{"from", "to"}` and the cursor moves on, so live data keeps flowing while the failed window is
retried first on every poll; replay windows older than `replayWindowSeconds` are given up (and
logged), which bounds the shard. Emitted records are flushed to the sink before the rows that
say so are persisted synchronously; a window that emitted nothing only moves the cursor through
the debounced persist.

A `cursor` that is not an RFC 3339 time (the legacy format admits any string, e.g. an epoch
"1772323800") is quarantined, not guessed and not fatal: it is moved, synchronously, to
`quarantine/cursor` with its original value (shown by `inspect`, counted by the
checkpoint_quarantined_rows gauge, logged as a warning), and the collector starts as without a
cursor. Failing instead would end every lifecycle on the same row, a restart loop no command
could repair; reading it as an epoch would be a guess.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from checkpoint_runtime.collectors import CheckpointMap
from checkpoint_runtime.collectors.runner import SourceError
from checkpoint_runtime.collectors.sink import Sink
from checkpoint_runtime.constants import (
    DEFAULT_POLL_SECONDS,
    DEFAULT_REPLAY_WINDOW_SECONDS,
    FLOWLOGS_REQUEST_TIMEOUT_SECONDS,
)
from checkpoint_runtime.errors import quote
from checkpoint_runtime.format.naming import (
    CURSOR,
    FLOWLOGS,
    QUARANTINE,
    REPLAY,
    collector_namespace,
    rfc3339_ns,
)

log = logging.getLogger(__name__)

Fetch = Callable[[str, float], bytes]


def parse_rfc3339(text: str) -> datetime:
    """Parse the collectors' RFC 3339 timestamps (nanoseconds are truncated to microseconds)."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    head, sep, rest = value.partition(".")
    if sep:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        value = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def http_fetch(url: str, timeout: float) -> bytes:
    import urllib.error
    import urllib.request  # http.client, ssl, email: only once a collector polls

    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            data: bytes = answer.read()
            return data
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise SourceError(f"GET {url}: {error}") from error


class FlowLogsCollector:
    """One flowlogs source: `[<tailnet>/]flowlogs`."""

    def __init__(
        self,
        store: CheckpointMap,
        sink: Sink,
        *,
        url: str,
        tailnet: str | None = None,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        replay_window_seconds: float = DEFAULT_REPLAY_WINDOW_SECONDS,
        now: Callable[[], datetime] | None = None,
        fetch: Fetch = http_fetch,
        request_timeout: float = FLOWLOGS_REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self.store = store
        self.sink = sink
        self.url = url
        self.tailnet = tailnet
        self.poll_seconds = poll_seconds
        self.replay_window = timedelta(seconds=replay_window_seconds)
        self.namespace = collector_namespace(FLOWLOGS, tailnet)
        self._now = now or (lambda: datetime.now(UTC))
        self._fetch = fetch
        self._timeout = request_timeout

    def _key(self, row: str) -> str:
        return f"{self.namespace}/{row}"

    def cursor(self) -> datetime | None:
        raw = self.store.get(self._key(CURSOR))
        if not raw:
            return None
        try:
            return parse_rfc3339(raw)
        except ValueError:
            self._quarantine(CURSOR, raw)
            return None

    def _quarantine(self, row: str, raw: str) -> None:
        """Move an unparsable row aside with its value, persisted before anything is emitted."""
        log.warning(
            "flowlogs %s: quarantined row %s: %s is not an RFC 3339 time; kept as %s, the "
            "collector starts without it",
            self.namespace,
            row,
            quote(raw),
            self._key(f"{QUARANTINE}/{row}"),
        )
        self.store.batch({self._key(row): None, self._key(f"{QUARANTINE}/{row}"): raw})

    def replay_windows(self) -> list[tuple[str, datetime, datetime]]:
        prefix = self._key(REPLAY) + "/"
        windows = []
        for key, raw in self.store.items(prefix):
            try:
                window = json.loads(raw)
                windows.append((key, parse_rfc3339(window["from"]), parse_rfc3339(window["to"])))
            except (ValueError, KeyError, TypeError):
                log.warning("flowlogs %s: dropping unreadable replay row %s", self.namespace, key)
                self.store.batch({key: None})
        return sorted(windows, key=lambda item: item[1])

    def poll(self) -> int:
        now = self._now()
        changes: dict[str, str | None] = {}
        emitted = 0
        for key, start, end in self.replay_windows():
            if now - end > self.replay_window:
                log.error(
                    "flowlogs %s: giving up replay window %s..%s (older than %s)",
                    self.namespace,
                    rfc3339_ns(start),
                    rfc3339_ns(end),
                    self.replay_window,
                )
                changes[key] = None
                continue
            try:
                records = self._window(start, end)
            except SourceError as error:
                log.warning("flowlogs %s: replay %s still failing: %s", self.namespace, key, error)
                continue
            emitted += self._emit(records)
            changes[key] = None
        start = self.cursor() or now - timedelta(seconds=self.poll_seconds)
        if now > start:
            try:
                records = self._window(start, now)
            except SourceError as error:
                log.warning(
                    "flowlogs %s: window failed, kept for replay: %s", self.namespace, error
                )
                changes[self._key(f"{REPLAY}/{rfc3339_ns(start)}")] = json.dumps(
                    {"from": rfc3339_ns(start), "to": rfc3339_ns(now)}, separators=(",", ":")
                )
            else:
                emitted += self._emit(records)
            changes[self._key(CURSOR)] = rfc3339_ns(now)
        self.sink.flush()
        cursor_key = self._key(CURSOR)
        if emitted == 0 and set(changes) <= {cursor_key} and cursor_key in changes:
            # An empty window emitted nothing: losing this cursor move to a crash only
            # re-reads an empty window, so the debounced persist carries it.
            self.store.set(cursor_key, changes[cursor_key] or "")
        elif changes:
            self.store.batch(changes)
        return emitted

    def _window(self, start: datetime, end: datetime) -> list[Any]:
        query = urllib.parse.urlencode({"start": rfc3339_ns(start), "end": rfc3339_ns(end)})
        separator = "&" if "?" in self.url else "?"
        body = self._fetch(f"{self.url}{separator}{query}", self._timeout)
        try:
            document = json.loads(body)
        except ValueError as error:
            raise SourceError(f"answer is not JSON: {error}") from error
        records = document.get("logs") if isinstance(document, dict) else document
        if not isinstance(records, list):
            raise SourceError("answer is neither a JSON list nor an object with a 'logs' list")
        return records

    def _emit(self, records: list[Any]) -> int:
        for record in records:
            self.sink.emit({"collector": FLOWLOGS, "tailnet": self.tailnet, "record": record})
        return len(records)
