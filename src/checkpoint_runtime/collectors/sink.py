"""Where collected records go: JSON lines on stdout or appended to a file.

`flush()` makes what was emitted durable *before* a collector records it as seen, so a crash
can at worst repeat records (at-least-once), never lose them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import IO, Any, Protocol

from checkpoint_runtime.errors import ConfigError


class Sink(Protocol):
    def emit(self, record: dict[str, Any]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class JsonLinesSink:
    """One JSON document per line; thread-safe, shared by every collector."""

    def __init__(self, stream: IO[str], fsync: bool = False) -> None:
        self._stream = stream
        self._fsync = fsync
        self._lock = threading.Lock()

    def emit(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._stream.write(line + "\n")

    def flush(self) -> None:
        with self._lock:
            self._stream.flush()
            if self._fsync:
                os.fsync(self._stream.fileno())

    def close(self) -> None:
        self.flush()
        if self._stream is not sys.stdout:
            self._stream.close()


def open_sink(kind: str, path: str | None = None) -> JsonLinesSink:
    """The sink the runtime config names (`sink.kind`: stdout or file)."""
    if kind == "stdout":
        return JsonLinesSink(sys.stdout)
    if kind == "file":
        if not path:
            raise ConfigError("sink.path", "is required for sink kind 'file'")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return JsonLinesSink(open(path, "a", encoding="utf-8"), fsync=True)
    raise ConfigError("sink.kind", f"unknown sink kind {kind!r}")
