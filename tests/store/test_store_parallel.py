"""Writes to one shard are serialised, writes to different shards are not (§2).

Shown by ordering, never by timing: a backend wrapper holds one shard's write on an Event, and
the test observes what completes while it is held. Runs on the file backend and on the real
API server as the chart's ServiceAccount.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from store_harness import Harness, open_store

from checkpoint_runtime.backends.base import Backend, ShardWrite, WriteResult
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store

SLOW = "objectstore/a"
FAST = "flowlogs"
# Generous safety nets so that a regression fails instead of hanging; never the assertion.
NET = 60.0


class Gate:
    """A backend whose writes of some shards wait on `release` (or meet at a barrier)."""

    def __init__(
        self, inner: Backend, held: set[str], barrier: threading.Barrier | None = None
    ) -> None:
        self.inner = inner
        self.held = held
        self.barrier = barrier
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished: list[str] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _hold(self, shard: str) -> None:
        if self.barrier is not None:
            self.barrier.wait(NET)  # BrokenBarrierError unless the writes run side by side
        if shard in self.held:
            self.entered.set()
            assert self.release.wait(NET), "the held write was never released"

    def _done(self, shard: str) -> None:
        with self._lock:
            self.finished.append(shard)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self._hold(write.shard)
        result = self.inner.create_shard(write, deadline)
        self._done(write.shard)
        return result

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self._hold(write.shard)
        result = self.inner.update_shard(write, version, deadline)
        self._done(write.shard)
        return result


def gated_store(harness: Harness, gate_for: Any) -> tuple[Store, Gate]:
    plain = open_store(harness)
    gate: Gate = gate_for(plain.backend)
    return Store.open(gate, writer="leader-1", epoch=1), gate  # type: ignore[arg-type]


def test_batch_on_one_shard_completes_while_another_shards_write_is_stalled(
    harness: Harness,
) -> None:
    store, gate = gated_store(harness, lambda inner: Gate(inner, {SLOW}))
    store.set(f"{SLOW}/cursor", "x")
    flushing = threading.Thread(target=store.flush)
    flushing.start()
    assert gate.entered.wait(NET)

    store.batch({f"{FAST}/cursor": "y"})  # with a store-wide persist lock this waits for SLOW

    assert gate.finished == [FAST]
    assert flushing.is_alive()
    assert not gate.release.is_set()
    gate.release.set()
    flushing.join(NET)
    assert gate.finished == [FAST, SLOW]
    assert store.dirty_shards() == []
    reopened = open_store(harness)
    assert reopened.get(f"{SLOW}/cursor") == "x"
    assert reopened.get(f"{FAST}/cursor") == "y"


def test_a_persist_of_several_shards_writes_them_side_by_side(harness: Harness) -> None:
    shards = ["objectstore/a", "objectstore/b", "objectstore/c"]
    barrier = threading.Barrier(len(shards))
    store, gate = gated_store(harness, lambda inner: Gate(inner, set(), barrier))
    for shard in shards:
        store.set(f"{shard}/cursor", shard)

    store.flush()  # one at a time, the first write would wait at the barrier for the others

    assert sorted(gate.finished) == shards
    assert not barrier.broken
    assert store.dirty_shards() == []


def test_a_second_write_to_a_stalled_shard_waits_for_the_first(harness: Harness) -> None:
    """Same-shard writes stay serialised: the later one sends the version the first produced,
    so neither conflicts (sent side by side, both would carry the same version)."""
    store, gate = gated_store(harness, lambda inner: Gate(inner, {SLOW}))
    store.set(f"{SLOW}/cursor", "first")
    errors: list[BaseException] = []

    def recorded(call: Any) -> threading.Thread:
        def run() -> None:
            try:
                call()
            except BaseException as error:  # reported below
                errors.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    flushing = recorded(store.flush)
    assert gate.entered.wait(NET)
    gate.held.clear()  # only the first write is held
    batching = recorded(lambda: store.batch({f"{SLOW}/cursor": "second"}))
    while store.get(f"{SLOW}/cursor") != "second":  # the batch applied; its write comes next
        threading.Event().wait(0.001)
    gate.release.set()
    flushing.join(NET)
    batching.join(NET)

    assert errors == []
    assert gate.finished in ([SLOW], [SLOW, SLOW])
    store.flush()
    assert open_store(harness).get(f"{SLOW}/cursor") == "second"


def test_a_failed_shard_stays_dirty_while_the_others_are_written(harness: Harness) -> None:
    keys = [f"objectstore/s{i}" for i in range(5)]
    store = open_store(harness)
    store.batch({f"{key}/cursor": "v1" for key in keys})
    rival = open_store(harness, writer="leader-2")
    rival.batch({f"{keys[2]}/cursor": "rival"})
    for key in keys:
        store.set(f"{key}/cursor", "v2")

    with pytest.raises(ExceptionGroup) as failed:
        store.flush()

    assert [error.shard for error in failed.value.exceptions] == [keys[2]]  # type: ignore[attr-defined]
    assert store.dirty_shards() == [keys[2]]
    reopened = open_store(harness)
    assert [reopened.get(f"{key}/cursor") for key in keys] == ["v2", "v2", "rival", "v2", "v2"]
