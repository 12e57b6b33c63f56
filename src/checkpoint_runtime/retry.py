"""The one retry policy of the runtime, and the one deadline every retried call lives in.

An operation (an open, a batch, a debounced persist, a flush) gets one monotonic `Deadline`,
shared by every request and every retry under it (not 30 s per shard): each request's timeout is
what is left of it, and a retry loop stops when the next pause would outlast it. The policy
paces every retried API call of the store (reads, uncertain-write resolution, the legacy mark)
and every collector whose source fails.

A pause doubles from a first one up to a cap, jittered, and is never shorter than the server's
`Retry-After` on a 429 or 503. The store's calls pause inside the operation's shared deadline;
a collector's source (`collector_backoff`) is retried from its poll interval up to
COLLECTOR_BACKOFF_MAX_SECONDS (a poll interval beyond it is never shortened), unjittered: one
collector polls one source, so there is no herd to spread.

For the store's calls:

Pause k (k = 0, 1, ...) lasts `jitter * min(BACKOFF_MAX, BACKOFF_FIRST * 2**k)` with jitter
drawn uniformly from [JITTER_MIN, 1], or the server's Retry-After if that is longer. So within
T seconds of a failing server a retry loop sends at most

    1 + UNCAPPED_STEPS + T / (JITTER_MIN * BACKOFF_MAX)

attempts (UNCAPPED_STEPS pauses before the cap is reached, the rest at least
JITTER_MIN * BACKOFF_MAX apart); with Retry-After: R, at most 1 + T / R.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any

from checkpoint_runtime.constants import COLLECTOR_BACKOFF_MAX_SECONDS
from checkpoint_runtime.errors import DeadlineExceeded

BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0
JITTER_MIN = 0.5
RETRY_AFTER_STATUSES = (429, 503)
UNCAPPED_STEPS = math.ceil(math.log2(BACKOFF_MAX / BACKOFF_FIRST))  # pauses below the cap


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


def max_attempts(seconds: float) -> int:
    """The most attempts one retry loop makes while the server fails for `seconds`."""
    return 1 + UNCAPPED_STEPS + math.floor(seconds / (JITTER_MIN * BACKOFF_MAX))


def retry_after(error: BaseException) -> float | None:
    """The Retry-After seconds of a 429/503 API answer (None if absent or not a number)."""
    if int(getattr(error, "status", 0) or 0) not in RETRY_AFTER_STATUSES:
        return None
    headers: Any = getattr(error, "headers", None) or {}
    value: Any = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None  # an HTTP date or garbage: fall back to our own backoff
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class Backoff:
    """Pauses between attempts of one retried operation (the store's, unless told otherwise)."""

    def __init__(
        self,
        rng: random.Random | None = None,
        *,
        first: float = BACKOFF_FIRST,
        cap: float = BACKOFF_MAX,
        jitter_min: float = JITTER_MIN,
    ) -> None:
        self._next = first
        self._cap = cap
        self._jitter_min = jitter_min
        self._rng = rng or random.Random()

    def delay(self, error: BaseException | None) -> float:
        """The next pause: jittered exponential, at least the server's Retry-After."""
        pause = self._next * self._rng.uniform(self._jitter_min, 1.0)
        self._next = min(self._next * 2, self._cap)
        asked = retry_after(error) if error is not None else None
        return pause if asked is None else max(pause, asked)

    def pause(self, deadline: Deadline, error: BaseException | None) -> bool:
        """Sleep the next pause and return True, or False if it would outlast the deadline."""
        seconds = self.delay(error)
        if deadline.remaining() <= seconds:
            return False
        time.sleep(seconds)
        return True


def collector_backoff(poll_seconds: float) -> Backoff:
    """The pauses after a collector's consecutive source failures: the poll interval, then
    doubled up to COLLECTOR_BACKOFF_MAX_SECONDS (or the poll interval, if that is longer)."""
    cap = max(poll_seconds, COLLECTOR_BACKOFF_MAX_SECONDS)
    return Backoff(first=poll_seconds, cap=cap, jitter_min=1.0)
