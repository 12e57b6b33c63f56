"""Waiting for a condition, or for state to settle, with a bound and a name for the failure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


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


def wait_settled(
    read: Callable[[], T],
    quiet: float,
    timeout: float,
    what: str = "state",
) -> T:
    """Read `read()` until two reads `quiet` seconds apart agree; that value.

    For state a process may still change after the test lost sight of it (a write a killed
    process had sent, an answer a proxy still holds). Raises AssertionError naming `what` if it
    keeps changing for `timeout` seconds.
    """
    started = time.monotonic()
    state = read()
    while time.monotonic() - started <= timeout:
        time.sleep(quiet)
        again = read()
        if again == state:
            return again
        state = again
    raise AssertionError(f"{what} kept changing for {timeout} s")
