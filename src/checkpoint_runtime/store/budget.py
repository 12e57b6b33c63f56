"""The store's write budget: bytes sent to the API per second, over a sliding window.

The debounced persist asks the budget which due shards to write now. Shards that wrote least
over the last window go first; a shard whose next write would take the window past
`bytes_per_second x window` waits (its debounce is stretched) until the window has room, and
no busier shard overtakes it meanwhile, so the busiest shards are the ones slowed and none
starves. Nothing is dropped or failed: a waiting shard stays
dirty and is written as soon as room frees up, and when nothing has been written in the window
one shard is always let through, whatever its size. Synchronous writes (batch, flush,
take_ownership) are never held back; their bytes still count.

What is charged is what was sent, after each write: every object's value, its annotations
and `WRITE_OBJECT_OVERHEAD_BYTES` (name, labels, the metadata the server adds). A write that
cost more than admitted leaves the window in debt, and nothing more is admitted until the
debt has slid out of it. What is admitted is an estimate made before the write is planned
(`expected_bytes`): a head-only persist costs its head, but a persist whose delta would pass
its bound compacts and rewrites the base's chunks, so the estimate charges those too. With
that estimate, the bytes sent in any window stay within the budget plus one write that found
the window empty (the last write's size as the estimate, as before, let a batch of compactions
through at the price of heads: 1.27 x the bound was measured).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from checkpoint_runtime.constants import (
    DELTA_ROW_BYTES_FACTOR,
    WRITE_BUDGET_WINDOW_SECONDS,
    WRITE_OBJECT_OVERHEAD_BYTES,
)


def object_bytes(value_bytes: int, annotations: Mapping[str, str]) -> int:
    """What writing one object costs the budget: its value, its annotations and the rest of
    the object (WRITE_OBJECT_OVERHEAD_BYTES)."""
    meta = sum(len(key) + len(value) for key, value in annotations.items())
    return value_bytes + meta + WRITE_OBJECT_OVERHEAD_BYTES


@dataclass(frozen=True)
class DueShard:
    """What the store knows of a due shard before its write is planned (cheap to gather)."""

    head_bytes: int
    """The stored head's value bytes (0: never written)."""
    head_annotation_bytes: int
    head_delta_bytes: int
    """Compressed bytes of the delta the stored head carries."""
    row_bytes: float
    """Compressed bytes per changed row in the last delta written (0: none written yet)."""
    changed_rows: int
    """Rows changed since the base now (what the next delta would carry)."""
    base_bytes: int
    """Compressed bytes of the base (inline member or every active chunk)."""
    base_rows: int
    chunks: int
    """Active chunk slots (0: the base is inline in the head)."""
    delta_bound: float
    """The most delta bytes a head may carry before the persist compacts."""
    whole: bool = False
    """The next persist rewrites the whole state (no v3 base yet, or one past its bound)."""


def expected_bytes(due: DueShard) -> int:
    """The bytes the next persist of `due` is expected to send (an upper estimate): the head
    with its grown delta, or, when that delta would pass its bound, a compaction (the head
    without a delta, and every chunk of the base rewritten with the changed rows). A changed
    row costs what one cost in the last delta written (before any: DELTA_ROW_BYTES_FACTOR x a
    base row, since a small delta compresses worse than the base)."""
    per_row = due.row_bytes or (DELTA_ROW_BYTES_FACTOR * due.base_bytes / max(due.base_rows, 1))
    delta = per_row * due.changed_rows
    fixed = max(due.head_bytes - due.head_delta_bytes, 0) + due.head_annotation_bytes
    if due.whole or delta > due.delta_bound:
        objects = 1 + max(due.chunks, 1)
        cost = fixed + due.base_bytes + delta + objects * WRITE_OBJECT_OVERHEAD_BYTES
    else:
        cost = fixed + delta + WRITE_OBJECT_OVERHEAD_BYTES
    return max(int(cost), 1)


class WriteBudget:
    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float],
        window: float = WRITE_BUDGET_WINDOW_SECONDS,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self.window = window
        self._clock = clock
        self._sent: collections.deque[tuple[float, str, int]] = collections.deque()
        self._lock = threading.Lock()

    def _trim(self, now: float) -> None:
        while self._sent and self._sent[0][0] <= now - self.window:
            self._sent.popleft()

    def record(self, shard: str, sent: int) -> None:
        """Charge `sent` bytes, just sent for `shard` (after the write: what it really cost)."""
        with self._lock:
            now = self._clock()
            self._sent.append((now, shard, sent))
            self._trim(now)

    def admit(self, expected: Mapping[str, int]) -> list[str]:
        """Of the due shards (shard -> bytes its write is expected to send), those to write
        now: least busy first, while the window has room (all of them without a budget)."""
        if self.bytes_per_second <= 0:
            return sorted(expected)
        with self._lock:
            now = self._clock()
            self._trim(now)
            per_shard: dict[str, int] = collections.Counter()
            for _, shard, sent in self._sent:
                per_shard[shard] += sent
            used = sum(per_shard.values())
        room = self.bytes_per_second * self.window - used
        admitted: list[str] = []
        for shard in sorted(expected, key=lambda key: (per_shard.get(key, 0), key)):
            cost = expected[shard]
            if not (cost <= room or (used == 0 and not admitted)):
                # No busier shard overtakes one that waits for room: otherwise small writes
                # keep the window full and a large one (a compaction) would wait forever.
                break
            admitted.append(shard)
            room -= cost
        return admitted
