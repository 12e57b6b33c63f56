"""The store's write budget: bytes of ConfigMap values sent to the API per second.

The debounced persist asks the budget which due shards to write now. Shards that wrote least
over the last window go first; a shard whose next write would take the window past
`bytes_per_second x window` waits (its debounce is stretched) until the window has room, so
the busiest shards are the ones slowed. Nothing is dropped or failed: a waiting shard stays
dirty and is written as soon as room frees up, and when nothing has been written in the window
one shard is always let through, whatever its size (so over any window the store sends at most
the budget plus one object). Synchronous writes (batch, flush, take_ownership) are never held
back; their bytes still count.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping

from checkpoint_runtime.constants import WRITE_BUDGET_WINDOW_SECONDS


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
            if cost <= room or (used == 0 and not admitted):
                admitted.append(shard)
                room -= cost
        return admitted
