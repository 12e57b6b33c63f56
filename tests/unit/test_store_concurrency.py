"""A change made while its shard is being written is not lost: the shard stays dirty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime.backends.base import ShardWrite, WriteResult
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.deadline import Deadline
from checkpoint_runtime.store import Store

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
