"""Deposed-leader races (SPEC §7) with random interleavings from a fixed seed, and their checker.

Several store processes ("actors") share one namespace and Lease name. Leadership moves by
promotion: a new actor with the next epoch opens the store and takes ownership, while the
deposed ones keep running on their stale view, as a paused ex-leader would. Operations (set,
delete, flush, batch, reopen, promote, two flushes at once) are drawn from a seeded RNG.

The checker keeps an oracle: per shard, the ordered list of acknowledged writes. Because every
write is a compare-and-swap on the resourceVersion, the model predicts each outcome exactly:

- a write by an actor whose observed stamp is newer than its epoch -> EpochFencedError;
- a write from a view older than the latest acknowledged write -> ConflictError (lost update
  prevented); otherwise -> acknowledged, with the actor's rows and stamp.

After every step the API server's state (read with the admin client) must equal the latest
acknowledged write of every shard, epochs never go backwards, and at the end a fresh store
reads back exactly the oracle.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from rel_support import leaf_errors

from checkpoint_runtime.errors import ConflictError, EpochFencedError
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.kubetarget import KubeTarget

FEED_A = "tn/objectstore/feed-a"
FEED_B = "tn/objectstore/feed-b"
FLOWLOGS = "tn/flowlogs"
KEYS: dict[str, list[str]] = {
    FEED_A: [f"{FEED_A}/cursor", f"{FEED_A}/scan", f"{FEED_A}/seen/aWQx", f"{FEED_A}/gap/000001"],
    FEED_B: [f"{FEED_B}/cursor", f"{FEED_B}/seen/aWQy", f"{FEED_B}/seen/aWQz"],
    FLOWLOGS: [f"{FLOWLOGS}/cursor", f"{FLOWLOGS}/replay/w1", f"{FLOWLOGS}/replay/w2"],
}
MAX_LIVE_ACTORS = 3
OPERATIONS = {
    "set": 30,
    "delete": 8,
    "flush": 18,
    "batch": 14,
    "concurrent-flush": 10,
    "reopen": 10,
    "promote": 10,
    "take-ownership": 5,
}
DEFERRED_OWNERSHIP = 0.35
"""Share of promotions whose take-ownership runs later, letting deposed writers in between."""


class RaceViolation(AssertionError):
    """The store did something the oracle of acknowledged writes forbids."""


@dataclass(frozen=True)
class Ack:
    """One acknowledged shard write."""

    writer: str
    epoch: int
    rows: dict[str, str]


@dataclass
class Actor:
    """One store process and the model of what it holds."""

    name: str
    epoch: int
    store: Store
    view: dict[str, dict[str, str]] = field(default_factory=dict)
    base: dict[str, int] = field(default_factory=dict)
    """Per shard, the index of the acknowledged write this actor last observed (-1: none)."""
    dirty: set[str] = field(default_factory=set)
    pending_ownership: bool = False


@dataclass
class TrialResult:
    seed: int
    outcomes: Counter[str]
    acks: int
    shards: int


class RaceTrial:
    """One seeded trial on a fresh Lease name in `target`'s namespace."""

    def __init__(self, target: KubeTarget, seed: int, steps: int = 25) -> None:
        self.target = target
        self.seed = seed
        self.steps = steps
        self.rng = random.Random(seed)
        self.lease = target.fresh_lease("race")
        self.acks: dict[str, list[Ack]] = {shard: [] for shard in KEYS}
        self.actors: list[Actor] = []
        self.epoch = 0
        self.outcomes: Counter[str] = Counter()
        self.step = 0

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> TrialResult:
        self._promote()
        for step in range(1, self.steps + 1):
            self.step = step
            operation = self.rng.choices(list(OPERATIONS), weights=list(OPERATIONS.values()))[0]
            method = "_take_ownership_later" if operation == "take-ownership" else None
            getattr(self, method or "_" + operation.replace("-", "_"))()
            self.outcomes[operation] += 1
            self._check_stored()
        self._final_check()
        return TrialResult(
            self.seed,
            self.outcomes,
            sum(len(acks) for acks in self.acks.values()),
            sum(1 for acks in self.acks.values() if acks),
        )

    def _fail(self, message: str) -> RaceViolation:
        return RaceViolation(f"seed {self.seed}, step {self.step}, lease {self.lease}: {message}")

    # -- operations ----------------------------------------------------------------------------

    def _actor(self) -> Actor:
        return self.rng.choice(self.actors)

    def _value(self, actor: Actor) -> str:
        return f"{actor.name}@{self.step}"

    def _change(self, actor: Actor, key: str, value: str | None) -> None:
        """Mirror the store's in-memory rule: only a real change marks the shard dirty."""
        shard = _shard_of(key)
        rows = actor.view.setdefault(shard, {})
        if value is None:
            if rows.pop(key, None) is not None:
                actor.dirty.add(shard)
        elif rows.get(key) != value:
            rows[key] = value
            actor.dirty.add(shard)

    def _set(self) -> None:
        actor = self._actor()
        key = self.rng.choice(KEYS[self.rng.choice(list(KEYS))])
        value = self._value(actor)
        actor.store.set(key, value)
        self._change(actor, key, value)

    def _delete(self) -> None:
        actor = self._actor()
        key = self.rng.choice(KEYS[self.rng.choice(list(KEYS))])
        actor.store.delete(key)
        self._change(actor, key, None)

    def _flush(self) -> None:
        actor = self._actor()
        self._persist(actor, sorted(actor.dirty), actor.store.flush)

    def _batch(self) -> None:
        actor = self._actor()
        shards = self.rng.sample(list(KEYS), self.rng.randint(1, 2))
        changes: dict[str, str | None] = {}
        for shard in shards:
            for key in self.rng.sample(KEYS[shard], self.rng.randint(1, 2)):
                changes[key] = None if self.rng.random() < 0.2 else self._value(actor)
        self._check_dirty_sets([actor])
        for key, value in changes.items():
            self._change(actor, key, value)
        attempted = sorted(set(shards) & actor.dirty)
        self._persist(actor, attempted, lambda: actor.store.batch(changes), check_dirty=False)

    def _reopen(self) -> None:
        """The actor restarts from the API state (the leader also retakes ownership)."""
        actor = self._actor()
        fresh = self._open(actor.name, actor.epoch)
        actor.store, actor.view, actor.base, actor.dirty = (
            fresh.store,
            fresh.view,
            fresh.base,
            fresh.dirty,
        )
        if actor.epoch == self.epoch:
            self._take_ownership(actor)

    def _promote(self) -> None:
        self.epoch += 1
        actor = self._open(f"leader-{self.epoch}", self.epoch)
        self.actors.append(actor)
        if len(self.actors) > MAX_LIVE_ACTORS:
            self.actors.pop(0)
        if self.step > 0 and self.rng.random() < DEFERRED_OWNERSHIP:
            actor.pending_ownership = True  # opened, collectors not started yet
        else:
            self._take_ownership(actor)

    def _take_ownership_later(self) -> None:
        """A promoted actor that opened earlier takes ownership now (its view may be stale)."""
        pending = [actor for actor in self.actors if actor.pending_ownership]
        if not pending:
            self._set()
            return
        self._take_ownership(self.rng.choice(pending))

    def _concurrent_flush(self) -> None:
        if len(self.actors) < 2:
            self._flush()
            return
        pair = self.rng.sample(self.actors, 2)
        self._check_dirty_sets(pair)
        start = threading.Barrier(2)
        failures: dict[str, list[BaseException]] = {actor.name: [] for actor in pair}

        def flush(actor: Actor) -> None:
            start.wait()
            try:
                actor.store.flush()
            except BaseException as error:  # collected; judged by the oracle below
                failures[actor.name] = leaf_errors(error)

        threads = [threading.Thread(target=flush, args=(actor,)) for actor in pair]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = {actor.name: self._failed_shards(failures[actor.name]) for actor in pair}
        for shard in sorted(set().union(*(actor.dirty for actor in pair))):
            candidates = [actor for actor in pair if shard in actor.dirty]
            eligible = [actor for actor in candidates if self._expect(actor, shard) == "ack"]
            winners = [actor for actor in candidates if shard not in failed[actor.name]]
            if len(winners) > 1:
                raise self._fail(f"two concurrent writers both acknowledged on {shard}")
            if eligible and (not winners or winners[0] not in eligible):
                raise self._fail(f"no eligible writer won {shard}: winners {winners}")
            if not eligible and winners:
                raise self._fail(f"{winners[0].name} overwrote {shard} from a stale view")
            for actor in candidates:
                if actor in winners:
                    self._acknowledge(actor, shard)
                else:
                    expected = "fenced" if self._expect(actor, shard) == "fenced" else "conflict"
                    self._judge_failure(actor, shard, failed[actor.name][shard], expected)
            self.outcomes["concurrent-winner" if winners else "concurrent-no-winner"] += 1

    # -- model ---------------------------------------------------------------------------------

    def _open(self, name: str, epoch: int) -> Actor:
        store = Store.open(self.target.backend(self.lease), writer=name, epoch=epoch)
        actor = Actor(name, epoch, store)
        for shard, acks in self.acks.items():
            actor.base[shard] = len(acks) - 1
            actor.view[shard] = dict(acks[-1].rows) if acks else {}
        if dict(store.items()) != _union(actor.view):
            raise self._fail(f"{name} opened rows that differ from the acknowledged writes")
        return actor

    def _take_ownership(self, actor: Actor) -> None:
        """Mirror Store.take_ownership: restamp every shard it saw stored with another stamp."""
        self._check_dirty_sets([actor])
        actor.pending_ownership = False
        fenced = sorted(shard for shard in KEYS if self._expect(actor, shard) == "fenced")
        if fenced:
            self._refused_ownership(actor, fenced)
            return
        for shard, acks in self.acks.items():
            base = actor.base[shard]
            if base >= 0 and (acks[base].epoch, acks[base].writer) != (actor.epoch, actor.name):
                actor.dirty.add(shard)
        self._persist(actor, sorted(actor.dirty), actor.store.take_ownership, check_dirty=False)

    def _refused_ownership(self, actor: Actor, fenced: list[str]) -> None:
        """A store that saw a newer epoch refuses take_ownership outright, writing nothing.

        It may have marked other shards for restamping before it met the fenced one; the
        model takes that dirty set from the store (nothing was written, _check_stored proves it).
        """
        try:
            actor.store.take_ownership()
        except EpochFencedError as error:
            if error.shard not in fenced:
                raise self._fail(f"{actor.name}: fenced on {error.shard}, not {fenced}") from error
            self.outcomes["fenced"] += 1
            actor.dirty = set(actor.store.dirty_shards())
            return
        raise self._fail(f"{actor.name} took ownership over newer epochs on {fenced}")

    def _expect(self, actor: Actor, shard: str) -> str:
        acks = self.acks[shard]
        base = actor.base.get(shard, -1)
        observed_epoch = acks[base].epoch if base >= 0 else 0
        if observed_epoch > actor.epoch:
            return "fenced"
        return "ack" if base == len(acks) - 1 else "conflict"

    def _check_dirty_sets(self, actors: list[Actor]) -> None:
        for actor in actors:
            if sorted(actor.dirty) != actor.store.dirty_shards():
                raise self._fail(
                    f"{actor.name}: store's dirty shards {actor.store.dirty_shards()} "
                    f"differ from the model's {sorted(actor.dirty)}"
                )

    def _failed_shards(self, errors: list[BaseException]) -> dict[str, BaseException]:
        failed: dict[str, BaseException] = {}
        for error in errors:
            shard = getattr(error, "shard", None)
            if not isinstance(error, ConflictError) or shard is None:
                raise self._fail(f"unexpected error type {type(error).__name__}: {error}")
            failed[shard] = error
        return failed

    def _persist(
        self, actor: Actor, attempted: list[str], call: Callable[[], None], check_dirty: bool = True
    ) -> None:
        """Run one persisting call and judge every attempted shard against the oracle."""
        if check_dirty:
            self._check_dirty_sets([actor])
        expected = {shard: self._expect(actor, shard) for shard in attempted}
        try:
            call()
            errors: list[BaseException] = []
        except EpochFencedError as error:  # take_ownership refuses before writing anything
            errors = [error]
        except ExceptionGroup as group:
            errors = leaf_errors(group)
        failed = self._failed_shards(errors)
        for shard in attempted:
            if shard in failed:
                self._judge_failure(actor, shard, failed[shard], expected[shard])
            elif expected[shard] != "ack":
                raise self._fail(
                    f"{actor.name} (epoch {actor.epoch}) was acknowledged on {shard}, "
                    f"expected {expected[shard]}: a stale or fenced write went through"
                )
            else:
                self._acknowledge(actor, shard)
        if set(failed) - set(attempted):
            raise self._fail(f"errors for shards never attempted: {sorted(failed)}")

    def _judge_failure(self, actor: Actor, shard: str, error: BaseException, expected: str) -> None:
        if expected == "ack":
            raise self._fail(f"{actor.name} was refused on {shard} without cause: {error}")
        fenced = isinstance(error, EpochFencedError)
        if (expected == "fenced") != fenced:
            raise self._fail(f"{actor.name} on {shard}: expected {expected}, got {error!r}")
        self.outcomes[expected] += 1

    def _acknowledge(self, actor: Actor, shard: str) -> None:
        acks = self.acks[shard]
        if acks and acks[-1].epoch > actor.epoch:
            raise self._fail(f"epoch went backwards on {shard}: {acks[-1].epoch} -> {actor.epoch}")
        acks.append(Ack(actor.name, actor.epoch, dict(actor.view.get(shard, {}))))
        actor.base[shard] = len(acks) - 1
        actor.dirty.discard(shard)
        self.outcomes["ack"] += 1

    # -- checker -------------------------------------------------------------------------------

    def _check_stored(self) -> None:
        stored = self.target.stored(self.lease)
        for shard, acks in self.acks.items():
            if not acks:
                if shard in stored:
                    raise self._fail(f"{shard} exists but no write of it was acknowledged")
                continue
            if shard not in stored:
                raise self._fail(f"acknowledged shard {shard} is missing")
            latest, state = acks[-1], stored[shard]
            if (state.rows, state.epoch, state.writer) != (
                latest.rows,
                latest.epoch,
                latest.writer,
            ):
                raise self._fail(
                    f"{shard} holds epoch {state.epoch} by {state.writer!r} {state.rows}, but the "
                    f"latest acknowledged write is epoch {latest.epoch} by {latest.writer!r} "
                    f"{latest.rows}"
                )

    def _final_check(self) -> None:
        observer = Store.open(self.target.backend(self.lease), writer="observer", epoch=0)
        expected = _union({shard: acks[-1].rows for shard, acks in self.acks.items() if acks})
        if dict(observer.items()) != expected:
            raise self._fail("a fresh store does not read back the acknowledged writes")


def _shard_of(key: str) -> str:
    for shard in KEYS:
        if key.startswith(shard + "/"):
            return shard
    raise KeyError(key)


def _union(views: dict[str, dict[str, str]]) -> dict[str, str]:
    return {key: value for rows in views.values() for key, value in rows.items()}


def run_trials(target: KubeTarget, seeds: list[int], steps: int = 25) -> list[TrialResult]:
    """Run one trial per seed; a violation raises RaceViolation naming the seed and step."""
    results = []
    for seed in seeds:
        results.append(RaceTrial(target, seed, steps).run())
        target.close()
    return results
