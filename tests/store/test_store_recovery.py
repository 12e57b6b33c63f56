"""Coming back after a conflict without a restart, stale gauges, and coalescing that honours
the debounce; on both backends (the real API server as the chart's ServiceAccount)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from store_harness import FileHarness, Harness, KubeHarness, open_store

from checkpoint_runtime.backends.base import Backend, ShardWrite, WriteResult
from checkpoint_runtime.errors import ConflictError, EpochFencedError, KeyGrammarError
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store

SHARD = "tn/objectstore/feed"
CURSOR = f"{SHARD}/cursor"
OTHER = "tn/flowlogs"


def conflicts(store: Store, changes: dict[str, str | None]) -> ConflictError:
    with pytest.raises(ExceptionGroup) as raised:
        store.batch(changes)
    (error,) = raised.value.exceptions
    assert isinstance(error, ConflictError)
    return error


def test_after_a_conflict_reload_lets_a_long_running_store_write_the_shard_again(
    harness: Harness,
) -> None:
    first = open_store(harness, writer="library-a")
    first.batch({CURSOR: "a-1", f"{OTHER}/cursor": "a"})
    second = open_store(harness, writer="library-b")
    second.batch({CURSOR: "b-1"})

    conflicts(first, {CURSOR: "a-2"})
    conflicts(first, {CURSOR: "a-3"})  # the stale version stays: every write conflicts
    counted = first.metrics.registry.get_sample_value(
        "checkpoint_conflicts_total", {"shard": SHARD}
    )
    assert counted == 2

    first.reload(SHARD)

    assert first.get(CURSOR) == "b-1"  # the stored copy; the unpersisted a-3 was dropped
    assert first.dirty_shards() == []
    assert first.get(f"{OTHER}/cursor") == "a"  # other shards untouched
    first.batch({CURSOR: "a-4"})
    assert open_store(harness).get(CURSOR) == "a-4"
    conflicts(second, {CURSOR: "b-2"})  # and now the other one is behind, as it should be


def test_reload_keeps_the_epoch_fence(harness: Harness) -> None:
    """A deposed writer that reloads sees the newer stamp and still cannot write."""
    deposed = open_store(harness, writer="old-leader", epoch=1)
    deposed.batch({CURSOR: "old"})
    leader = open_store(harness, writer="new-leader", epoch=2)
    leader.take_ownership()
    conflicts(deposed, {CURSOR: "stale"})

    deposed.reload(SHARD)

    error = conflicts(deposed, {CURSOR: "stale again"})
    assert isinstance(error, EpochFencedError)
    assert open_store(harness, epoch=2).get(CURSOR) == "old"


def test_reload_refuses_a_key_that_is_no_shard(harness: Harness) -> None:
    with pytest.raises(KeyGrammarError):
        open_store(harness).reload("no-such-kind")


def delete_raw(harness: Harness, shard: str) -> None:
    name = shard_name(harness.lease_name, shard)
    if isinstance(harness, FileHarness):
        (harness.folder / f"{name}.shard").unlink()
    else:
        kube: KubeHarness = harness  # type: ignore[assignment]
        kube.admin.delete_namespaced_config_map(name, kube.namespace)


def test_the_gauges_of_a_shard_that_disappears_are_removed(harness: Harness) -> None:
    store = open_store(harness)
    store.batch({CURSOR: "c", f"{OTHER}/cursor": "f"})
    registry = store.metrics.registry
    gauges = ("raw_bytes", "compressed_bytes", "rows", "compression_ratio", "headroom_bytes")
    for gauge in gauges:
        assert registry.get_sample_value(f"checkpoint_shard_{gauge}", {"shard": SHARD}) is not None
    delete_raw(harness, SHARD)  # an operator removed it

    store.reload(SHARD)

    for gauge in (*gauges, "headroom_ratio"):
        assert registry.get_sample_value(f"checkpoint_shard_{gauge}", {"shard": SHARD}) is None
        assert registry.get_sample_value(f"checkpoint_shard_{gauge}", {"shard": OTHER}) is not None
    assert registry.get_sample_value("checkpoint_shards") == 1
    assert store.get(CURSOR) is None
    store.batch({CURSOR: "again"})  # written anew (created), gauges back
    assert registry.get_sample_value("checkpoint_shard_rows", {"shard": SHARD}) == 1


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ChangingDuringWrite:
    """Delegates to a real backend; while the first write is in flight, a collector changes
    the same shard again (`during`)."""

    inner: Backend
    during: list[Any] = field(default_factory=list)
    writes: int = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _changed(self) -> None:
        self.writes += 1
        while self.during:
            self.during.pop(0)()

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self._changed()
        return self.inner.create_shard(write, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self._changed()
        return self.inner.update_shard(write, version, deadline)


def test_a_change_made_during_a_write_waits_its_own_debounce(harness: Harness) -> None:
    """Debounce 1 s. A change at t=0 is written at t=1; a change made while that write is in
    flight (t=1) is due at t=2, not at the next tick: one write per debounce window."""
    clock = Clock(100.0)
    backend = ChangingDuringWrite(harness.backend())
    store = Store.open(
        backend,  # type: ignore[arg-type]
        writer="w",
        epoch=1,
        debounce_seconds=1.0,
        clock=clock,
        deadline_seconds=30,
    )
    store.set(CURSOR, "0")
    backend.during.append(lambda: store.set(CURSOR, "1"))

    clock.now = 101.0
    assert store.persist_due()
    assert backend.writes == 1
    assert store.dirty_shards() == [SHARD]
    for tick in (101.25, 101.5, 101.75):  # the persister's ticks inside the new change's window
        clock.now = tick
        assert not store.persist_due()
    assert backend.writes == 1
    clock.now = 102.0
    assert store.persist_due()
    assert backend.writes == 2
    assert store.dirty_shards() == []
    assert open_store(harness).get(CURSOR) == "1"
    writes = store.metrics.registry.get_sample_value("checkpoint_writes_total", {"shard": SHARD})
    assert writes == 2
