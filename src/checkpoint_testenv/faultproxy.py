"""A fault-injecting HTTPS proxy between a client and the test API server.

The store must survive writes whose outcome it cannot see: the server committed, but the answer
was lost. Plain TCP faults cannot aim at "the next PUT", so this proxy terminates TLS with the
test environment's own serving certificate (clients verify it with the same CA), parses each
HTTP/1.1 request, and re-originates TLS to the API server. Per request it can pass through,
delay, stall, drop the response after forwarding, reset the connection before or after
forwarding, or answer with a status of its own (a JSON Status body, optionally `Retry-After`)
either instead of forwarding or after forwarding (the server committed, the client sees the
error: an uncertain outcome). Bearer tokens travel in headers, so every caller keeps its own
identity.
"""

from __future__ import annotations

import contextlib
import enum
import json
import select
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BufferedIOBase
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from checkpoint_testenv.controlplane import ControlPlane

_COPY_CHUNK = 64 * 1024
_MAX_LINE = 64 * 1024


class Action(enum.Enum):
    """What the proxy does with one request."""

    PASSTHROUGH = "passthrough"
    DELAY = "delay"  # wait, then forward and stream the answer as usual
    STALL = "stall"  # forward, read the answer, hold it, then close without sending it
    DROP_RESPONSE_AFTER_FORWARD = "drop_response_after_forward"  # forward, read, close (FIN)
    RESET_BEFORE_FORWARD = "reset_before_forward"  # RST the client; the server never sees it
    RESET_AFTER_FORWARD = "reset_after_forward"  # forward, read the answer, then RST the client
    ANSWER = "answer"  # answer the rule's status itself; the server never sees the request
    ANSWER_AFTER_FORWARD = "answer_after_forward"  # forward, discard the answer, send the status


@dataclass(frozen=True)
class _Answer:
    """The proxy's own answer: `status` with a Status body whose `reason` may be empty."""

    status: int
    reason: str
    retry_after: int | None

    def encode(self) -> bytes:
        status: dict[str, object] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"fault proxy answered {self.status}",
            "code": self.status,
        }
        if self.reason:
            status["reason"] = self.reason
        body = json.dumps(status).encode()
        head = [
            f"HTTP/1.1 {self.status} Fault Proxy",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
        ]
        if self.retry_after is not None:
            head.append(f"Retry-After: {self.retry_after}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class Rule:
    """Apply `action` to the next `remaining` requests that match (None: until cleared)."""

    action: Action
    remaining: int | None
    method: str | None
    path_contains: str | None
    seconds: float
    answer: _Answer | None = None
    expires_at: float | None = None  # monotonic time after which the rule no longer matches

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.expires_at is not None and time.monotonic() >= self.expires_at:
            return False
        if self.method is not None and self.method != method:
            return False
        return self.path_contains is None or self.path_contains in path


@dataclass(frozen=True)
class ProxyEvent:
    """One request the proxy handled, and what the API server answered (None: not forwarded
    or no answer read)."""

    method: str
    path: str
    action: Action
    upstream_status: int | None
    at: float = field(default_factory=time.monotonic)  # when the proxy handled it


class ConnectionEnded(Exception):
    """The peer closed the connection (or sent something that is not HTTP/1.1)."""


@dataclass
class _Message:
    head: bytes
    start_line: str
    headers: dict[str, str]

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None else None

    @property
    def wants_close(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"


class FaultProxy:
    """A listening proxy on 127.0.0.1; `host` is the URL to give a client Configuration."""

    def __init__(
        self, upstream_port: int, ca_file: Path, serving_cert: Path, serving_key: Path
    ) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_tls.load_cert_chain(str(serving_cert), str(serving_key))
        self._server_tls.set_alpn_protocols(["http/1.1"])
        self._client_tls = ssl.create_default_context(cafile=str(ca_file))
        self._client_tls.set_alpn_protocols(["http/1.1"])
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._counters: Counter[str] = Counter()
        self._events: list[ProxyEvent] = []
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.host = f"https://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept_loop, name="faultproxy", daemon=True)
        self._acceptor.start()

    @classmethod
    def in_front_of(cls, plane: ControlPlane) -> FaultProxy:
        return cls(plane.port, plane.ca_file, plane.serving_cert, plane.serving_key)

    # ---- modes -----------------------------------------------------------------------------

    def set_mode(
        self,
        action: Action,
        count: int | None = 1,
        method: str | None = None,
        path_contains: str | None = None,
        seconds: float = 0.0,
    ) -> None:
        """Add a rule; rules are tried in the order added, the first that matches applies."""
        rule = Rule(action, count, method.upper() if method else None, path_contains, seconds)
        with self._lock:
            self._rules.append(rule)

    def passthrough(self) -> None:
        """Forget every rule: all further requests pass through untouched."""
        with self._lock:
            self._rules.clear()

    def delay(self, seconds: float, count: int | None = 1, method: str | None = None) -> None:
        self.set_mode(Action.DELAY, count, method, seconds=seconds)

    def stall(self, seconds: float, count: int | None = 1, method: str | None = None) -> None:
        self.set_mode(Action.STALL, count, method, seconds=seconds)

    def drop_response_after_forward(self, count: int | None = 1, method: str | None = None) -> None:
        self.set_mode(Action.DROP_RESPONSE_AFTER_FORWARD, count, method)

    def reset_before_forward(self, count: int | None = 1, method: str | None = None) -> None:
        self.set_mode(Action.RESET_BEFORE_FORWARD, count, method)

    def reset_after_forward(self, count: int | None = 1, method: str | None = None) -> None:
        self.set_mode(Action.RESET_AFTER_FORWARD, count, method)

    def answer(
        self,
        status: int,
        reason: str = "",
        *,
        forward: bool = False,
        count: int | None = 1,
        method: str | None = None,
        retry_after: int | None = None,
        for_seconds: float | None = None,
    ) -> None:
        """Answer matching requests with `status` (Status body `reason`, empty: none).

        forward=True sends the request to the API server first (it may commit) and discards
        its answer; `for_seconds` limits the rule to a window starting now.
        """
        action = Action.ANSWER_AFTER_FORWARD if forward else Action.ANSWER
        expires_at = None if for_seconds is None else time.monotonic() + for_seconds
        rule = Rule(
            action,
            count,
            method.upper() if method else None,
            None,
            0.0,
            _Answer(status, reason, retry_after),
            expires_at,
        )
        with self._lock:
            self._rules.append(rule)

    # ---- observations ----------------------------------------------------------------------

    @property
    def counters(self) -> dict[str, int]:
        """Requests per action name, plus "connections" and "forwarded" (sent upstream)."""
        with self._lock:
            return dict(self._counters)

    @property
    def events(self) -> list[ProxyEvent]:
        with self._lock:
            return list(self._events)

    def close(self) -> None:
        """Stop listening and cut every open connection."""
        with self._lock:
            self._closed = True
            open_sockets = list(self._sockets)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        self._listener.close()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self._acceptor.join(timeout=5)

    # ---- connection handling ---------------------------------------------------------------

    def _accept_loop(self) -> None:
        while True:
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    raw.close()
                    return
                self._counters["connections"] += 1
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        self._track(raw)
        downstream: ssl.SSLSocket | None = None
        upstream = _UpstreamLink(self._connect_upstream, self._untrack)
        try:
            downstream = self._server_tls.wrap_socket(raw, server_side=True)
            self._track(downstream)
            reader = downstream.makefile("rb")
            while self._handle_request(reader, downstream, upstream):
                pass
        except (ConnectionEnded, OSError, ValueError):
            return
        finally:
            upstream.close()
            for sock in (downstream, raw):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
                    self._untrack(sock)

    def _handle_request(
        self, reader: BufferedIOBase, downstream: ssl.SSLSocket, upstream: _UpstreamLink
    ) -> bool:
        """Read one request and apply its rule; True if the client connection stays open."""
        request = _read_message(reader)
        body = _read_body(reader, request, is_response=False)
        method, path = _method_and_path(request)
        rule = self._take_rule(method, path)
        action = rule.action if rule else Action.PASSTHROUGH
        seconds = rule.seconds if rule else 0.0
        if action is Action.RESET_BEFORE_FORWARD:
            self._record(method, path, action, None)
            _reset(downstream)
            return False
        if action is Action.ANSWER and rule is not None and rule.answer is not None:
            self._record(method, path, action, None)
            downstream.sendall(rule.answer.encode())
            return not request.wants_close
        if action is Action.DELAY:
            time.sleep(seconds)
        status: int | None = None
        try:
            upstream_reader = upstream.send(request.head + body)
            self._count("forwarded")
            if action in (Action.PASSTHROUGH, Action.DELAY):
                response = _read_final_head(upstream_reader, downstream)
                status = _status(response)
                self._record(method, path, action, status)
                keep_open = _relay_body(upstream_reader, downstream, response, method)
                return keep_open and not request.wants_close
            response = _read_message(upstream_reader)
            _read_body(upstream_reader, response, is_response=True, method=method)
            status = _status(response)
            self._record(method, path, action, status)
        finally:
            if status is None:  # not forwarded (server down) or no answer came back
                self._record(method, path, action, None)
        if action is Action.ANSWER_AFTER_FORWARD and rule is not None and rule.answer is not None:
            downstream.sendall(rule.answer.encode())
            return not request.wants_close
        if action is Action.STALL:
            time.sleep(seconds)
        if action is Action.RESET_AFTER_FORWARD:
            _reset(downstream)
        return False  # STALL / DROP close with FIN: the answer is never sent

    def _connect_upstream(self) -> ssl.SSLSocket:
        raw = socket.create_connection(self._upstream, timeout=None)
        upstream = self._client_tls.wrap_socket(raw, server_hostname=self._upstream[0])
        self._track(upstream)
        self._count("upstream_connections")
        return upstream

    def _count(self, name: str) -> None:
        with self._lock:
            self._counters[name] += 1

    def _take_rule(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule
        return None

    def _record(self, method: str, path: str, action: Action, status: int | None) -> None:
        with self._lock:
            self._counters[action.value] += 1
            self._events.append(ProxyEvent(method, path, action, status))

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)


@dataclass
class ProxyPool:
    """Fault proxies in front of one control plane, made on demand and closed together."""

    plane: ControlPlane
    proxies: list[FaultProxy] = field(default_factory=list)

    def make(self) -> FaultProxy:
        proxy = FaultProxy.in_front_of(self.plane)
        self.proxies.append(proxy)
        return proxy

    def close(self) -> None:
        """Close every proxy made so far; the pool stays usable."""
        for proxy in self.proxies:
            proxy.close()
        self.proxies.clear()


class _UpstreamLink:
    """The proxy's own keep-alive connection to the API server for one client connection."""

    def __init__(
        self, connect: Callable[[], ssl.SSLSocket], forget: Callable[[socket.socket], None]
    ) -> None:
        self._connect = connect
        self._forget = forget
        self._sock: ssl.SSLSocket | None = None
        self._reader: BufferedIOBase | None = None

    def send(self, data: bytes) -> BufferedIOBase:
        """Send one request (reconnecting if the server closed the idle connection)."""
        if self._sock is None or self._reader is None or _dropped(self._sock):
            self.close()
            self._sock = self._connect()
            self._reader = self._sock.makefile("rb")
        self._sock.sendall(data)
        return self._reader

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._forget(self._sock)
        self._sock = None
        self._reader = None


# ---- HTTP/1.1 framing (just enough for the API server and the Python client) -------------------


def _read_final_head(upstream: BufferedIOBase, downstream: ssl.SSLSocket) -> _Message:
    """The response head after any interim 1xx answers (those are relayed as they come)."""
    response = _read_message(upstream)
    while 100 <= _status(response) < 200 and _status(response) != 101:
        downstream.sendall(response.head)
        response = _read_message(upstream)
    return response


def _relay_body(
    upstream: BufferedIOBase, downstream: ssl.SSLSocket, response: _Message, method: str
) -> bool:
    """Stream the head and body (chunk by chunk, so watches flow); True if keep-alive holds."""
    downstream.sendall(response.head)
    if not _has_body(response, method):
        return not response.wants_close
    if response.chunked:
        _copy_chunked(upstream, downstream.sendall)
    elif response.content_length is not None:
        _copy_exact(upstream, downstream, response.content_length)
    else:
        _copy_until_eof(upstream, downstream)
        return False
    return not response.wants_close


def _read_message(reader: BufferedIOBase) -> _Message:
    lines: list[bytes] = []
    while True:
        line = reader.readline(_MAX_LINE)
        if not line:
            raise ConnectionEnded
        if line in (b"\r\n", b"\n"):
            if not lines:
                continue  # tolerate stray blank lines between messages
            break
        lines.append(line)
    text = [line.decode("latin-1").rstrip("\r\n") for line in lines]
    headers: dict[str, str] = {}
    for field_line in text[1:]:
        name, _, value = field_line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return _Message(b"".join(lines) + b"\r\n", text[0], headers)


def _read_body(
    reader: BufferedIOBase, message: _Message, is_response: bool, method: str = ""
) -> bytes:
    """The body exactly as framed on the wire (chunked framing kept), so it can be re-sent."""
    if is_response and not _has_body(message, method):
        return b""
    if message.chunked:
        parts: list[bytes] = []
        _copy_chunked(reader, parts.append)
        return b"".join(parts)
    if message.content_length is not None:
        return _read_exact(reader, message.content_length)
    if is_response:
        return reader.read()
    return b""


def _has_body(response: _Message, method: str) -> bool:
    status = _status(response)
    return method != "HEAD" and status not in (204, 304) and not 100 <= status < 200


def _status(response: _Message) -> int:
    parts = response.start_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ConnectionEnded(f"not an HTTP response: {response.start_line!r}")
    return int(parts[1])


def _method_and_path(request: _Message) -> tuple[str, str]:
    parts = request.start_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ConnectionEnded(f"not an HTTP/1.x request: {request.start_line!r}")
    return parts[0].upper(), parts[1]


def _read_exact(reader: BufferedIOBase, length: int) -> bytes:
    data = reader.read(length)
    if len(data) != length:
        raise ConnectionEnded
    return data


def _copy_exact(reader: BufferedIOBase, downstream: ssl.SSLSocket, length: int) -> None:
    while length > 0:
        data = reader.read(min(length, _COPY_CHUNK))
        if not data:
            raise ConnectionEnded
        downstream.sendall(data)
        length -= len(data)


def _copy_until_eof(reader: BufferedIOBase, downstream: ssl.SSLSocket) -> None:
    while data := reader.read1(_COPY_CHUNK):
        downstream.sendall(data)


def _copy_chunked(reader: BufferedIOBase, send: Callable[[bytes], object]) -> None:
    """Copy a chunked body chunk by chunk to `send`, framing included (watches stream)."""
    while True:
        size_line = reader.readline(_MAX_LINE)
        if not size_line:
            raise ConnectionEnded
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            trailer = size_line
            while True:
                line = reader.readline(_MAX_LINE)
                if not line:
                    raise ConnectionEnded
                trailer += line
                if line in (b"\r\n", b"\n"):
                    break
            send(trailer)
            return
        send(size_line + _read_exact(reader, size + 2))  # data and its CRLF


def _dropped(upstream: ssl.SSLSocket) -> bool:
    """True if an idle keep-alive connection was closed by the server (e.g. it restarted).

    Between answers nothing may arrive, so a readable socket means EOF (or garbage): reconnect
    instead of sending into it and inventing a lost answer the server never caused.
    """
    if upstream.pending():
        return True
    readable, _, _ = select.select([upstream], [], [], 0)
    return bool(readable)


def _reset(sock: socket.socket) -> None:
    """Close with RST instead of FIN: SO_LINGER on, timeout 0."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
