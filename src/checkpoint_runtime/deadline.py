"""One monotonic deadline shared by every step of an operation (not 30 s per shard)."""

from __future__ import annotations

import time
from collections.abc import Callable

from checkpoint_runtime.errors import DeadlineExceeded


class Deadline:
    """A point on the monotonic clock; every request under one operation draws from it."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.seconds = seconds
        self._expires_at = clock() + seconds

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self._expires_at - self._clock())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def check(self, what: str) -> None:
        """Raise DeadlineExceeded before starting `what` if no time is left."""
        if self.expired():
            raise DeadlineExceeded(f"deadline of {self.seconds:g} s exceeded before {what}")

    def timeout(self, cap: float | None = None) -> float:
        """A per-request timeout bounded by what is left (and by `cap`, if given)."""
        left = self.remaining()
        return left if cap is None else min(left, cap)
