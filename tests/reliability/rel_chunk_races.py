"""Chunked-shard races (SPEC §4a) on the real API server: two writers, every interleaving.

Scope: one shard whose base lives in chunk slots (the inline bound is patched to 0, so even a
few rows are chunked), a deposed leader W1 and the leader that replaces it, W2. W1 holds the
Lease and has just committed the head H0; it now persists a change of one row (a compaction:
every persist compacts here). W2 acquires the Lease (a real guarded Lease update), opens the
store (reads H0) and persists its own change of the same row. Optionally a slot that H0 does not
name already holds content (a crash of an earlier compaction left it).

Both writers run their real `Store.batch` in threads; every API call they make (head and slot
reads, creates, updates, the Lease renewal that re-proves leadership) first waits at a gate, and
the explorer decides who goes next, or crashes a writer there (it stops for good, leaving what it
wrote). `explore` enumerates every schedule depth-first (stateless model checking: each run
replays a prefix of choices from a fresh Lease name and shard); `random_trials` draws schedules
from a seed, in a larger scope (two chunks, two persists per writer).

Checked after every step, reading as admin with the checker's own decoder:
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


@dataclass
class Outcome:
    schedule: list[str] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    """The unique row of every acknowledged persist (each persist adds one)."""
    failed: dict[str, str] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)
    stored: dict[str, str] = field(default_factory=dict)


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

    def _run(self) -> None:
        w1, w1_backend = self._setup()
        w1_backend.gated = True
        w2_backend = self._backend("w2")
        holder: dict[str, Store] = {}

        def writer_one() -> None:
            try:
                for n in range(self.scope.persists):
                    value = f"w1-{n}"
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
                    store.batch({KEY: value, f"{SHARD}/seen/{value}": "acked"})
                    self.outcome.acked.append(f"{SHARD}/seen/{value}")
            except Crash:
                self.outcome.crashed.add("w2")
            except (CheckpointError, ExceptionGroup) as error:
                self.outcome.failed["w2"] = type(error).__name__
            finally:
                self.gate.finish("w2")

        threads = [threading.Thread(target=writer_one), threading.Thread(target=writer_two)]
        for thread in threads:
            thread.start()
        crashes = 0
        writers = {"w1", "w2"}
        while True:
            ready = self.gate.settle(writers)
            if not ready:
                break
            options = [f"{w}: {label}" for w, label in sorted(ready.items())]
            if crashes < self.scope.crashes:
                options += [f"{w}: crash before {label}" for w, label in sorted(ready.items())]
            picked = options[self.choose(options)]
            self.outcome.schedule.append(picked)
            writer = picked.split(":")[0]
            crash = " crash before " in picked
            crashes += crash
            self.gate.release(writer, "crash" if crash else "go")
            self._check(picked)
        for thread in threads:
            thread.join()
        self._final()

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
        self._check("the end")
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


def explore(target: KubeTarget, scope: Scope, limit: int = 100_000) -> Iterator[Outcome]:
    """Every schedule of `scope`, depth first (each a fresh run replaying a prefix)."""
    stack: list[tuple[int, int]] = []  # (choice, options) along the current path
    runs = 0
    while True:
        path = [choice for choice, _ in stack]
        taken: list[tuple[int, int]] = []

        def choose(
            options: list[str], path: list[int] = path, taken: list[tuple[int, int]] = taken
        ) -> int:
            depth = len(taken)
            choice = path[depth] if depth < len(path) else 0
            taken.append((choice, len(options)))
            return choice

        yield Trial(target, scope, choose).run()
        runs += 1
        if runs >= limit:
            raise RaceViolation(f"more than {limit} schedules: the scope is not small")
        stack = taken
        while stack and stack[-1][0] + 1 >= stack[-1][1]:
            stack.pop()
        if not stack:
            return
        choice, options = stack.pop()
        stack.append((choice + 1, options))


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
