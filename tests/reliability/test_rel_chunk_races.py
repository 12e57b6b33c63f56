"""Chunked-shard races on the real API server (SPEC §4a): every schedule of two writers in a
small scope, random schedules in a larger one, the schedules that break each rule when its guard
is missing, and a negative control (rel_chunk_races.py).

"Every schedule" is every class of schedules up to the order of independent calls (sleep sets:
rel_chunk_races.independent): 38 + 153 classes where the plain search made 161 + 1308 schedules,
and 38 classes of the small scope with each writer compacting a prepared base.
The scopes are explored at this run's depth (checkpoint_testenv.support.exploration): in `just
check` one part of PARTS of each scope, chosen by the commit's seed (the parts rotate with the
commit), and 20 random schedules drawn from it; with CHECKPOINT_EXPLORE=full (the soak) every
class and 200 random schedules. The guard schedules run at every depth: each fails, whatever the
seed, when the guard it names is taken out of the store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

import pytest
from rel_chunk_races import (
    KEY,
    PARTS,
    SHARD,
    Outcome,
    RaceViolation,
    Scope,
    Trial,
    explore,
    guard_schedules,
    random_trials,
)

from checkpoint_runtime.backends.base import Backend, ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.codec_v3 import Manifest, Slot
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import chunked, planner
from checkpoint_testenv.support import exploration
from checkpoint_testenv.support.kubetarget import KubeTarget

EXPLORATION = exploration.current()
RANDOM_TRIALS = EXPLORATION.choose(sample=20, full=200)
GUARDS = guard_schedules()
STATS: dict[str, Counter[str]] = {}


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few rows are enough for chunk slots: no inline base, chunks of a few hundred bytes."""
    monkeypatch.setattr(planner, "INLINE_BASE_MAX_BYTES", 0)
    monkeypatch.setattr(planner, "CHUNK_TARGET_BYTES", 64)


def tally(name: str, outcomes: Iterator[Outcome]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for outcome in outcomes:
        counts["schedules"] += 1
        counts[f"acked {len(outcome.acked)}"] += 1
        counts["crashed"] += bool(outcome.crashed)
        for writer in outcome.failed:
            counts[f"{writer} refused"] += 1
    STATS[name] = counts
    print(f"{name} ({EXPLORATION.describe()}): {dict(counts)}")
    return counts


@pytest.mark.parametrize("leftover", [False, True], ids=["clean", "leftover-slot"])
def test_every_schedule_of_two_writers_keeps_head_and_chunks_consistent(
    target: KubeTarget, leftover: bool
) -> None:
    index = EXPLORATION.part(PARTS, f"chunk races, leftover {leftover}")
    part = None if index is None else (index, PARTS)
    name = f"exhaustive {leftover}, part {'all' if part is None else f'{index} of {PARTS}'}"
    search: dict[str, int] = {}
    counts = tally(name, explore(target, Scope(leftover=leftover), part=part, counts=search))
    print(f"{name}: {search['runs']} runs, {search['pruned']} stopped early (asleep)")
    assert counts["schedules"] > 10
    assert counts["acked 1"] > 0
    assert counts["acked 0"] > 0
    assert counts["crashed"] > 0


def test_every_schedule_of_writers_compacting_prepared_bases_keeps_head_and_chunks_consistent(
    target: KubeTarget,
) -> None:
    """A base prepared between persists is written by the persist that needs it, its head
    carrying a delta against it: the same calls in the same order (claim, slots, commit), so
    the same rules hold in every schedule."""
    index = EXPLORATION.part(PARTS, "chunk races, prepared bases")
    part = None if index is None else (index, PARTS)
    name = f"exhaustive prepared, part {'all' if part is None else f'{index} of {PARTS}'}"
    search: dict[str, int] = {}
    counts = tally(name, explore(target, Scope(prepared=True), part=part, counts=search))
    print(f"{name}: {search['runs']} runs, {search['pruned']} stopped early (asleep)")
    assert counts["schedules"] > 5
    assert counts["acked 1"] > 0
    assert counts["crashed"] > 0


def test_random_schedules_in_a_larger_scope(target: KubeTarget) -> None:
    scope = Scope(leftover=True, persists=2, max_chunks=2, crashes=1)
    seed = EXPLORATION.salted("chunk races, random")
    counts = tally(f"random, seed {seed}", random_trials(target, scope, seed, RANDOM_TRIALS))
    assert counts["schedules"] == RANDOM_TRIALS
    assert counts["acked 2"] > 0
    assert counts["crashed"] > 0


@pytest.mark.parametrize("name", sorted(GUARDS))
def test_a_guard_schedule_refuses_the_deposed_writer_and_keeps_its_successor(
    target: KubeTarget, name: str
) -> None:
    """Each schedule breaks the store's chunks exactly when the guard it names is missing
    (docs/reliability.md: removing the guard makes this test fail)."""
    chooser = GUARDS[name]()
    outcome = Trial(target, Scope(leftover=True, crashes=0), chooser).run()
    print(name, outcome.schedule)
    assert chooser.followed, f"the schedule was not the intended one: {outcome.schedule}"
    assert outcome.acked == [f"{SHARD}/seen/w2-0"]
    assert set(outcome.failed) == {"w1"}
    assert outcome.stored[KEY] == "recovered"


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
    chooser = GUARDS["slot read, then re-proof"]()
    with pytest.raises(RaceViolation, match=r"unreadable|lost"):
        Trial(target, Scope(leftover=True, crashes=0), chooser).run()
