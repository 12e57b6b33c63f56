"""A flow-log endpoint for tests: serves the records whose `at` lies in the asked window.

It speaks the flowlogs collector's protocol (`GET <url>?start=<t>&end=<t>` answered with
`{"logs": [...]}`), listens on `host` (the loopback for host processes, the node link's host
address for pods on the test node) and can be told to fail.
"""

from __future__ import annotations

import itertools
import json
import threading
import urllib.parse
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from checkpoint_runtime.collectors.flowlogs import parse_rfc3339
from checkpoint_runtime.format.naming import rfc3339_ns


class FlowLogServer:
    """Serves records whose `at` lies in [start, end); can be told to fail."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.records: list[dict[str, Any]] = []
        # each record's `at`, parsed once: a feed of hours holds tens of thousands of records,
        # and parsing every one for every request cost the test process a core
        self._times: list[datetime] = []
        self.failing = False
        self.requests: list[tuple[datetime, datetime]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                start, end = parse_rfc3339(query["start"][0]), parse_rfc3339(query["end"][0])
                outer.requests.append((start, end))
                if outer.failing:
                    self.send_response(500)
                    self.end_headers()
                    return
                pairs = zip(outer.records, outer._times, strict=False)  # one may be added now
                chosen = [r for r, at in pairs if start <= at < end]
                body = json.dumps({"logs": chosen}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/flowlogs"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, at: datetime, n: int) -> None:
        at_text = rfc3339_ns(at)
        self._times.append(parse_rfc3339(at_text))  # what the server answered from before
        self.records.append({"at": at_text, "n": n})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
