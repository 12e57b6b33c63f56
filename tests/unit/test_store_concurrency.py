"""A change made while its shard is being written is not lost: the shard stays dirty."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime.backends.base import ShardWrite, WriteResult
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store

KEY = "objectstore/feed/cursor"


class ChangingDuringWrite:
    """A file backend that lets a collector change the shard while its write is in flight."""

    def __init__(self, inner: FileBackend) -> None:
        self.inner = inner
        self.store: Store | None = None
        self.writes: list[ShardWrite] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self.writes.append(write)
        if self.store is not None and len(self.writes) == 1:
            self.store.set(KEY, "changed during the write")
        return self.inner.create_shard(write, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self.writes.append(write)
        return self.inner.update_shard(write, version, deadline)


def test_change_during_a_write_keeps_the_shard_dirty_until_written(tmp_path: Path) -> None:
    backend = ChangingDuringWrite(FileBackend(tmp_path, "lease"))
    store = Store.open(backend, writer="w")  # type: ignore[arg-type]
    backend.store = store
    store.set(KEY, "first")

    store.flush()
    assert store.dirty_shards() == ["objectstore/feed"]
    store.flush()

    assert store.dirty_shards() == []
    assert len(backend.writes) == 2
    reopened = Store.open(FileBackend(tmp_path, "lease"), writer="r")
    assert reopened.get(KEY) == "changed during the write"


def test_text_that_could_never_be_stored_is_refused_when_set(tmp_path: Path) -> None:
    from checkpoint_runtime.errors import UnencodableTextError

    store = Store.open(FileBackend(tmp_path, "lease"), writer="w")
    with pytest.raises(UnencodableTextError):
        store.set(KEY, "\udc80")
    with pytest.raises(UnencodableTextError):
        store.batch({"objectstore/feed/seen/\ud800": "x"})
    assert store.items() == []


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowWrites:
    """Each write takes `seconds` of the store's (fake) clock and records the deadline it got."""

    def __init__(self, inner: FileBackend, clock: Clock, seconds: float) -> None:
        self.inner = inner
        self.clock = clock
        self.seconds = seconds
        self.deadlines: list[Deadline] = []
        self.written = 0
        self._count = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self.deadlines.append(deadline)
        result = self.inner.create_shard(write, deadline)
        with self._count:
            self.clock.now += self.seconds
            self.written += 1
        return result

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self.deadlines.append(deadline)
        result = self.inner.update_shard(write, version, deadline)
        with self._count:
            self.clock.now += self.seconds
            self.written += 1
        return result


def test_one_deadline_is_shared_by_every_shard_of_a_persist(tmp_path: Path) -> None:
    """Each write takes longer than the whole deadline: with one deadline per shard every
    write would start in time; with the shared one, writes starting after the first finished
    fail with DeadlineExceeded, stay dirty, and succeed on the retry."""
    from checkpoint_runtime.errors import DeadlineExceeded

    clock = Clock()
    backend = SlowWrites(FileBackend(tmp_path, "lease"), clock, seconds=30.0)
    store = Store(backend, writer="w", deadline_seconds=25.0, clock=clock)  # type: ignore[arg-type]
    shards = [f"objectstore/f{i}" for i in range(8)]
    for shard in shards:
        store.set(f"{shard}/cursor", "x")

    with pytest.raises(ExceptionGroup) as failed:
        store.flush()

    assert failed.value.exceptions
    assert all(isinstance(error, DeadlineExceeded) for error in failed.value.exceptions)
    assert len({id(deadline) for deadline in backend.deadlines}) == 1
    assert 1 <= backend.written < len(shards)
    assert len(store.dirty_shards()) == len(shards) - backend.written
    assert len(failed.value.exceptions) == len(shards) - backend.written
    backend.seconds = 0.0
    store.flush()
    assert store.dirty_shards() == []
    reopened = Store.open(FileBackend(tmp_path, "lease"), writer="r")
    assert [reopened.get(f"{shard}/cursor") for shard in shards] == ["x"] * len(shards)
