"""Store behaviour on both backends: sharding, guarded writes, leadership, persistence modes.

Every test here runs on the file backend and on the real API server as the chart's
ServiceAccount (issue 4, acceptance 1, 2, 7 and 8).
"""

from __future__ import annotations

import gzip

import pytest
from store_harness import Harness, RawObject, open_store, raw_shard

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
    SHARD_FORMAT,
)
from checkpoint_runtime.errors import ConflictError, EpochFencedError, KeyGrammarError
from checkpoint_runtime.store.core import Store

FEED = "tn/objectstore/feed-a"
OTHER_FEED = "tn/objectstore/feed-b"
FLOWLOGS = "tn/flowlogs"

FEED_ROWS = {
    f"{FEED}/cursor": "logs/2026/03/01/000041.json.gz",
    f"{FEED}/scan": '{"after":"logs/2026/03/01/000041.json.gz"}',
    **{
        f"{FEED}/seen/bG9ncy8yMDI2LzAzLzAxLzAwMDA{i}": f"2026-03-01T00:00:0{i}.1Z"
        for i in range(10)
    },
    f"{FEED}/gap/000001": '{"from":"2026-03-01T00:00:00Z","to":"2026-03-01T00:01:00Z"}',
}
FLOWLOGS_ROWS = {
    f"{FLOWLOGS}/cursor": "2026-03-01T00:05:00.000000001Z",
    f"{FLOWLOGS}/replay/2026-03-01T00:00:00Z": '{"to":"2026-03-01T00:05:00Z"}',
}


def only_conflicts(group: pytest.ExceptionInfo[ExceptionGroup[Exception]]) -> list[str]:
    assert all(isinstance(error, ConflictError) for error in group.value.exceptions)
    return sorted(error.shard for error in group.value.exceptions)  # type: ignore[attr-defined]


def test_each_collector_namespace_is_one_gzip_shard(harness: Harness) -> None:
    store = open_store(harness)
    store.batch({**FEED_ROWS, **FLOWLOGS_ROWS})

    assert len(harness.object_names()) == 2
    for shard in (FEED, FLOWLOGS):
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert stored.annotations[ANNOTATION_SHARD_KEY] == shard
        assert gzip.decompress(stored.blob).startswith(b'{"format":"' + SHARD_FORMAT.encode())
    reopened = open_store(harness)
    assert dict(reopened.items(FEED + "/")) == FEED_ROWS
    assert dict(reopened.items(FLOWLOGS + "/")) == FLOWLOGS_ROWS
    assert [key for key, _ in reopened.items(f"{FEED}/seen/")] == sorted(
        key for key in FEED_ROWS if "/seen/" in key
    )


def test_get_set_delete_work_in_memory_and_mark_only_the_owning_shard(harness: Harness) -> None:
    store = open_store(harness)
    store.set(f"{FEED}/cursor", "a")
    assert store.get(f"{FEED}/cursor") == "a"
    assert store.dirty_shards() == [FEED]
    assert harness.object_names() == []
    store.flush()
    store.set(f"{FEED}/cursor", "a")  # unchanged value: nothing to write
    assert store.dirty_shards() == []
    store.delete(f"{FEED}/cursor")
    assert store.get(f"{FEED}/cursor") is None
    assert store.dirty_shards() == [FEED]
    with pytest.raises(KeyGrammarError):
        store.set("no-such-kind/cursor", "x")


def test_batch_checks_every_key_before_changing_anything(harness: Harness) -> None:
    store = open_store(harness)
    with pytest.raises(KeyGrammarError):
        store.batch({f"{FEED}/cursor": "x", "tn/objectstore/feed-a/bogus": "y"})
    assert store.get(f"{FEED}/cursor") is None
    assert harness.object_names() == []


def test_deposed_leader_conflicts_and_nothing_is_overwritten(harness: Harness) -> None:
    old = open_store(harness, writer="old", epoch=1)
    old.batch(FEED_ROWS)
    new = open_store(harness, writer="new", epoch=2)
    new.take_ownership()
    new.batch({f"{FEED}/cursor": "written by the new leader"})

    old.set(f"{FEED}/cursor", "stale write of the deposed leader")
    with pytest.raises(ExceptionGroup) as raised:
        old.flush()
    assert only_conflicts(raised) == [FEED]
    assert open_store(harness).get(f"{FEED}/cursor") == "written by the new leader"
    assert old.dirty_shards() == [FEED]  # surfaced, kept, never retried into an overwrite


def test_conflict_in_one_shard_does_not_block_an_independent_shard(harness: Harness) -> None:
    old = open_store(harness, writer="old", epoch=1)
    old.batch({**FEED_ROWS, f"{OTHER_FEED}/cursor": "0", **FLOWLOGS_ROWS})
    new = open_store(harness, writer="old-too", epoch=1)
    new.batch({f"{FEED}/cursor": "other writer"})

    old.set(f"{FEED}/cursor", "conflicting")
    old.set(f"{OTHER_FEED}/cursor", "independent")
    old.set(f"{FLOWLOGS}/cursor", "independent too")
    with pytest.raises(ExceptionGroup) as raised:
        old.flush()

    assert only_conflicts(raised) == [FEED]
    assert old.dirty_shards() == [FEED]
    reopened = open_store(harness)
    assert reopened.get(f"{OTHER_FEED}/cursor") == "independent"
    assert reopened.get(f"{FLOWLOGS}/cursor") == "independent too"
    assert reopened.get(f"{FEED}/cursor") == "other writer"


def test_take_ownership_restamps_every_shard_before_collectors_run(harness: Harness) -> None:
    open_store(harness, writer="a", epoch=3).batch({**FEED_ROWS, **FLOWLOGS_ROWS})
    leader = open_store(harness, writer="b", epoch=4)
    leader.take_ownership()
    for shard in (FEED, FLOWLOGS):
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert (stored.annotations[ANNOTATION_EPOCH], stored.annotations[ANNOTATION_WRITER]) == (
            "4",
            "b",
        )


def test_a_store_never_writes_over_a_newer_epoch(harness: Harness) -> None:
    open_store(harness, writer="new", epoch=7).batch(FEED_ROWS)
    stale = open_store(harness, writer="old", epoch=6)
    stale.set(f"{FEED}/cursor", "stale")
    with pytest.raises(ExceptionGroup) as raised:
        stale.flush()
    (error,) = raised.value.exceptions
    assert isinstance(error, EpochFencedError)
    assert (error.ours, error.stored, error.stored_writer) == (6, 7, "new")
    with pytest.raises(EpochFencedError):
        stale.take_ownership()
    assert open_store(harness).get(f"{FEED}/cursor") == FEED_ROWS[f"{FEED}/cursor"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_debounced_persist_coalesces_changes_into_one_write(harness: Harness) -> None:
    clock = FakeClock()
    store = open_store(harness, debounce_seconds=5.0, clock=clock)
    for index in range(3):
        store.set(f"{FEED}/cursor", str(index))
        clock.now += 1
    assert store.persist_due() is False
    assert harness.object_names() == []
    clock.now += 3
    assert store.persist_due() is True
    assert store.persist_due() is False  # nothing dirty: no write
    writes = store.metrics.registry.get_sample_value("checkpoint_writes_total", {"shard": FEED})
    assert writes == 1
    assert open_store(harness).get(f"{FEED}/cursor") == "2"


def test_flush_persists_every_dirty_shard(harness: Harness) -> None:
    store = open_store(harness)
    for key, value in {**FEED_ROWS, **FLOWLOGS_ROWS}.items():
        store.set(key, value)
    store.flush()
    assert store.dirty_shards() == []
    assert dict(open_store(harness).items()) == {**FEED_ROWS, **FLOWLOGS_ROWS}


def test_unlabeled_object_on_a_shard_name_is_a_conflict_not_a_merge(harness: Harness) -> None:
    from checkpoint_runtime.format.naming import shard_name

    harness.put_raw(shard_name(harness.lease_name, FEED), RawObject({}, {}, b"squatter"))
    store = open_store(harness)  # discovery does not pick the unlabeled object up
    assert store.items() == []
    store.set(f"{FEED}/cursor", "x")
    with pytest.raises(ExceptionGroup) as raised:
        store.flush()
    assert only_conflicts(raised) == [FEED]


def test_store_open_is_typed_by_its_options(harness: Harness) -> None:
    store = Store.open(harness.backend(), writer="w", epoch=0, deadline_seconds=5)
    assert store.deadline_seconds == 5
