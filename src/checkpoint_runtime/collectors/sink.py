"""Where collected records go: JSON lines on stdout or appended to a file.

Each record is one line handed to the kernel by one unbuffered write() call as it is emitted:
no part of it waits in a process buffer for a later write, so a kill between two writes cannot
split a record. `flush()` makes what was emitted durable *before* a collector records it as
seen, so a crash can at worst repeat records (at-least-once), never lose them.

One write() is not yet one piece on a file. The kernel copies a write into a regular file a
page (4 KiB) at a time and checks for a SIGKILL before each page: a kill that arrives while it
copies a line that crosses a page boundary leaves the line's first part in the file, without its
newline, and a reader of the live file can see that first part before the rest is in. So a line
that would cross a page boundary starts at the next page instead: the write begins with as many
newlines as fill the current page (empty lines, which JSON-lines readers skip). A line of up to a
page is then copied in one step, whole or not at all, whenever the process dies. A longer line
cannot avoid a boundary; it starts at a page so it crosses as few as it can.

A file is opened O_APPEND: the kernel appends each write() whole under the file's lock, so no
other writer's bytes land inside a record (the page arithmetic assumes this sink is the file's
only writer; another one only costs it the alignment). On a local file system, write() takes
fewer bytes only when the file can take no more (disk full, file size limit) or at a SIGKILL as
above; a second write() then only reports the error. The loop in `_write` is for pipes and
terminals (stdout), where a signal handler can end a blocking write() after part of the line got
in and the rest must follow; the kernel writes a line of up to PIPE_BUF (4096) bytes to a pipe
in one piece.

So the only torn line a file can hold is its last one, without its newline: a line longer than a
page cut by a kill, or any line cut by a full disk. It is kept and terminated: the first write
after it starts with a newline (whether this sink cut it or the file came that way from an
earlier process), so the next record has a line of its own. The fragment is never valid JSON (a
record ends with its closing brace), and its record was not flushed, so the collector emits it
again in full with the rest of its chunk.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Protocol

from checkpoint_runtime.errors import ConfigError

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")  # the kernel copies a file write a page at a time


class Sink(Protocol):
    def emit(self, record: dict[str, Any]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class JsonLinesSink:
    """One JSON document per line on a file descriptor; thread-safe, shared by every collector.

    `fsync`: `flush()` syncs the file to disk (a regular file). `owned`: `close()` closes `fd`.
    """

    def __init__(self, fd: int, *, fsync: bool = False, owned: bool = False) -> None:
        self._fd = fd
        self._fsync = fsync
        self._owned = owned
        self._lock = threading.Lock()
        self._torn: bool | None = None  # does the output end inside a line? None: not looked yet
        self._paged = _is_regular_file(fd)  # a file: lines are kept inside pages

    def emit(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()
        with self._lock:
            if self._torn is None:
                self._torn = self._paged and _ends_inside_a_line(self._fd)
            head = b"\n" if self._torn else b""
            if self._paged:
                head += b"\n" * _to_next_page(os.fstat(self._fd).st_size + len(head), len(line))
            self._write(head + line)

    def _write(self, data: bytes) -> None:
        done = 0
        try:
            while done < len(data):
                written = os.write(self._fd, data[done:])
                if not written:
                    raise OSError(errno.EIO, "the sink took no bytes")
                done += written
        finally:
            if done:
                self._torn = data[done - 1] != ord("\n")

    def flush(self) -> None:
        if self._fsync:
            with self._lock:
                os.fsync(self._fd)

    def close(self) -> None:
        self.flush()
        if self._owned:
            os.close(self._fd)


def _to_next_page(offset: int, size: int) -> int:
    """How many bytes from `offset` to the next page boundary when a line of `size` bytes
    written there would cross one it need not cross (0 when it fits where it is)."""
    room = -offset % PAGE_BYTES
    return room if size > room and room else 0


def _is_regular_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


def _ends_inside_a_line(fd: int) -> bool:
    """A regular file whose last byte is not a newline (its last line is torn)."""
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    except OSError:  # stdout opened write-only: it is not this sink's to repair
        return False


def open_sink(kind: str, path: str | None = None) -> JsonLinesSink:
    """The sink the runtime config names (`sink.kind`: stdout or file)."""
    if kind == "stdout":
        if sys.stdout is not None:
            sys.stdout.flush()  # anything printed before goes out before the first record
        return JsonLinesSink(1)
    if kind == "file":
        if not path:
            raise ConfigError("sink.path", "is required for sink kind 'file'")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        return JsonLinesSink(fd, fsync=_is_regular_file(fd), owned=True)
    raise ConfigError("sink.kind", f"unknown sink kind {kind!r}")
