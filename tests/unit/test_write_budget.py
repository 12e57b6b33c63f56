"""The write budget's admission and estimate, as pure logic on a simulated clock.

Fifty busy chunked shards (the saturated load of the etcd-cost benchmark, as a model: a head
that carries a growing delta, a compaction rewriting every chunk once the delta passes its
bound) are persisted by the budget for 60 simulated seconds. The bytes sent in any 10 s window
must stay within 10 x the budget plus one persist's size, no shard may starve, and every change
is written in the end. A negative control shows the model is hard enough: the last write's size
as the estimate (the estimate before the fix) overshoots the bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from checkpoint_runtime.constants import (
    DELTA_ROW_BYTES_FACTOR,
    HEAD_DELTA_MAX_BYTES,
    WRITE_OBJECT_OVERHEAD_BYTES,
)
from checkpoint_runtime.store.budget import DueShard, WriteBudget, expected_bytes, object_bytes

BUDGET = 262_144
WINDOW = 10.0
TICK = 0.05  # the Debouncer's interval at a 0.2 s debounce
DEBOUNCE = 0.2
SECONDS = 60.0
SHARDS = 50
CHANGES_PER_SECOND = 50  # one changed row every 20 ms per shard
BASE_BYTES = 145_000  # 5,000 uuid rows, compressed
BASE_ROWS = 5_000
CHUNKS = 2
ROW_BYTES = 60  # a changed row in the delta, compressed
MANIFEST_BYTES = 600  # the head without its delta


@dataclass
class Shard:
    """The model of one busy chunked shard."""

    name: str
    changed: float = 0.0
    dirty_since: float | None = None
    delta_bytes: int = 0
    row_bytes: float = 0.0
    last_write: int = 0
    writes: int = 0
    last_written_at: float = 0.0

    def due(self) -> DueShard:
        return DueShard(
            head_bytes=MANIFEST_BYTES + self.delta_bytes,
            head_annotation_bytes=0,
            head_delta_bytes=self.delta_bytes,
            row_bytes=self.row_bytes,
            changed_rows=int(self.changed),
            base_bytes=BASE_BYTES,
            base_rows=BASE_ROWS,
            chunks=CHUNKS,
            delta_bound=HEAD_DELTA_MAX_BYTES,
        )

    def persist(self, now: float) -> int:
        """Write: the head with its delta, or (past the bound) a compaction."""
        rows = int(self.changed)
        delta = rows * ROW_BYTES
        if delta <= HEAD_DELTA_MAX_BYTES:
            sent = object_bytes(MANIFEST_BYTES + delta, {})
            self.delta_bytes, self.row_bytes = delta, ROW_BYTES if rows else self.row_bytes
        else:
            chunks = CHUNKS * object_bytes(BASE_BYTES // CHUNKS, {})
            sent = object_bytes(MANIFEST_BYTES, {}) + chunks
            self.changed, self.delta_bytes = 0.0, 0
        self.dirty_since = None
        self.last_write, self.writes, self.last_written_at = sent, self.writes + 1, now
        return sent


@dataclass
class Run:
    sent: list[tuple[float, int]]
    largest: int
    longest_wait: float
    shards: list[Shard]

    def worst_window(self) -> int:
        return max(
            sum(size for at, size in self.sent if start <= at < start + WINDOW)
            for start, _ in self.sent
        )


def simulate(estimate: Callable[[Shard], int]) -> Run:
    now = 0.0
    budget = WriteBudget(BUDGET, lambda: now, WINDOW)
    shards = [Shard(f"tn/objectstore/f{index}") for index in range(SHARDS)]
    sent: list[tuple[float, int]] = []
    longest_wait = 0.0
    while now < SECONDS:
        for shard in shards:
            shard.changed += CHANGES_PER_SECOND * TICK
            if shard.dirty_since is None:
                shard.dirty_since = now
        by_name = {shard.name: shard for shard in shards}
        due = {
            shard.name: estimate(shard)
            for shard in shards
            if shard.dirty_since is not None and now - shard.dirty_since >= DEBOUNCE
        }
        for name in budget.admit(due) if due else []:
            shard = by_name[name]
            assert shard.dirty_since is not None
            longest_wait = max(longest_wait, now - shard.dirty_since)
            size = shard.persist(now)
            budget.record(name, size)
            sent.append((now, size))
        now = round(now + TICK, 6)
    largest = max(size for _, size in sent)
    return Run(sent, largest, longest_wait, shards)


def test_the_bytes_in_any_window_stay_within_the_budget_plus_one_persist() -> None:
    run = simulate(lambda shard: expected_bytes(shard.due()))
    bound = WINDOW * BUDGET + run.largest
    assert run.worst_window() <= bound, (run.worst_window(), bound)
    # Never dropped, never starved: every shard keeps being written.
    assert all(shard.writes >= 3 for shard in run.shards), [s.writes for s in run.shards]
    assert run.longest_wait < 2 * WINDOW
    # And the budget is used, not left idle: most of it over the run.
    total = sum(size for _, size in run.sent)
    assert total >= 0.8 * BUDGET * (SECONDS - WINDOW)


def test_negative_control_the_last_writes_size_as_the_estimate_overshoots() -> None:
    run = simulate(lambda shard: max(shard.last_write, 1))
    assert run.worst_window() > WINDOW * BUDGET + run.largest


def test_the_estimate_charges_a_compaction_once_the_delta_would_pass_its_bound() -> None:
    shard = Shard("s", changed=100, delta_bytes=3_000, row_bytes=60)
    head_only = expected_bytes(shard.due())
    assert head_only == MANIFEST_BYTES + 100 * 60 + WRITE_OBJECT_OVERHEAD_BYTES
    shard.changed = 400  # 24,000 bytes of delta > 16 KiB: this persist compacts
    compaction = expected_bytes(shard.due())
    assert compaction >= BASE_BYTES + MANIFEST_BYTES + 3 * WRITE_OBJECT_OVERHEAD_BYTES


@pytest.mark.parametrize("whole", [True, False])
def test_a_shard_without_a_delta_sample_is_estimated_from_its_base(whole: bool) -> None:
    due = DueShard(
        head_bytes=600,
        head_annotation_bytes=400,
        head_delta_bytes=0,
        row_bytes=0,
        changed_rows=10,
        base_bytes=29_000,
        base_rows=1_000,
        chunks=0,
        delta_bound=14_500,
        whole=whole,
    )
    delta = 10 * 29 * DELTA_ROW_BYTES_FACTOR
    if whole:
        assert expected_bytes(due) == 1_000 + 29_000 + delta + 2 * WRITE_OBJECT_OVERHEAD_BYTES
    else:
        assert expected_bytes(due) == 1_000 + delta + WRITE_OBJECT_OVERHEAD_BYTES


def test_an_object_costs_its_value_annotations_and_the_overhead() -> None:
    assert object_bytes(1_000, {"ab": "cde"}) == 1_005 + WRITE_OBJECT_OVERHEAD_BYTES
