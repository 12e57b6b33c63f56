"""Deposed-leader races (SPEC §7) with random interleavings from a fixed seed, and their checker.

Several store processes ("actors") share one namespace and Lease name. Leadership moves by
promotion: a new actor acquires the real Lease with its own elector (taking it over once expired
by the elector's clock) and opens the store with the epoch and Lease uid it got, then takes
ownership, while the deposed ones keep running on their stale view, as a paused ex-leader would
(their elector clocks are frozen: by their own clock they still lead). The Lease can also be
deleted and recreated (its transitions restart at 0, epochs below the stamps), after which the
next promoted actor must prove, by renewing, that it leads. Operations (set, delete, flush,
batch, reopen, promote, recreate the Lease, two flushes at once) are drawn from a seeded RNG.

The checker keeps an oracle: per shard, the ordered list of acknowledged writes. Because every
write is a compare-and-swap on the resourceVersion, the model predicts each outcome exactly:

- a write over an observed stamp the actor does not dominate (a newer epoch of its Lease object,
  or any stamp of another Lease object it has not proved itself newer than) -> EpochFencedError;
- a write from a view older than the latest acknowledged write -> ConflictError (lost update
  prevented); otherwise -> acknowledged, with the actor's rows and stamp;
- a create that meets a shard written meanwhile takes it over when the actor dominates it with
  a newer epoch (or, for another Lease object, when the actor holds the Lease and renews);
  otherwise it is fenced or a conflict;
- take-ownership by an actor that no longer holds the Lease, over stamps of another Lease
  object, fails its renewal and writes nothing.

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
from typing import Any

from rel_support import leaf_errors

from checkpoint_runtime.election.elector import LeaderElector, LeadershipLostError
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
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
    "recreate-lease": 4,
}
DEFERRED_OWNERSHIP = 0.35
"""Share of promotions whose take-ownership runs later, letting deposed writers in between."""
TIMINGS = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)
"""Elector clocks are driven by the trial, never by time passing."""


class RaceViolation(AssertionError):
    """The store did something the oracle of acknowledged writes forbids."""


@dataclass(frozen=True)
class Ack:
    """One acknowledged shard write."""

    writer: str
    epoch: int
    rows: dict[str, str]
    lease: str = ""

    @property
    def stamp(self) -> tuple[int, str, str]:
        return (self.epoch, self.writer, self.lease)


class FrozenClock:
    """An elector's monotonic clock that moves only when the trial moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Actor:
    """One store process and the model of what it holds."""

    name: str
    epoch: int
    store: Store
    elector: LeaderElector
    lease: str
    """The uid of the Lease object of the actor's term."""
    superseded: set[tuple[int, str, str]] = field(default_factory=set)
    """Stamps of other Lease objects the actor proved itself newer than (by renewing)."""
    view: dict[str, dict[str, str]] = field(default_factory=dict)
    base: dict[str, int] = field(default_factory=dict)
    """Per shard, the index of the acknowledged write this actor last observed (-1: none)."""
    dirty: set[str] = field(default_factory=set)
    pending_ownership: bool = False
    can_renew: bool = False
    """Its store was given the elector's renewal (by take_ownership), so a create that meets
    another Lease object's shard can prove its term and take the shard over."""

    @property
    def stamp(self) -> tuple[int, str, str]:
        return (self.epoch, self.name, self.lease)

    def dominates(self, ack: Ack) -> bool:
        other_lease = bool(self.lease and ack.lease and self.lease != ack.lease)
        return not other_lease and ack.epoch <= self.epoch

    def may_overwrite(self, ack: Ack) -> bool:
        return self.dominates(ack) or ack.stamp in self.superseded


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
        self.holder: Actor | None = None
        """The actor holding the Lease (the last promoted), None once the Lease is deleted."""
        self.promotions = 0
        self.lease_api = target.lease_client()
        self.outcomes: Counter[str] = Counter()
        self.step = 0

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> TrialResult:
        self._promote()
        for step in range(1, self.steps + 1):
            self.step = step
            operation = self.rng.choices(list(OPERATIONS), weights=list(OPERATIONS.values()))[0]
            method = {"take-ownership": "_take_ownership_later", "promote": "_promote"}.get(
                operation, "_" + operation.replace("-", "_")
            )
            getattr(self, method)()
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
        """The actor restarts from the API state and retakes ownership."""
        actor = self._actor()
        actor.store = self._open_store(actor.name, actor.epoch, actor.lease)
        actor.superseded = set()
        actor.can_renew = False
        self._observe_all(actor)
        actor.dirty = set()
        # Its elector still believes it leads (a deposed one by its frozen clock), so it takes
        # ownership as the runtime would: fenced, refused its renewal, or stale.
        self._take_ownership(actor)

    def _promote(self) -> None:
        self.promotions += 1
        name = f"leader-{self.promotions}"
        clock = FrozenClock()
        lock = KubernetesLeaseLock(self.lease_api, self.target.namespace, self.lease, name)
        elector = LeaderElector(lock, TIMINGS, clock=clock)
        if not elector.try_acquire_or_renew():  # held: wait out the lease by its clock
            clock.now += TIMINGS.lease_duration + 1
            if not elector.try_acquire_or_renew():
                raise self._fail(f"{name} could not take over the expired Lease")
        epoch = elector.epoch
        assert epoch is not None
        store = self._open_store(name, epoch, elector.lease_uid)
        actor = Actor(name, epoch, store, elector, elector.lease_uid)
        self._observe_all(actor)
        self.holder = actor
        self.actors.append(actor)
        if len(self.actors) > MAX_LIVE_ACTORS:
            self.actors.pop(0)
        if self.step > 0 and self.rng.random() < DEFERRED_OWNERSHIP:
            actor.pending_ownership = True  # opened, collectors not started yet
        else:
            self._take_ownership(actor)

    def _recreate_lease(self) -> None:
        """Delete the Lease (an operator's kubectl delete, a namespace restore) and promote:
        the next leader creates a new Lease object, its transitions starting at 0 again."""
        self.target.delete_lease(self.lease)
        self.holder = None
        self._promote()

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
        epochs = {actor.name: actor.epoch for actor in pair}
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
        for actor in pair:
            self._sync_epoch(actor)
        stored = self.target.stored(self.lease)
        for shard in sorted(set().union(*(actor.dirty for actor in pair))):
            candidates = [actor for actor in pair if shard in actor.dirty]
            if any(actor.base[shard] == -1 for actor in candidates):
                self._judge_creation_race(shard, candidates, failed, stored, epochs)
                continue
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
                    self._acknowledge(actor, shard, stored, epochs[actor.name])
                else:
                    expected = "fenced" if self._expect(actor, shard) == "fenced" else "conflict"
                    self._judge_failure(actor, shard, failed[actor.name][shard], expected)
            self.outcomes["concurrent-winner" if winners else "concurrent-no-winner"] += 1

    # -- model ---------------------------------------------------------------------------------

    def _open_store(self, name: str, epoch: int, lease: str) -> Store:
        return Store.open(
            self.target.backend(self.lease), writer=name, epoch=epoch, lease_uid=lease
        )

    def _observe_all(self, actor: Actor) -> None:
        """The actor just opened: it observed the latest acknowledged write of every shard."""
        for shard, acks in self.acks.items():
            actor.base[shard] = len(acks) - 1
            actor.view[shard] = dict(acks[-1].rows) if acks else {}
        if dict(actor.store.items()) != _union(actor.view):
            raise self._fail(f"{actor.name} opened rows that differ from the acknowledged writes")

    def _sync_epoch(self, actor: Actor) -> None:
        """A create that took over a shard of another Lease object may have raised the epoch."""
        raised = actor.store.stamp.epoch
        if raised < actor.epoch or (raised > actor.epoch and actor is not self.holder):
            raise self._fail(f"{actor.name}'s epoch moved from {actor.epoch} to {raised}")
        actor.epoch = raised

    def _take_ownership(self, actor: Actor) -> None:
        """Mirror Store.take_ownership: prove newer than other Lease objects' stamps (renew,
        raising the epoch), then restamp every shard it saw stored with another stamp."""
        self._check_dirty_sets([actor])
        actor.pending_ownership = False
        actor.can_renew = True
        observed = {
            shard: self.acks[shard][actor.base[shard]] for shard in KEYS if actor.base[shard] >= 0
        }
        unproven = {shard: ack for shard, ack in observed.items() if not actor.may_overwrite(ack)}
        fenced = sorted(shard for shard, ack in unproven.items() if ack.lease == actor.lease)
        if fenced:
            self._refused_ownership(actor, fenced, EpochFencedError)
            return
        if unproven:
            if actor is not self.holder:
                self._refused_ownership(actor, sorted(unproven), LeadershipLostError)
                return
            above = max(ack.epoch for ack in unproven.values())
            actor.epoch = max(actor.epoch, above + 1)
            actor.superseded |= {ack.stamp for ack in unproven.values()}
            self.outcomes["epoch-raised"] += 1
        for shard, ack in observed.items():
            if ack.stamp != actor.stamp:
                actor.dirty.add(shard)
        epoch_before = actor.epoch
        self._persist(
            actor,
            sorted(actor.dirty),
            lambda: actor.store.take_ownership(actor.elector.renew_above),
            check_dirty=False,
            epoch_before=epoch_before,
        )

    def _refused_ownership(
        self, actor: Actor, refused: list[str], error_type: type[Exception]
    ) -> None:
        """A store that saw a newer epoch of its own Lease object refuses take_ownership
        outright; one that cannot renew fails to prove itself newer than another Lease
        object's stamps. Either way it writes nothing.

        It may have marked other shards for restamping before it met the refused one; the
        model takes that dirty set from the store (nothing was written, _check_stored proves it).
        """
        try:
            actor.store.take_ownership(actor.elector.renew_above)
        except (EpochFencedError, LeadershipLostError) as error:
            if not isinstance(error, error_type):
                raise self._fail(
                    f"{actor.name}: expected {error_type.__name__}, got {error!r}"
                ) from error
            shard = getattr(error, "shard", None)
            if shard is not None and shard not in refused:
                raise self._fail(f"{actor.name}: fenced on {shard}, not {refused}") from error
            self.outcomes["fenced" if shard is not None else "renewal-refused"] += 1
            actor.dirty = set(actor.store.dirty_shards())
            self._sync_epoch(actor)
            return
        raise self._fail(f"{actor.name} took ownership over {refused} it may not overwrite")

    def _expect(self, actor: Actor, shard: str) -> str:
        acks = self.acks[shard]
        base = actor.base.get(shard, -1)
        if base < 0:
            return self._expect_create(actor, acks[-1]) if acks else "ack"
        if not actor.may_overwrite(acks[base]):
            return "fenced"
        return "ack" if base == len(acks) - 1 else "conflict"

    def _expect_create(self, actor: Actor, latest: Ack) -> str:
        """A create meeting `latest` (written since the actor opened): take over, or not."""
        if latest.stamp == actor.stamp or latest.stamp in actor.superseded:
            return "ack"
        if actor.dominates(latest):
            return "ack" if latest.epoch < actor.epoch else "conflict"
        if latest.lease and actor.lease and latest.lease != actor.lease:
            return "ack" if actor is self.holder and actor.can_renew else "fenced"
        return "fenced"

    def _judge_creation_race(
        self,
        shard: str,
        candidates: list[Actor],
        failed: dict[str, dict[str, BaseException]],
        stored: dict[str, Any],
        epochs: dict[str, int],
    ) -> None:
        """Two concurrent flushes where at least one creates the shard: the creator that
        comes second may take the shard over, so two winners are legitimate when the later one
        dominates the earlier; the stored shard must be a winner's, and every refusal a
        conflict. Winners that updated an observed version must have been eligible."""
        winners = [actor for actor in candidates if shard not in failed[actor.name]]
        for actor in candidates:
            if actor in winners:
                if actor.base[shard] >= 0 and self._expect(actor, shard) != "ack":
                    raise self._fail(f"{actor.name} overwrote {shard} from a stale view")
            elif not isinstance(failed[actor.name][shard], ConflictError):
                raise self._fail(f"{actor.name} on {shard}: {failed[actor.name][shard]!r}")
            else:
                self.outcomes["creation-race-refused"] += 1
        if not winners:
            return
        state = stored.get(shard)
        last = [actor for actor in winners if state is not None and state.writer == actor.name]
        if len(last) != 1:
            raise self._fail(f"{shard} is stored by {state and state.writer}, not a winner")
        for actor in [a for a in winners if a is not last[0]] + last:
            self._acknowledge(
                actor, shard, stored if actor is last[0] else None, epochs[actor.name]
            )
        if len(winners) == 2:
            self.outcomes["creation-taken-over"] += 1

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
        self,
        actor: Actor,
        attempted: list[str],
        call: Callable[[], None],
        check_dirty: bool = True,
        epoch_before: int | None = None,
    ) -> None:
        """Run one persisting call and judge every attempted shard against the oracle."""
        if check_dirty:
            self._check_dirty_sets([actor])
        expected = {shard: self._expect(actor, shard) for shard in attempted}
        before = actor.epoch if epoch_before is None else epoch_before
        try:
            call()
            errors: list[BaseException] = []
        except EpochFencedError as error:  # take_ownership refuses before writing anything
            errors = [error]
        except ExceptionGroup as group:
            errors = leaf_errors(group)
        self._sync_epoch(actor)
        if actor.epoch > before and epoch_before is None:
            self.outcomes["epoch-raised"] += 1
        failed = self._failed_shards(errors)
        stored = self.target.stored(self.lease)
        for shard in attempted:
            if shard in failed:
                self._judge_failure(actor, shard, failed[shard], expected[shard])
            elif expected[shard] != "ack":
                raise self._fail(
                    f"{actor.name} (epoch {actor.epoch}) was acknowledged on {shard}, "
                    f"expected {expected[shard]}: a stale or fenced write went through"
                )
            else:
                self._acknowledge(actor, shard, stored, before)
        if set(failed) - set(attempted):
            raise self._fail(f"errors for shards never attempted: {sorted(failed)}")

    def _judge_failure(self, actor: Actor, shard: str, error: BaseException, expected: str) -> None:
        if expected == "ack":
            raise self._fail(f"{actor.name} was refused on {shard} without cause: {error}")
        fenced = isinstance(error, EpochFencedError)
        if (expected == "fenced") != fenced:
            raise self._fail(f"{actor.name} on {shard}: expected {expected}, got {error!r}")
        self.outcomes[expected] += 1

    def _acknowledge(
        self, actor: Actor, shard: str, stored: dict[str, Any] | None, epoch_before: int
    ) -> None:
        """Record an acknowledged write. Its epoch is the actor's, or (when a take-over in the
        same persist raised the epoch meanwhile) the one it had before: read from the server.
        Without `stored` (a write already overwritten by a take-over) the epoch before."""
        epoch = actor.epoch if stored is not None else epoch_before
        if stored is not None and shard in stored:
            epoch = stored[shard].epoch
            if epoch not in (epoch_before, actor.epoch):
                raise self._fail(
                    f"{actor.name} wrote {shard} with epoch {epoch}, neither {epoch_before} "
                    f"nor {actor.epoch}"
                )
        acks = self.acks[shard]
        if acks and acks[-1].epoch > epoch:
            raise self._fail(f"epoch went backwards on {shard}: {acks[-1].epoch} -> {epoch}")
        if actor.base[shard] < 0 and acks:
            self.outcomes["created-over-older"] += 1
        acks.append(Ack(actor.name, epoch, dict(actor.view.get(shard, {})), actor.lease))
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
            if (state.rows, state.epoch, state.writer, state.lease) != (
                latest.rows,
                latest.epoch,
                latest.writer,
                latest.lease,
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
