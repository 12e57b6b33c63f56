"""Load, CI-sized (issue 7, scenario 6): 50 collectors x 5000 rows, 10 windows of changes each
ending in a persist, on the real API server. No errors; API writes per window equal its dirty
shards; memory stable. The windows are a quarter of a second here (what is checked holds per
window, whatever its length; a window whose persist runs longer is only counted as overrun);
the soak runs one-second windows, as the runtime persists, for 5 minutes and prints the
figures."""

from __future__ import annotations

from collections.abc import Callable

from rel_load import run_load

from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

RSS_GROWTH_LIMIT = 64 * 1024 * 1024
"""Generous on purpose: this guards against a leak of the order of the data (50 x 5000 rows,
~40 MB raw per copy), not against allocator noise."""


def test_fifty_collectors_persisting_every_second(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy]
) -> None:
    result = run_load(target, fault_proxy, collectors=50, rows=5000, seconds=2.5, period=0.25)
    assert result.windows == 10
    assert result.writes == result.dirty  # exactly the dirty shards, coalesced, nothing else
    assert all(dirty == 5 for dirty in result.dirty)
    assert result.rss_growth < RSS_GROWTH_LIMIT, result.rss
