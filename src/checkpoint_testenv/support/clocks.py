"""Clocks a test moves by hand."""

from __future__ import annotations


class FrozenClock:
    """A monotonic clock (e.g. an elector's) that moves only when the test moves `now`."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
