"""The file backend's own guarantees: atomic replace, versions as compare-and-swap, the lock."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from checkpoint_runtime.backends.base import ShardWrite
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.constants import ANNOTATION_FORMAT, ANNOTATION_SHARD_KEY, SHARD_FORMAT
from checkpoint_runtime.errors import ConflictError, DeadlineExceeded
from checkpoint_runtime.format.codec import encode_shard
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer

SHARD = "objectstore/feed"


def write(rows: dict[str, str]) -> ShardWrite:
    annotations = {ANNOTATION_SHARD_KEY: SHARD, ANNOTATION_FORMAT: SHARD_FORMAT}
    return ShardWrite(SHARD, encode_shard(SHARD, rows).blob, annotations)


def test_versions_behave_like_resource_versions(tmp_path: Path) -> None:
    backend = FileBackend(tmp_path, "lease")
    first = backend.create_shard(write({f"{SHARD}/cursor": "1"}), Deadline(5)).version
    with pytest.raises(ConflictError, match="already exists"):
        backend.create_shard(write({}), Deadline(5))
    second = backend.update_shard(write({f"{SHARD}/cursor": "2"}), first, Deadline(5)).version
    assert second != first
    with pytest.raises(ConflictError, match="expected"):
        backend.update_shard(write({f"{SHARD}/cursor": "stale"}), first, Deadline(5))
    stored = backend.read_shard(SHARD, Deadline(5))
    assert stored is not None
    assert stored.version == second


def test_replace_is_atomic_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    backend = FileBackend(tmp_path, "lease")
    version = backend.create_shard(write({f"{SHARD}/cursor": "1"}), Deadline(5)).version
    for index in range(5):
        version = backend.update_shard(
            write({f"{SHARD}/cursor": str(index)}), version, Deadline(5)
        ).version
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert len(list(tmp_path.glob("*.shard"))) == 1


def test_a_held_lock_makes_operations_wait_within_the_deadline(tmp_path: Path) -> None:
    backend = FileBackend(tmp_path, "lease")
    with open(tmp_path / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(DeadlineExceeded):
            backend.list_shards(Deadline(0.2))
        releaser = threading.Timer(0.2, fcntl.flock, (lock, fcntl.LOCK_UN))
        releaser.start()
        assert backend.list_shards(Deadline(5)) == []
        releaser.join()


def test_debouncer_thread_persists_after_the_delay(tmp_path: Path) -> None:
    store = Store.open(FileBackend(tmp_path, "lease"), writer="w", debounce_seconds=0.1)
    errors: list[BaseException] = []
    debouncer = Debouncer(store, errors.append, interval=0.02)
    debouncer.start()
    try:
        store.set(f"{SHARD}/cursor", "1")
        for _ in range(250):
            if not store.dirty_shards():
                break
            time.sleep(0.02)
    finally:
        debouncer.stop()
    assert errors == []
    assert store.dirty_shards() == []
    assert Store.open(FileBackend(tmp_path, "lease"), writer="r").get(f"{SHARD}/cursor") == "1"
    assert os.listdir(tmp_path)


def test_temp_files_of_a_writer_killed_before_its_rename_are_swept(tmp_path: Path) -> None:
    backend = FileBackend(tmp_path, "lease")
    backend.create_shard(write({f"{SHARD}/cursor": "1"}), Deadline(5))
    stale = tmp_path / ".lease-objectstore.feed-0123.shard.abc.tmp"
    stale.write_bytes(b"half a shard")
    assert len(backend.list_shards(Deadline(5))) == 1
    assert not stale.exists()
