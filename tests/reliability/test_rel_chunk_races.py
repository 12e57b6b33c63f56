"""Chunked-shard races on the real API server (SPEC §4a): every schedule of two writers in a
small scope, random schedules in a larger one, and a negative control (rel_chunk_races.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

import pytest
from rel_chunk_races import RaceViolation, Scope, explore, random_trials

from checkpoint_runtime.backends.base import Backend, ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.codec_v3 import Manifest, Slot
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import chunked, planner
from checkpoint_testenv.support.kubetarget import KubeTarget

RANDOM_TRIALS = 200
STATS: dict[str, Counter[str]] = {}


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few rows are enough for chunk slots: no inline base, chunks of a few hundred bytes."""
    monkeypatch.setattr(planner, "INLINE_BASE_MAX_BYTES", 0)
    monkeypatch.setattr(planner, "CHUNK_TARGET_BYTES", 64)


def tally(name: str, outcomes: Iterator[object]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for outcome in outcomes:
        counts["schedules"] += 1
        counts[f"acked {len(outcome.acked)}"] += 1  # type: ignore[attr-defined]
        counts["crashed"] += bool(outcome.crashed)  # type: ignore[attr-defined]
        for writer in outcome.failed:  # type: ignore[attr-defined]
            counts[f"{writer} refused"] += 1
    STATS[name] = counts
    print(f"{name}: {dict(counts)}")
    return counts


@pytest.mark.parametrize("leftover", [False, True], ids=["clean", "leftover-slot"])
def test_every_schedule_of_two_writers_keeps_head_and_chunks_consistent(
    target: KubeTarget, leftover: bool
) -> None:
    counts = tally(f"exhaustive {leftover}", explore(target, Scope(leftover=leftover)))
    assert counts["schedules"] > 50
    assert counts["acked 1"] > 0
    assert counts["acked 0"] > 0
    assert counts["crashed"] > 0


def test_random_schedules_in_a_larger_scope(target: KubeTarget) -> None:
    scope = Scope(leftover=True, persists=2, max_chunks=2, crashes=1)
    counts = tally("random", random_trials(target, scope, seed=2104, count=RANDOM_TRIALS))
    assert counts["schedules"] == RANDOM_TRIALS
    assert counts["acked 2"] > 0
    assert counts["crashed"] > 0


def proof_before_read(
    backend: Backend,
    shard: str,
    manifest: Manifest,
    writes: Mapping[int, tuple[str, ShardWrite]],
    prove: chunked.Prove,
    deadline: Deadline,
) -> dict[int, tuple[str, Slot]]:
    """write_slots with one rule broken: the leadership proof is made BEFORE reading the slot
    whose version the write then uses (the ordering SPEC §4a forbids)."""
    written: dict[int, tuple[str, Slot]] = {}
    for index, (slot, write) in sorted(writes.items()):
        known = manifest.slots.get(slot)
        try:
            result = _put(backend, write, known, deadline)
        except chunked.ConflictError:
            prove()
            result = _put(backend, write, backend.read_slot(shard, slot, deadline), deadline)
        written[index] = (slot, Slot(result.version, codec_v3.digest(write.blob), len(write.blob)))
    return written


def _put(
    backend: Backend, write: ShardWrite, known: Slot | StoredShard | None, deadline: Deadline
) -> WriteResult:
    """Create the slot's object if nothing is known of it, else update the known version."""
    if known is None:
        return backend.create_shard(write, deadline)
    return backend.update_shard(write, known.version, deadline)


def test_the_checker_catches_a_proof_made_before_the_read(
    target: KubeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chunked, "write_slots", proof_before_read)
    with pytest.raises(RaceViolation, match=r"unreadable|lost"):
        for _ in explore(target, Scope(leftover=True, crashes=0)):
            pass
