"""Lease deletion and recreation with running leaders (see rel_lease.py), on the real API server.

Before epochs could be recovered, the leader of a recreated Lease was refused on every shard
stamped under the old one, at every restart: these trials fail on such a store.
"""

from __future__ import annotations

import pytest
from rel_lease import lease_recreation_trial

from checkpoint_testenv.support.kubetarget import KubeTarget

SEEDS = [1, 2]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_new_leader_recovers_after_the_lease_is_recreated_and_the_old_one_is_fenced(
    target: KubeTarget, seed: int
) -> None:
    result = lease_recreation_trial(target, seed)
    print(result)
    a_epoch, b_elected, b_epoch = result.epochs
    assert b_elected < a_epoch < b_epoch  # elected below the stamps, raised above them
    assert result.stale_refused == 2
    assert result.live_writes > 10
    assert result.recovery_seconds < 30
