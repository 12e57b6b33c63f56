"""`/healthz`, `/readyz` and `/metrics` on one listener in a daemon thread.

`/metrics` is prometheus_client's own WSGI app (content negotiation, OpenMetrics, gzip, `name[]`
filters), served by wsgiref with prometheus_client's threading WSGI server; the two probes are a
small WSGI app beside it.

Liveness follows client-go's HealthzAdaptor: a process that believes it leads but has not
renewed for lease + tolerance is stuck and should be restarted. Readiness is true for a standby
as well as for the leader, so a rollout does not wait on an election.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]
StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_STATUS = {200: "200 OK", 503: "503 Service Unavailable"}


class _IPv6Server(ThreadingWSGIServer):
    """The stdlib server binds IPv4 only; `::` on an IPv6 socket also takes IPv4 on Linux."""

    address_family = socket.AF_INET6


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: " + format, *args)


def _probe(check: Check) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        ok, detail = check()
        body = (detail + "\n").encode()
        start_response(
            _STATUS[200 if ok else 503],
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
        )
        return [body]

    return app


def _not_found(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    body = b"not found\n"
    start_response(
        "404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
    )
    return [body]


class HealthServer:
    def __init__(
        self,
        bind: str,
        port: int,
        registry: CollectorRegistry,
        healthy: Check,
        ready: Check,
    ) -> None:
        routes = {
            "/healthz": _probe(healthy),
            "/readyz": _probe(ready),
            "/metrics": make_wsgi_app(registry),
        }

        def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            route = routes.get(environ.get("PATH_INFO", ""), _not_found)
            return route(environ, start_response)

        ipv6 = ipaddress.ip_address(bind).version == 6
        self._server = make_server(
            bind,
            port,
            app,
            server_class=_IPv6Server if ipv6 else ThreadingWSGIServer,
            handler_class=_Handler,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
