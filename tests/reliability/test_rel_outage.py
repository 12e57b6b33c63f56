"""A server failing every request for a few seconds (see rel_outage.py): the store stays within
the documented retry bound and commits once the server answers again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rel_outage import outage_trial

from checkpoint_runtime import retry
from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

RECOVERY_SLACK = 5.0
"""Seconds over one pause for the read-back and the write on a loaded 2-core machine."""


@pytest.mark.parametrize(
    ("status", "reason", "retry_after"),
    [(500, "", None), (503, "ServiceUnavailable", 1)],
)
def test_an_outage_is_retried_within_the_bound_and_commits_after_it(
    target: KubeTarget,
    fault_proxy: Callable[[], FaultProxy],
    status: int,
    reason: str,
    retry_after: int | None,
) -> None:
    result = outage_trial(
        target, fault_proxy, status=status, reason=reason, retry_after=retry_after, seconds=3
    )
    # Once the server answers again, the store's next attempt comes after at most one pause
    # (the backoff cap, or the server's Retry-After if longer), then a read-back and the write.
    documented = max(retry.BACKOFF_MAX, retry_after or 0)
    print(
        result,
        f"{result.per_shard_per_second:.2f} requests per shard per outage-second, "
        f"recovery {result.recovery_seconds:.2f} s (one pause: {documented:g} s)",
    )
    assert 2 * result.shards <= result.answered <= result.bound_per_shard * result.shards
    assert result.recovery_seconds < documented + RECOVERY_SLACK
