"""`/healthz`, `/readyz` and `/metrics` on a stdlib HTTP server in a daemon thread.

Liveness follows client-go's HealthzAdaptor: a process that believes it leads but has not
renewed for lease + tolerance is stuck and should be restarted. Readiness is true for a standby
as well as for the leader, so a rollout does not wait on an election.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class _IPv6Server(ThreadingHTTPServer):
    """The stdlib server binds IPv4 only; `::` on an IPv6 socket also takes IPv4 on Linux."""

    address_family = socket.AF_INET6


class HealthServer:
    def __init__(
        self,
        bind: str,
        port: int,
        registry: CollectorRegistry,
        healthy: Check,
        ready: Check,
    ) -> None:
        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/healthz": lambda: _check(healthy),
            "/readyz": lambda: _check(ready),
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry)),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                status, content_type, body = (
                    route() if route else (404, "text/plain", b"not found\n")
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        ipv6 = ipaddress.ip_address(bind).version == 6
        self._server = (_IPv6Server if ipv6 else ThreadingHTTPServer)((bind, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _check(check: Check) -> tuple[int, str, bytes]:
    ok, detail = check()
    return (200 if ok else 503), "text/plain; charset=utf-8", (detail + "\n").encode()
