"""Bucket handover races on the real API server: every schedule of the writers of one bucket's
shard, as the chart's ServiceAccount (shards) and admin (the Leases of fresh names).

The store's own Lease (`root`) records the number of buckets; a bucket's Lease (`bucket`) fences
its shard. The shard was committed by `w1`, the bucket's leader. Two scopes:

- `handover`: w1 hands the bucket over (a row set and not yet persisted; its handover flushes,
  then releases the bucket's Lease), while w2, a replica of the same layout, takes the bucket
  over: it acquires the bucket's Lease (released, or expired by its clock: w1 paused or
  partitioned away), opens the store, restamps the shard and persists. w1 may stop at any call
  (a crash: a partition that never heals, or a release write that fails at shutdown).
- `layout`: the operator records one bucket on the store's Lease (`op`), a one-bucket replica
  `w3` leads through the store's Lease (its elector acquires it only under that record) and
  takes the shard over (a proof: a guarded renewal of the store's Lease, which carries the
  layout), while `w1b`, a replica of the two-bucket layout that had passed its round's check
  of the record before the operator's step, reopens the bucket and takes the shard over with
  the bucket's proof (a guarded renewal of the bucket's Lease, then a read of the record).

Every API call of a writer waits at a gate (rel_chunk_races.Gate) and the explorer decides who
goes next. Checked after every call that writes: acknowledged rows are stored; and the writers
of the shard's successive commits never go back (once `b` committed after `a`, `a` never
commits again: no two writers both own the shard), nor does the layout of the commits (once the
one-bucket layout committed, the two-bucket layout never commits again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from rel_chunk_races import Crash, FrozenClock, Gate, GatedBackend, RaceViolation

from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import ANNOTATION_BUCKETS, ANNOTATION_WRITER
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock, LeaseRecord
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import CheckpointError
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.runtime.buckets import layout_proof
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support import exploration
from checkpoint_testenv.support.kubetarget import KubeTarget

SHARD = "tn/objectstore/feed"
KEY = f"{SHARD}/cursor"
TIMINGS = ElectionTimings(lease_duration=15, renew_deadline=10, retry_period=2)
BUCKETS = 2
LAYOUT = {"w1": BUCKETS, "w2": BUCKETS, "w1b": BUCKETS, "w3": 1}
"""The number of buckets each writer leads under."""


@dataclass
class Scope:
    name: str
    """`handover` or `layout` (the module doc)."""
    crashes: int = 1


@dataclass
class Outcome:
    schedule: list[str] = field(default_factory=list)
    path: list[tuple[int, int]] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    """The writer of each commit of the shard, in order."""
    acked: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    """Writers whose election refused them (the Lease held, or another layout recorded)."""


class Trial:
    """One schedule, driven by `choose(options) -> index`, on fresh Lease names."""

    def __init__(self, target: KubeTarget, scope: Scope, choose: Callable[[list[str]], int]):
        self.target = target
        self.scope = scope
        self.choose = choose
        self.root = target.fresh_lease("root")
        self.bucket = f"{self.root}-00-of-02"
        self.lease_api = target.lease_client()
        self.gate = Gate()
        self.backends: list[KubernetesBackend] = []
        self.outcome = Outcome()
        self.version: str | None = None
        self.layouts: list[int] = []

    # -- parts ---------------------------------------------------------------------------------

    def _backend(self, writer: str) -> GatedBackend:
        inner = KubernetesBackend(self.target.configuration, self.target.namespace, self.root)
        self.backends.append(inner)
        return GatedBackend(inner, self.gate, writer)

    def _lock(self, name: str, writer: str) -> KubernetesLeaseLock:
        return KubernetesLeaseLock(self.lease_api, self.target.namespace, name, writer)

    def _elector(self, writer: str, lease: str, layout: int | None = None) -> LeaderElector | None:
        """`writer`'s term on `lease`: acquired, or taken over once expired by its clock (its
        holder paused or partitioned away); None when the election refuses it."""
        clock = FrozenClock()
        elector = LeaderElector(self._lock(lease, writer), TIMINGS, clock=clock, layout=layout)
        if elector.try_acquire_or_renew():
            return elector
        clock.now += TIMINGS.lease_duration + 1
        elector.available()  # observed unchanged for a whole lease duration: expired
        return elector if elector.try_acquire_or_renew() else None

    def _open(self, backend: GatedBackend, elector: LeaderElector, writer: str) -> Store:
        term = elector.term()
        assert term is not None
        return Store.open(
            backend,  # type: ignore[arg-type]
            writer=writer,
            epoch=term.epoch,
            lease_uid=term.lease_uid,
            migrate=False,
            shards=[SHARD],
        )

    def _gated(self, writer: str, label: str, call: Callable[[], Any]) -> Callable[[], Any]:
        def gated() -> Any:
            self.gate.step(writer, label)
            return call()

        return gated

    def _recorded(self, writer: str) -> Callable[[], int]:
        def read() -> int:
            self.gate.step(writer, "read store Lease")
            record = self._lock(self.root, writer).get(10)
            return 1 if record is None else record.buckets

        return read

    # -- the writers ---------------------------------------------------------------------------

    def _setup(self) -> tuple[Store, LeaderElector, GatedBackend]:
        root = self._lock(self.root, "setup")
        root.create(LeaseRecord("", 1, None, None, 0, 0, BUCKETS), 10)
        elector = self._elector("w1", self.bucket)
        assert elector is not None
        backend = self._backend("w1")
        store = self._open(backend, elector, "w1")
        store.batch({KEY: "h0"})
        self._check("setup")
        return store, elector, backend

    def _writer(self, name: str, body: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                body()
            except Crash:
                self.outcome.crashed.add(name)
            except (CheckpointError, ExceptionGroup) as error:
                self.outcome.failed[name] = type(error).__name__
            finally:
                self.gate.finish(name)

        return threading.Thread(target=run, daemon=True)

    def _taker(self, name: str, lease: str, layout: int | None) -> Callable[[], None]:
        """A replica taking the shard over: elected on `lease`, opens, restamps, persists."""
        backend = self._backend(name)

        def body() -> None:
            self.gate.step(name, "acquire Lease")
            elector = self._elector(name, lease, layout)
            if elector is None:
                self.outcome.refused.add(name)
                return
            backend.gated = True
            store = self._open(backend, elector, name)
            if name == "w3":  # the one-bucket layout: the store's Lease carries the layout
                prove = self._gated(name, "renew Lease", lambda: None)
                renew = elector.renew_above

                def proof(epoch: int) -> int:
                    prove()
                    return renew(epoch)

            else:  # a bucket's proof: its Lease renewed, then the record read
                renew_bucket = elector.renew_above

                def renewed(epoch: int) -> int:
                    self.gate.step(name, "renew Lease")
                    return renew_bucket(epoch)

                elector.renew_above = renewed  # type: ignore[method-assign]
                proof = layout_proof(elector, BUCKETS, self._recorded(name), "bucket 0")
            store.take_ownership(proof)
            store.batch({KEY: name, f"{SHARD}/seen/{name}": "acked"})
            self.outcome.acked.append(f"{SHARD}/seen/{name}")

        return body

    def _handing_over(self, store: Store, elector: LeaderElector) -> Callable[[], None]:
        """w1's handover: its collectors stopped with a row not yet persisted; flush, release."""

        def body() -> None:
            store.flush()
            self.outcome.acked.append(f"{SHARD}/seen/w1-late")
            self.gate.step("w1", "release Lease")
            elector.release()

        return body

    def _operator(self) -> None:
        self.gate.step("op", "record 1 bucket")
        leases = client.CoordinationV1Api(self.lease_api)
        patch = {"metadata": {"annotations": {ANNOTATION_BUCKETS: "1"}}}
        leases.patch_namespaced_lease(self.root, self.target.namespace, patch)

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        try:
            self._run()
        finally:
            for backend in self.backends:
                backend.close()
        return self.outcome

    def _run(self) -> None:
        store, elector, backend = self._setup()
        threads: dict[str, threading.Thread] = {}
        if self.scope.name == "handover":
            store.set(KEY, "w1-late")
            store.set(f"{SHARD}/seen/w1-late", "acked")
            backend.gated = True
            threads["w1"] = self._writer("w1", self._handing_over(store, elector))
            threads["w2"] = self._writer("w2", self._taker("w2", self.bucket, None))
        else:
            threads["op"] = self._writer("op", self._operator)
            threads["w3"] = self._writer("w3", self._taker("w3", self.root, 1))
            threads["w1b"] = self._writer("w1b", self._taker("w1b", self.bucket, None))
        for thread in threads.values():
            thread.start()
        try:
            self._schedule(set(threads))
        except BaseException:
            while ready := self.gate.settle(set(threads)):
                for writer in ready:
                    self.gate.release(writer, "crash")
            raise
        finally:
            for thread in threads.values():
                thread.join(timeout=60)

    def _schedule(self, writers: set[str]) -> None:
        crashes = 0
        while ready := self.gate.settle(writers):
            options = [f"{w}: {label}" for w, label in sorted(ready.items())]
            if crashes < self.scope.crashes:
                options += [
                    f"{w}: crash before {label}" for w, label in sorted(ready.items()) if w != "op"
                ]
            index = self.choose(options)
            picked = options[index]
            self.outcome.schedule.append(picked)
            self.outcome.path.append((index, len(options)))
            writer, label = picked.split(": ", 1)
            crash = label.startswith("crash before ")
            crashes += crash
            self.gate.release(writer, "crash" if crash else "go")
            if not crash and label.startswith(("update ", "create ")):
                self._check(picked)

    # -- checks --------------------------------------------------------------------------------

    def _fail(self, message: str) -> RaceViolation:
        return RaceViolation(
            f"root {self.root}, scope {self.scope}, schedule {self.outcome.schedule}: {message}"
        )

    def _check(self, step: str) -> None:
        head = self.target.admin.read_namespaced_config_map(
            shard_name(self.root, SHARD), self.target.namespace
        )
        version = head.metadata.resource_version
        if version != self.version:  # a commit: who made it, under which layout
            self.version = version
            writer = head.metadata.annotations[ANNOTATION_WRITER]
            commits = self.outcome.commits
            if commits and writer != commits[-1] and writer in commits:
                raise self._fail(f"{writer} committed again after {commits}")
            self.outcome.commits.append(writer)
            self.layouts.append(LAYOUT[writer])
            if LAYOUT[writer] != 1 and 1 in self.layouts[:-1]:
                raise self._fail(f"the replaced layout committed: {self.outcome.commits}")
        rows = self.target.stored(self.root)[SHARD].rows
        lost = [row for row in self.outcome.acked if row not in rows]
        if lost:
            raise self._fail(f"after {step!r} acknowledged rows are lost: {lost}")


def _touches(writer: str, label: str) -> set[tuple[str, bool]]:
    """What one gated call reads or writes: (object, written)."""
    if label.startswith("crash before "):
        return {("crash budget", True)}
    if label == "record 1 bucket":
        return {("root", True)}
    if label == "read store Lease":
        return {("root", False)}
    if label in ("acquire Lease", "renew Lease", "release Lease"):
        return {("root" if writer == "w3" else "bucket", True)}
    return {("head", not label.startswith("read "))}


def independent(a: object, b: object) -> bool:
    """Steps of different writers that touch no common object, or only read it."""
    writer_a, label_a = str(a).split(": ", 1)
    writer_b, label_b = str(b).split(": ", 1)
    if writer_a == writer_b:
        return False
    return not any(
        name_a == name_b and (wrote_a or wrote_b)
        for name_a, wrote_a in _touches(writer_a, label_a)
        for name_b, wrote_b in _touches(writer_b, label_b)
    )


def explore(target: KubeTarget, scope: Scope, counts: dict[str, int]) -> Iterator[Outcome]:
    """Every schedule of `scope` up to the order of independent steps."""
    yield from exploration.explore_tree(
        lambda choose: Trial(target, scope, choose).run(),
        independent=independent,
        counts=counts,
        limit=2_000,
    )


def replay(target: KubeTarget, scope: Scope, choices: list[int]) -> Outcome:
    iterator = iter(choices)
    return Trial(target, scope, lambda options: next(iterator)).run()
