"""Chunked-shard races (SPEC §4a) on the real API server: two writers, every interleaving.

Scope: one shard whose base lives in chunk slots (the inline bound is patched to 0, so even a
few rows are chunked), a deposed leader W1 and the leader that replaces it, W2. W1 holds the
Lease and has just committed the head H0; it now persists a change of one row (a compaction:
every persist compacts here; with `prepared`, each writer's compaction writes a base prepared
before its persist, and its head carries a delta of the rows changed since). W2 acquires the
Lease (a real guarded Lease update), opens the store (reads H0) and persists its own change of
the same row. Optionally a slot that H0 does not name already holds content (a crash of an
earlier compaction left it).

Both writers run their real `Store.batch` in threads; every API call they make (head and slot
reads, creates, updates, the Lease renewal that re-proves leadership) first waits at a gate, and
the explorer decides who goes next, or crashes a writer there (it stops for good, leaving what it
wrote). `explore` enumerates every schedule depth-first (stateless model checking: each run
replays a prefix of choices from a fresh Lease name and shard), once per class of schedules that
differ only in the order of independent calls (sleep sets; `independent` says which calls
commute), or one part of them (`part`); `random_trials` draws schedules from a seed, in a larger
scope (two chunks, two persists per writer); `guard_schedules` are fixed schedules, one per rule
of store/chunked.py, that break the chunks when the rule's guard is missing.

Checked after every call that writes (the others leave the stored objects as they were), reading
as admin with the checker's own decoder:
- the head never names a chunk whose content differs from its manifest (readable at all times);
at the end:
- at most one writer's persist is acknowledged (both started from H0: a second would be a lost
  update), and an acknowledged row is what is stored;
- after any crash, a restarted leader opens the shard and persists a change (nothing is stuck).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from checkpoint_runtime.backends.base import ShardWrite, WriteResult
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import CheckpointError
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import chunked
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support import exploration
from checkpoint_testenv.support.kubetarget import KubeTarget

SHARD = "tn/objectstore/feed"
KEY = f"{SHARD}/seen/aWQx"
OTHER_KEYS = [f"{SHARD}/seen/aWQy", f"{SHARD}/seen/aWQz", f"{SHARD}/cursor"]
TIMINGS = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)


class RaceViolation(AssertionError):
    """The stored state broke an invariant of the chunked format."""


class Crash(BaseException):
    """The writer's process died at this step."""


class FrozenClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Gate:
    """Lets writer threads make one API call at a time, in the order the explorer chooses."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self.ready: dict[str, str] = {}
        self.done: set[str] = set()
        self._go: dict[str, str] = {}

    def step(self, writer: str, label: str) -> None:
        with self._cv:
            self.ready[writer] = label
            self._cv.notify_all()
            while writer not in self._go:
                self._cv.wait()
            command = self._go.pop(writer)
            del self.ready[writer]
        if command == "crash":
            raise Crash(label)

    def finish(self, writer: str) -> None:
        with self._cv:
            self.done.add(writer)
            self._cv.notify_all()

    def settle(self, writers: set[str]) -> dict[str, str]:
        """Wait until every writer waits at the gate or has finished; who waits, and where."""
        with self._cv:
            while not all(w in self.ready or w in self.done for w in writers):
                if not self._cv.wait(timeout=60):
                    raise RaceViolation(f"a writer hung: ready {self.ready}, done {self.done}")
            return dict(self.ready)

    def release(self, writer: str, command: str) -> None:
        """Let `writer` make its call (or crash there); return once it waits at its next call
        or has finished."""
        with self._cv:
            self._go[writer] = command
            self._cv.notify_all()
            while writer in self._go or not (writer in self.ready or writer in self.done):
                if not self._cv.wait(timeout=60):
                    raise RaceViolation(f"{writer} hung after {command}")


class GatedBackend:
    """A writer's backend: every API call waits at the gate first (when `gated`)."""

    def __init__(self, inner: KubernetesBackend, gate: Gate, writer: str) -> None:
        self.inner, self.gate, self.writer = inner, gate, writer
        self.lease_name = inner.lease_name
        self.gated = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _step(self, label: str) -> None:
        if self.gated:
            self.gate.step(self.writer, label)

    def read_shard(self, shard: str, deadline: Deadline) -> Any:
        self._step("read head")
        return self.inner.read_shard(shard, deadline)

    def read_slot(self, shard: str, slot: str, deadline: Deadline) -> Any:
        self._step(f"read {slot}")
        return self.inner.read_slot(shard, slot, deadline)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self._step(f"create {write.slot or 'head'}")
        return self.inner.create_shard(write, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self._step(f"update {write.slot or 'head'}")
        return self.inner.update_shard(write, version, deadline)


@dataclass
class Scope:
    leftover: bool = False
    """A slot H0 does not name holds content (an earlier compaction crashed after writing it)."""
    persists: int = 1
    """Persists per writer."""
    max_chunks: int = 1
    crashes: int = 1
    """Crashes allowed per schedule."""
    prepared: bool = False
    """Each writer persists through a base prepared before its persist (Store.
    prepare_compactions, which makes no API call): its compaction's head carries a delta of
    the rows changed since the base's snapshot."""


@dataclass
class Outcome:
    schedule: list[str] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    """The unique row of every acknowledged persist (each persist adds one)."""
    failed: dict[str, str] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)
    stored: dict[str, str] = field(default_factory=dict)
    path: list[tuple[int, int]] = field(default_factory=list)
    """Every choice made, with the number of options it was made among (replays the schedule)."""


class Trial:
    """One schedule, driven by `choose(options) -> index`, on a fresh Lease name."""

    def __init__(
        self, target: KubeTarget, scope: Scope, choose: Callable[[list[str]], int]
    ) -> None:
        self.target = target
        self.scope = scope
        self.choose = choose
        self.lease = target.fresh_lease("chunk")
        self.lease_api = target.lease_client()
        self.gate = Gate()
        self.backends: list[KubernetesBackend] = []
        self.outcome = Outcome()

    def _backend(self, writer: str) -> GatedBackend:
        inner = KubernetesBackend(self.target.configuration, self.target.namespace, self.lease)
        self.backends.append(inner)
        return GatedBackend(inner, self.gate, writer)

    def _elector(self, name: str) -> tuple[LeaderElector, FrozenClock]:
        clock = FrozenClock()
        lock = KubernetesLeaseLock(self.lease_api, self.target.namespace, self.lease, name)
        elector = LeaderElector(lock, TIMINGS, clock=clock)
        if not elector.try_acquire_or_renew():
            clock.now += TIMINGS.lease_duration + 1
            if not elector.try_acquire_or_renew():
                raise RaceViolation(f"{name} could not take over the expired Lease")
        return elector, clock

    def _store(self, backend: GatedBackend, elector: LeaderElector, name: str) -> Store:
        store = Store.open(
            backend,  # type: ignore[arg-type]
            writer=name,
            epoch=elector.epoch or 0,
            lease_uid=elector.lease_uid,
            compaction_ratio=0,
            max_chunks=self.scope.max_chunks,
        )
        renew = elector.renew_above

        def gated_renew(epoch: int) -> int:
            if backend.gated:
                self.gate.step(name, "renew Lease")
            return renew(epoch)

        store.fence.renew_above = gated_renew
        return store

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        try:
            self._run()
        finally:
            for backend in self.backends:
                backend.close()
        return self.outcome

    def _setup(self) -> tuple[Store, GatedBackend]:
        elector, _ = self._elector("w1")
        backend = self._backend("w1")
        store = self._store(backend, elector, "w1")
        store.batch({KEY: "h0", **dict.fromkeys(OTHER_KEYS, "h0")})
        if self.scope.leftover:
            manifest = store.shard_states()[SHARD].layout
            assert manifest is not None
            for index in range(manifest.manifest.partitions):
                slot = manifest.manifest.inactive_slot(index)
                chunk = codec_v3.encode_chunk(SHARD, {KEY: "left over"}, index, 1)
                write = chunked.slot_write(SHARD, slot, chunk, "left-over")
                backend.inner.create_shard(write, Deadline(30))
        self._check("setup")
        return store, backend

    def _prepare(self, store: Store, value: str) -> None:
        """With `prepared`: a row changed in memory, then the base of that state prepared (the
        persist that follows writes it, with the rest of its changes as the head's delta)."""
        if self.scope.prepared:
            store.set(f"{SHARD}/seen/{value}-early", "in the prepared base")
            if store.prepare_compactions([SHARD]) != 1:
                raise RaceViolation("no base was prepared")

    def _run(self) -> None:
        w1, w1_backend = self._setup()
        w1_backend.gated = True
        w2_backend = self._backend("w2")
        holder: dict[str, Store] = {}

        def writer_one() -> None:
            try:
                for n in range(self.scope.persists):
                    value = f"w1-{n}"
                    self._prepare(w1, value)
                    w1.batch({KEY: value, f"{SHARD}/seen/{value}": "acked"})
                    self.outcome.acked.append(f"{SHARD}/seen/{value}")
            except Crash:
                self.outcome.crashed.add("w1")
            except (CheckpointError, ExceptionGroup) as error:
                self.outcome.failed["w1"] = type(error).__name__
            finally:
                self.gate.finish("w1")

        def writer_two() -> None:
            try:
                self.gate.step("w2", "acquire Lease + open")
                elector, _ = self._elector("w2")
                store = holder["w2"] = self._store(w2_backend, elector, "w2")
                w2_backend.gated = True
                for n in range(self.scope.persists):
                    value = f"w2-{n}"
                    self._prepare(store, value)
                    store.batch({KEY: value, f"{SHARD}/seen/{value}": "acked"})
                    self.outcome.acked.append(f"{SHARD}/seen/{value}")
            except Crash:
                self.outcome.crashed.add("w2")
            except (CheckpointError, ExceptionGroup) as error:
                self.outcome.failed["w2"] = type(error).__name__
            finally:
                self.gate.finish("w2")

        threads = [
            threading.Thread(target=writer_one, daemon=True),
            threading.Thread(target=writer_two, daemon=True),
        ]
        for thread in threads:
            thread.start()
        writers = {"w1", "w2"}
        try:
            self._schedule(writers)
        except BaseException:  # a violation, or the explorer's Pruned: end the writers too
            self._stop(writers, threads)
            raise
        for thread in threads:
            thread.join()
        self._final()

    def _schedule(self, writers: set[str]) -> None:
        """Let the writers make their calls in the order `choose` picks, checking the stored
        state after every call that changes it, until both have finished."""
        crashes = 0
        while ready := self.gate.settle(writers):
            options = [f"{w}: {label}" for w, label in sorted(ready.items())]
            if crashes < self.scope.crashes:
                options += [f"{w}: crash before {label}" for w, label in sorted(ready.items())]
            index = self.choose(options)  # exploration.Pruned: an equivalent run is made elsewhere
            picked = options[index]
            self.outcome.schedule.append(picked)
            self.outcome.path.append((index, len(options)))
            writer = picked.split(":")[0]
            crash = " crash before " in picked
            crashes += crash
            self.gate.release(writer, "crash" if crash else "go")
            if not crash and is_write(picked.split(": ", 1)[1]):
                self._check(picked)  # reads, renewals and crashes leave the objects as they were

    def _stop(self, writers: set[str], threads: list[threading.Thread]) -> None:
        """End the run here: every writer still waiting stops (as a crash would)."""
        while ready := self.gate.settle(writers):
            for writer in ready:
                self.gate.release(writer, "crash")
        for thread in threads:
            thread.join(timeout=60)

    # -- checks --------------------------------------------------------------------------------

    def _fail(self, message: str) -> RaceViolation:
        return RaceViolation(
            f"lease {self.lease}, scope {self.scope}, schedule {self.outcome.schedule}: {message}"
        )

    def _stored(self) -> dict[str, str] | None:
        stored = self.target.stored(self.lease)
        return None if SHARD not in stored else stored[SHARD].rows

    def _check(self, step: str) -> None:
        try:
            rows = self._stored()
        except CheckpointError as error:
            raise self._fail(f"after {step!r} the stored shard is unreadable: {error}") from error
        if rows is None:
            raise self._fail(f"after {step!r} the shard is gone")
        self.outcome.stored = rows
        lost = [row for row in self.outcome.acked if row not in rows]
        if lost:
            raise self._fail(f"after {step!r} acknowledged rows are lost: {lost}")

    def _final(self) -> None:
        # The stored state is the one the last check read: only creates and updates change it,
        # and each was checked (so was the setup). Acknowledged rows were checked after the
        # write that acknowledged them.
        stored = self.outcome.stored
        # Recovery: a restarted leader opens the shard and writes (nothing stuck, all readable).
        elector, _ = self._elector("w3")
        backend = self._backend("w3")
        store = self._store(backend, elector, "w3")
        if dict(store.items(SHARD + "/")) != stored:
            raise self._fail("a restarted leader read something else than the stored head")
        store.take_ownership(store.fence.renew_above)
        store.batch({KEY: "recovered"})
        self._check("recovery")
        if self.outcome.stored.get(KEY) != "recovered":
            raise self._fail(f"recovery did not persist: {self.outcome.stored}")


def _touches(label: str) -> set[tuple[str, bool]]:
    """What one gated call reads or writes: (object, written). `*` is every shard object."""
    if label.startswith("crash before "):
        return {("crash budget", True)}  # changes nothing stored; crashes share the budget
    if label == "acquire Lease + open":
        return {("Lease", True), ("*", False)}  # the Lease taken, every shard object listed
    if label == "renew Lease":
        return {("Lease", True)}
    verb, name = label.split(" ", 1)  # read / create / update, of `head` or a slot
    return {(name, verb != "read")}


def independent(a: object, b: object) -> bool:
    """Two options of the explorer commute: steps of different writers that touch no common
    object, or only read it (the Lease and the crash budget are objects too; `*` is every
    shard object). Each gated call is one API call on one object (the Lease renewal is a read
    and an update of the Lease), so the order of independent ones changes nothing any writer
    sees: resourceVersions are compared for equality only."""
    writer_a, label_a = str(a).split(": ", 1)
    writer_b, label_b = str(b).split(": ", 1)
    if writer_a == writer_b:
        return False
    for name_a, wrote_a in _touches(label_a):
        for name_b, wrote_b in _touches(label_b):
            shards = {name_a, name_b} - {"Lease", "crash budget"}
            same = name_a == name_b or ("*" in shards and len(shards) == 2)
            if same and (wrote_a or wrote_b):
                return False
    return True


def is_write(label: str) -> bool:
    """A call that changes a stored object (a create or an update of the head or a slot)."""
    return label.startswith(("create ", "update "))


def is_slot_read(label: str) -> bool:
    return label.startswith("read ") and label != "read head"


def is_slot_write(label: str) -> bool:
    return is_write(label) and not label.endswith(" head")


SPLIT_DEPTH = 5
"""`explore` splits a scope into the subtrees below its first SPLIT_DEPTH choices..."""
PARTS = 4
"""...and the sample depth runs one part of PARTS (every part of both scopes runs 20 to 60
schedules whole, at a third to a half of the scope's cost: measured on the full trees)."""


def explore(
    target: KubeTarget,
    scope: Scope,
    limit: int = 100_000,
    part: tuple[int, int] | None = None,
    split_depth: int = SPLIT_DEPTH,
    counts: dict[str, int] | None = None,
) -> Iterator[Outcome]:
    """Every schedule of `scope` up to the order of independent steps, depth first (each a
    fresh run replaying a prefix), or with `part` one part of them (exploration.explore_tree:
    sleep sets, and parts that together make every class of schedules)."""
    try:
        yield from exploration.explore_tree(
            lambda choose: Trial(target, scope, choose).run(),
            part,
            split_depth,
            limit,
            independent=independent,
            counts=counts,
        )
    except exploration.TreeTooLarge as error:
        raise RaceViolation(f"{scope}: {error}") from error


def replay(target: KubeTarget, scope: Scope, choices: list[int]) -> Outcome:
    """One schedule again, from the choices an Outcome's `path` (or a RaceViolation) names."""
    iterator = iter(choices)
    return Trial(target, scope, lambda options: next(iterator)).run()


@dataclass
class Phase:
    """One writer runs, call after call, until `until(label, released)` holds for the call it
    waits at (`released`: the labels of its calls let through so far), which it does not make
    yet; None: until it has finished."""

    writer: str
    until: Callable[[str, list[str]], bool] | None = None


class Phased:
    """A chooser that runs `phases` one after the other (no crashes): a fixed schedule,
    written as what each writer does rather than as a list of calls."""

    def __init__(self, *phases: Phase) -> None:
        self.phases = list(phases)
        self.current = 0
        self.released: dict[str, list[str]] = {"w1": [], "w2": []}
        self.reached: list[bool] = [False] * len(self.phases)

    def __call__(self, options: list[str]) -> int:
        while self.current < len(self.phases):
            phase = self.phases[self.current]
            prefix = f"{phase.writer}: "
            waiting = [o for o in options if o.startswith(prefix) and " crash before " not in o]
            label = waiting[0].removeprefix(prefix) if waiting else None
            if label is None or (phase.until and phase.until(label, self.released[phase.writer])):
                self.reached[self.current] = (label is None) == (phase.until is None)
                self.current += 1
                continue
            self.released[phase.writer].append(label)
            return options.index(prefix + label)
        raise RaceViolation(f"every phase has run and writers still wait: {options}")

    @property
    def followed(self) -> bool:
        """Every phase with a stop ended there, not with its writer finished (the schedule was
        the intended one)."""
        return all(self.reached[i] for i, phase in enumerate(self.phases) if phase.until)


def guard_schedules() -> dict[str, Callable[[], Phased]]:
    """The schedules that break a rule of chunked.py when its guard is missing, run at every
    depth (the sample may not include them): name -> a fresh chooser.

    In each the deposed leader w1 is stopped inside its compaction (a slot left by a crash
    makes its create conflict: it reads, re-proves, writes), its successor w2 persists, then
    w1 goes on. The store must refuse w1 and keep w2's persist."""

    def committing(writer: str) -> Phase:
        """`writer` until it waits at its head commit, a slot written."""
        return Phase(writer, lambda label, done: label == "update head" and any(
            is_slot_write(d) for d in done))  # fmt: skip

    return {
        # Rule 2: the slot is read BEFORE the leadership re-proof and written after it. w1
        # waits at its slot read while w2 writes that slot and commits a head naming it: w1
        # then reads w2's version, and only the re-proof after that read stops it (proven
        # before the read, or not at all, w1 overwrites the chunk w2's head names).
        "slot read, then re-proof": lambda: Phased(
            Phase("w1", lambda label, done: is_slot_read(label)), Phase("w2"), Phase("w1")
        ),
        # Rule 2: the write after the re-proof is guarded by the version read. w1 waits at its
        # slot write, proven; w2 rewrites the slot: w1's guarded update must conflict.
        "re-proof, then a guarded write": lambda: Phased(
            Phase(
                "w1",
                lambda label, done: is_slot_write(label) and any(is_slot_read(d) for d in done),
            ),
            Phase("w2"),
            Phase("w1"),
        ),
        # Rule 3: the head is claimed (restamped) before any slot is written. w1 waits at its
        # head commit, its slot written; w2 writes the slot and waits at its own commit: w1's
        # commit must fail, or its head would name w2's chunk under w1's digest.
        "head claimed before the slots": lambda: Phased(
            committing("w1"), committing("w2"), Phase("w1"), Phase("w2")
        ),
    }


CRASH_CHANCE = 0.04
"""Per step, the chance that a random schedule crashes the writer instead (most run to the end)."""


def random_trials(target: KubeTarget, scope: Scope, seed: int, count: int) -> Iterator[Outcome]:
    """`count` schedules drawn from `seed`: a random writer steps, or (rarely) crashes."""
    rng = random.Random(seed)

    def choose(options: list[str]) -> int:
        crashes = [i for i, option in enumerate(options) if " crash before " in option]
        steps = [i for i in range(len(options)) if i not in crashes]
        if crashes and rng.random() < CRASH_CHANCE:
            return rng.choice(crashes)
        return rng.choice(steps)

    for _ in range(count):
        yield Trial(target, scope, choose).run()
