"""Bases prepared between persists (`Store.prepare_compactions`), on both backends.

A shard whose next persist is expected to pass its delta bound gets its new base encoded while
nothing is due; the persist that passes the bound then writes that base with a delta of the
rows changed since its snapshot, and encodes nothing itself. A prepared base is written only
while it is still a base of these rows: never after another base was committed since its
snapshot, nor after the rows were replaced wholesale. Each of those two guards' tests fails
when the guard is removed (checked by removing each once).
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from store_harness import Harness, open_store, raw_shard

from checkpoint_runtime.constants import MAX_DECODED_ENVELOPE
from checkpoint_runtime.errors import OversizeError
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.codec import gunzip_members
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store import chunked, planner
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer
from checkpoint_testenv.support.polling import wait_for

FEED = "tn/objectstore/feed-a"


def head_document(harness: Harness) -> dict[str, Any]:
    stored = raw_shard(harness, FEED)
    assert stored is not None
    document: dict[str, Any] = json.loads(
        gunzip_members(stored.blob, MAX_DECODED_ENVELOPE, FEED)[0].data
    )
    return document


def reopened(harness: Harness) -> dict[str, str]:
    return dict(open_store(harness).items(FEED + "/"))


def compactions(store: Store) -> float:
    value = store.metrics.registry.get_sample_value(
        "checkpoint_shard_compactions_total", {"shard": FEED}
    )
    return value or 0.0


def seen_keys(rows: dict[str, str]) -> list[str]:
    return [key for key in rows if "/seen/" in key]


def refuse_to_encode(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the persist encoded a base although one was prepared")


def test_the_persist_passing_the_bound_writes_the_prepared_base_and_encodes_nothing(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(harness)
    rows = FeedWorkload(FEED, 3000, "uuid").rows
    store.batch(rows)
    assert head_document(harness)["partitions"] == 1
    model = dict(rows)
    seen = seen_keys(rows)
    step = 0
    while store.prepare_compactions() == 0:  # 150 rows a persist, head only, until it is due
        change = dict.fromkeys(seen[step * 150 : (step + 1) * 150], f"v{step}")
        store.batch(change)
        model.update(change)
        step += 1
        assert step < 20, "the delta never approached its bound"
    before = compactions(store)
    assert store.prepare_compactions() == 0  # prepared once

    # Changed after the snapshot: a changed row, a deleted row, a new row, and the next 150.
    late: dict[str, str | None] = {seen[-1]: "late", seen[-2]: None, f"{FEED}/seen/bmV3": "new"}
    late.update(dict.fromkeys(seen[step * 150 : (step + 1) * 150], f"v{step}"))
    monkeypatch.setattr(chunked, "encode_compaction", refuse_to_encode)
    store.batch(late)
    for key, value in late.items():
        if value is None:
            model.pop(key)
        else:
            model[key] = value

    assert compactions(store) == before + 1  # the persist passed the bound: a new base
    # The bound is raised by the delta that head carried, so the next cycle is not shorter.
    state = store.shard_states()[FEED]
    assert state.delta_allowance == state.head_delta_bytes > 0
    assert reopened(harness) == model
    assert dict(store.items(FEED + "/")) == model
    monkeypatch.undo()
    store.batch({seen[0]: "after"})  # the next persist's delta is against the new base
    assert reopened(harness) == {**model, seen[0]: "after"}


def test_a_base_prepared_before_the_rows_were_replaced_is_never_written(
    harness: Harness,
) -> None:
    store = open_store(harness)
    rows = FeedWorkload(FEED, 3000, "uuid").rows
    store.batch(rows)
    seen = seen_keys(rows)
    store.batch({seen[0]: "changed"})
    assert store.prepare_compactions([FEED]) == 1

    replaced = {key: value for key, value in rows.items() if key not in seen[:1000]}
    store.install(FEED, replaced, None)  # as a migration does: every row, wholesale
    store.flush()
    assert reopened(harness) == replaced


def test_a_base_prepared_before_another_base_was_committed_is_never_written(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prepare's snapshot is taken, then a compaction commits (deleting a row of a chunk
    the prepared base keeps), then the prepare completes: its base is stale for good."""
    store = open_store(harness)
    rows = FeedWorkload(FEED, 12_000, "uuid").rows
    store.batch(rows)
    partitions = head_document(harness)["partitions"]
    assert partitions >= 2
    seen = seen_keys(rows)
    first = [key for key in seen if codec_v3.partition_of(key, partitions) == 0]
    second = [key for key in seen if codec_v3.partition_of(key, partitions) == 1]
    store.batch({first[0]: "changed"})  # the prepared base rewrites chunk 0 only
    model = {**rows, first[0]: "changed"}

    real = chunked.encode_compaction
    ratio = store.compaction_ratio

    def while_preparing(*args: Any, **kwargs: Any) -> planner.Compaction:
        monkeypatch.setattr(chunked, "encode_compaction", real)
        store.compaction_ratio = 0  # this persist compacts: chunk 1 loses a row
        store.batch({second[0]: None})
        store.compaction_ratio = ratio
        return real(*args, **kwargs)

    monkeypatch.setattr(chunked, "encode_compaction", while_preparing)
    assert store.prepare_compactions([FEED]) == 1
    del model[second[0]]

    # A few rows whose delta passes the bound at once (a large value): the persist compacts.
    large = base64.b64encode(os.urandom(24_000)).decode()
    change = {first[1]: "again", f"{FEED}/cursor": large}
    store.batch(change)
    model.update(change)
    assert reopened(harness) == model


def test_the_debounce_loop_prepares_the_base_while_nothing_is_due(harness: Harness) -> None:
    store = open_store(harness, debounce_seconds=60)
    rows = FeedWorkload(FEED, 3000, "uuid").rows
    store.batch(rows)
    seen = seen_keys(rows)

    def expected_to_compact() -> bool:
        state = store.shard_states()[FEED]
        assert state.layout is not None
        return planner.next_persist_compacts(
            state.layout,
            state.head_delta_bytes,
            state.delta_growth,
            store.compaction_ratio,
            state.delta_allowance,
        )

    step = 0
    while not expected_to_compact():
        store.batch(dict.fromkeys(seen[step * 150 : (step + 1) * 150], f"v{step}"))
        step += 1
        assert step < 20, "the delta never approached its bound"
    errors: list[BaseException] = []
    debouncer = Debouncer(store, errors.append, interval=0.02)
    debouncer.start()
    try:
        wait_for(lambda: store.shard_states()[FEED].prepared is not None, 30, "a prepared base")
    finally:
        debouncer.stop()
    assert errors == []


def test_rows_changed_since_the_snapshot_too_large_for_the_head_are_compacted_into_chunks(
    harness: Harness,
) -> None:
    """Four rows of ~300 KB each changed after the snapshot: as the prepared base's delta the
    head would pass the object limit; encoded now, they spread over more chunks and fit."""
    store = open_store(harness)
    rows = FeedWorkload(FEED, 3000, "uuid").rows
    store.batch(rows)
    seen = seen_keys(rows)
    store.batch({seen[0]: "changed"})
    assert store.prepare_compactions([FEED]) == 1
    large = {key: base64.b64encode(os.urandom(300_000)).decode() for key in seen[1:5]}
    store.batch(large)
    assert reopened(harness) == {**rows, seen[0]: "changed", **large}
    assert head_document(harness)["partitions"] > 1


def test_a_base_that_cannot_be_encoded_is_not_tried_again_on_every_tick(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The debounce loop ticks several times a second: a shard whose next base cannot be
    encoded (here: the encoder refuses it) is tried once per stored base, not at every tick;
    its persist still meets, and raises, the error itself."""
    store = open_store(harness)
    rows = FeedWorkload(FEED, 3000, "uuid").rows
    store.batch(rows)
    store.batch({seen_keys(rows)[0]: "changed"})
    calls: list[str] = []

    def oversize(shard: str, *args: Any, **kwargs: Any) -> planner.Compaction:
        calls.append(shard)
        raise OversizeError(shard, 2_000_000, 1_048_576, 3000)

    monkeypatch.setattr(chunked, "encode_compaction", oversize)
    assert store.prepare_compactions([FEED]) == 0
    assert store.prepare_compactions([FEED]) == 0
    assert calls == [FEED]
