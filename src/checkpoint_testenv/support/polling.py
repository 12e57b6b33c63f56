"""Waiting for a condition, with a bound and a name for the failure."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    what: str = "condition",
    interval: float = 0.05,
) -> float:
    """Poll `predicate` every `interval` seconds until true; the seconds it took.

    Raises AssertionError naming `what` when `timeout` passes first.
    """
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)
    return time.monotonic() - started
