"""Shared plumbing of the reliability campaign (tests and scripts/soak.py).

The namespace under test is a `KubeTarget` (checkpoint_testenv.support.kubetarget): stores talk
to it as the chart's ServiceAccount (optionally through a fault proxy), while the checker reads
what is really stored with the admin client, independently of the store under test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from checkpoint_runtime.backends.base import Backend, ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.errors import CheckpointError
from checkpoint_runtime.format.legacy import LegacyState
from checkpoint_runtime.retry import Deadline

__all__ = [
    "CountingBackend",
    "is_named",
    "leaf_errors",
    "rss_bytes",
]


@dataclass
class CountingBackend:
    """Wraps a backend and records every write-side call (open must make none)."""

    inner: Backend
    writes: list[str] = field(default_factory=list)

    @property
    def lease_name(self) -> str:
        return self.inner.lease_name

    def describe(self) -> str:
        return self.inner.describe()

    def list_shards(self, deadline: Deadline) -> list[StoredShard]:
        return self.inner.list_shards(deadline)

    def read_shard(self, shard: str, deadline: Deadline) -> StoredShard | None:
        return self.inner.read_shard(shard, deadline)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self.writes.append(f"create {write.shard}")
        return self.inner.create_shard(write, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self.writes.append(f"update {write.shard}")
        return self.inner.update_shard(write, version, deadline)

    def read_legacy(self, deadline: Deadline) -> LegacyState | None:
        return self.inner.read_legacy(deadline)

    def mark_legacy(self, legacy: LegacyState, digest: str, deadline: Deadline) -> None:
        self.writes.append(f"mark {legacy.name}")
        self.inner.mark_legacy(legacy, digest, deadline)


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The leaves of a (possibly nested) ExceptionGroup, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


def is_named(error: BaseException) -> bool:
    """A surfaced error the store raises on purpose (the exported types of errors.py)."""
    return all(isinstance(leaf, CheckpointError) for leaf in leaf_errors(error))


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc), for memory-stability samples."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")
