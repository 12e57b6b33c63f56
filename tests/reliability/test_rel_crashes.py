"""SIGKILL at random points during persist and migration (SPEC §7, §8; issue 7, scenario 3).

Fixed seeds; the soak runs at least 50 trials. The file backend's atomic replace and the API
server's per-object atomicity mean a kill leaves each shard at the acknowledged batch or the
one in flight, never torn; an interrupted migration resumes on the next open.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rel_crash import (
    PERSIST_SHARDS,
    FilePlace,
    KubePlace,
    migrate_trial,
    persist_trial,
    run_until,
)

from checkpoint_runtime.errors import CorruptShardError
from checkpoint_testenv.support.kubetarget import KubeTarget

SEEDS = [11, 12, 13, 14, 15]


@pytest.mark.parametrize("seed", SEEDS)
def test_file_store_killed_during_persist_keeps_acknowledged_or_in_flight_batch(
    tmp_path: Path, seed: int
) -> None:
    result = persist_trial(FilePlace(tmp_path), seed)
    assert result.acknowledged >= 1


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_kubernetes_store_killed_during_persist_keeps_acknowledged_or_in_flight_batch(
    target: KubeTarget, seed: int
) -> None:
    result = persist_trial(KubePlace(target), seed)
    assert result.acknowledged >= 1


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_migration_killed_on_the_file_store_resumes(tmp_path: Path, seed: int) -> None:
    result = migrate_trial(FilePlace(tmp_path), seed)
    assert result.outcome in ("resumed", "already-complete")


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_migration_killed_on_the_api_server_resumes(target: KubeTarget, seed: int) -> None:
    result = migrate_trial(KubePlace(target), seed)
    assert result.outcome in ("resumed", "already-complete")


def test_checker_detects_a_torn_shard_file(tmp_path: Path) -> None:
    """Negative control: a worker whose file writes are in place and die halfway is caught."""
    place = FilePlace(tmp_path)
    spec = {**place.spec(), "mode": "persist", "shards": PERSIST_SHARDS, "seen": 50, "torn": True}
    lines = run_until(spec, lambda lines: False)
    assert [line for line in lines if line.startswith("ack")] == ["ack 1"]  # died in batch 2
    with pytest.raises(CorruptShardError):
        place.check_raw()
