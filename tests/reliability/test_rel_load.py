"""Load, CI-sized (issue 7, scenario 6): 50 collectors x 5000 rows, persisting every second
for about 10 s, on the real API server. No errors; API writes per window equal its dirty
shards; memory stable. The soak runs the same for 5 minutes and prints the figures."""

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
    result = run_load(target, fault_proxy, collectors=50, rows=5000, seconds=10)
    assert result.windows == 10
    assert result.writes == result.dirty  # exactly the dirty shards, coalesced, nothing else
    assert all(dirty == 5 for dirty in result.dirty)
    assert result.rss_growth < RSS_GROWTH_LIMIT, result.rss
