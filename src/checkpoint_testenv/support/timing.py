"""Timing helpers the benchmarks share: one call timed, percentiles, interleaved rotation.

A benchmark compares a measurement with its baseline side by side: every repetition runs every
candidate once, the order rotating (`rotated`), so a load swing on the shared machine hits all
alike; the figures are medians or nearest-rank percentiles of those samples, and the meaningful
number is the ratio of two such figures.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")


def timed_ms(call: Callable[[], Any], *, collect_first: bool = False) -> float:
    """Milliseconds one call takes with the garbage collector paused (optionally after a full
    collection, so garbage left by the previous call is not charged to this one)."""
    if collect_first:
        gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        call()
        return (time.perf_counter() - started) * 1000
    finally:
        gc.enable()


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (p99 of 200 samples is the 198th smallest; p50 of an even count
    the lower middle)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * fraction))
    return ordered[rank - 1]


def nearest_rank_median(values: Sequence[float]) -> float:
    """`percentile(values, 0.5)`: a sample, not the mean of the two middle ones."""
    return percentile(values, 0.5)


def rotated(items: Sequence[Item], repetition: int) -> list[Item]:
    """`items` in the order of one repetition of an interleaved run: shifted by `repetition`."""
    shift = repetition % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def alternated(items: Sequence[Item], repetition: int) -> list[Item]:
    """`items` as given on even repetitions, reversed on odd ones (two candidates back to back,
    alternating which goes first)."""
    return list(items) if repetition % 2 == 0 else list(items)[::-1]
