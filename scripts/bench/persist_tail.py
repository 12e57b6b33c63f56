"""The persist tail: new bases prepared between persists against new bases encoded by the
persist that writes them, interleaved in one process on the real API server.

Two stores of this tree run side by side, each with its raw-PUT baseline (the very blobs it
sent, as bench.scale measures them): one calls Store.prepare_compactions between persists, as
the runtime's debounce loop does while nothing is due (untimed in the persists, timed on its
own); the other never does, so every new base is encoded by the persist that writes it, as
before bases were prepared. Every iteration runs the four steps (each store's flush, each
raw PUT) in rotating order.

1. One 5,000-row shard, 1 or 100 changed rows a persist: p50 and p90 against the raw PUT.
2. A saturated round: 50 such shards per store, 100 rows changed in each, one flush, against
   the same blobs as raw PUTs from the store's pool size of threads.

    PYTHONPATH=scripts .venv/bin/python -m bench.persist_tail [--quick] [--write-doc]
"""

from __future__ import annotations

import cProfile
import gc
import io
import itertools
import os
import pstats
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bench.report import Report, Table, emit, parser, write_section
from bench.scale import (
    FEED,
    HUNDRED_ROWS_TARGET,
    ROUND_TARGET_RATIO,
    RawPuts,
    _base_of,
    _change,
    _store,
)
from checkpoint_runtime.backends.base import ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.constants import PERSIST_CONCURRENCY
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane
from checkpoint_testenv.support.timing import percentile, rotated, timed_ms

ARMS = (("prepared between persists", True), ("encoded by the persist", False))


@dataclass
class Arm:
    """One store's samples: its persists (or rounds) and the raw PUTs of its blobs."""

    bases: str
    shape: str
    changed: int
    store: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    new_bases: int = 0
    prepared: int = 0
    prepare: list[float] = field(default_factory=list)
    """Seconds (ms for single persists) of Store.prepare_compactions between persists."""

    def ratio(self, fraction: float) -> float:
        return percentile(self.store, fraction) / percentile(self.raw, fraction)


def _progress(message: str) -> None:
    print(f"persist-tail: {message}", file=sys.stderr, flush=True)


def measure_persists(
    plane: ControlPlane, shape: str, changed: int, iterations: int, seen_rows: int
) -> list[Arm]:
    arms, steps = [], []
    for bases, prepare in ARMS:
        store, recorder = _store(plane, plane.create_namespace("bench-tail"))
        rows = FeedWorkload(FEED, seen_rows, shape).rows
        store.batch(rows)
        raw = RawPuts(plane, store.backend.namespace)  # type: ignore[attr-defined]
        raw.create("raw", recorder.last[FEED])
        arm = Arm(bases, shape, changed)
        arms.append((arm, store, recorder, raw, prepare, [k for k in rows if "/seen/" in k]))
        steps += [
            (arm.store, store.flush),
            (arm.raw, lambda raw=raw, recorder=recorder: raw.put("raw", recorder.last[FEED])),
        ]
    base = {id(arm): _base_of(recorder.last[FEED].blob) for arm, _, recorder, *_ in arms}
    for iteration in range(iterations):
        for _, store, _, _, _, seen in arms:
            _change(store, FEED, seen, changed, iteration)
        gc.collect()
        for samples, call in rotated(steps, iteration):
            samples.append(timed_ms(call))
        for arm, store, recorder, _, prepare, _ in arms:
            now = _base_of(recorder.last[FEED].blob)
            arm.new_bases += now != base[id(arm)]
            base[id(arm)] = now
            if prepare:
                began = time.perf_counter()
                arm.prepared += store.prepare_compactions()
                arm.prepare.append((time.perf_counter() - began) * 1000)
    for _, store, _, raw, _, _ in arms:
        raw.close()
        store.backend.close()  # type: ignore[attr-defined]
    return [arm for arm, *_ in arms]


def measure_rounds(
    plane: ControlPlane, shape: str, shards: int, changed: int, rounds: int, seen_rows: int
) -> list[Arm]:
    feeds = [f"tailnet-1/objectstore/feed-{index}" for index in range(shards)]
    arms, steps = [], []
    for bases, prepare in ARMS:
        store, recorder = _store(plane, plane.create_namespace("bench-tail-round"))
        seen: dict[str, list[str]] = {}
        for index, feed in enumerate(feeds):
            rows = FeedWorkload(feed, seen_rows, shape, seed=index).rows
            seen[feed] = [key for key in rows if "/seen/" in key]
            store.batch(rows)
        raw = RawPuts(plane, store.backend.namespace)  # type: ignore[attr-defined]
        for index, feed in enumerate(feeds):
            raw.create(f"raw-{index}", recorder.last[feed])

        def raw_round(raw: RawPuts = raw, recorder: object = recorder) -> None:
            last = recorder.last  # type: ignore[attr-defined]
            with ThreadPoolExecutor(PERSIST_CONCURRENCY) as pool:
                futures = [
                    pool.submit(raw.put, f"raw-{index}", last[feed])
                    for index, feed in enumerate(feeds)
                ]
                for future in futures:
                    future.result()

        arm = Arm(bases, shape, changed)
        arms.append((arm, store, raw, prepare, seen))
        steps += [(arm.store, store.flush), (arm.raw, raw_round)]
        _progress(f"{bases}: {shards} shards of {seen_rows} rows written ({shape})")
    for number in range(rounds):
        for _, store, _, _, seen in arms:
            for feed in feeds:
                _change(store, feed, seen[feed], changed, number)
        gc.collect()
        for samples, call in rotated(steps, number):
            samples.append(timed_ms(call) / 1000)
        for arm, store, _, prepare, _ in arms:
            if prepare:
                began = time.perf_counter()
                arm.prepared += store.prepare_compactions()
                arm.prepare.append(time.perf_counter() - began)
    for _, store, raw, _, _ in arms:
        raw.close()
        store.backend.close()  # type: ignore[attr-defined]
    return [arm for arm, *_ in arms]


class NullBackend:
    """A backend that stores nothing and answers at once: a store's own CPU, without I/O."""

    lease_name = "bench"

    def __init__(self) -> None:
        self.versions = itertools.count(1)

    def describe(self) -> str:
        return "nothing (a benchmark's null backend)"

    def close(self) -> None:
        pass

    def list_shards(self, deadline: Deadline) -> list[StoredShard]:
        return []

    def list_slots(self, deadline: Deadline) -> list[StoredShard]:
        return []

    def read_shard(self, shard: str, deadline: Deadline) -> StoredShard | None:
        return None

    def read_slot(self, shard: str, slot: str, deadline: Deadline) -> StoredShard | None:
        return None

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        return WriteResult(str(next(self.versions)))

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        return WriteResult(str(next(self.versions)))


@dataclass
class Profiled:
    shape: str
    persists: int
    seconds: float
    stats: pstats.Stats


def profile_round(shape: str, shards: int, rounds: int, seen_rows: int) -> Profiled:
    """The store's side of saturated rounds, on a backend that does nothing: every dirty
    shard persisted in this thread under cProfile (bases prepared between rounds)."""
    store = Store(NullBackend(), writer="bench", epoch=1)  # type: ignore[arg-type]
    feeds = [f"tailnet-1/objectstore/feed-{index}" for index in range(shards)]
    seen = {}
    for index, feed in enumerate(feeds):
        rows = FeedWorkload(feed, seen_rows, shape, seed=index).rows
        seen[feed] = [key for key in rows if "/seen/" in key]
        store.batch(rows)
    profile = cProfile.Profile()
    seconds, persists = 0.0, 0
    for number in range(rounds):
        for feed in feeds:
            _change(store, feed, seen[feed], 100, number)
        began = time.process_time()
        profile.enable()
        for feed in feeds:
            store._persist_locked(feed, store.new_deadline())
        profile.disable()
        seconds += time.process_time() - began
        persists += len(feeds)
        store.prepare_compactions()
    return Profiled(shape, persists, seconds, pstats.Stats(profile, stream=io.StringIO()))


def profile_table(found: list[Profiled], top: int = 10) -> Table:
    rows = []
    for item in found:
        total = item.stats.total_tt  # type: ignore[attr-defined]
        entries = sorted(
            item.stats.stats.items(),  # type: ignore[attr-defined]
            key=lambda entry: entry[1][2],
            reverse=True,
        )[:top]
        for (path, line, function), (_, calls, own, _, _) in entries:
            where = path.split("/site-packages/")[-1].split("/src/")[-1]
            where = where.split("/lib/python3.11/")[-1]
            rows.append(
                [
                    item.shape,
                    f"{item.seconds / item.persists * 1000:.2f}",
                    f"{function} ({where}:{line})",
                    f"{calls:,}",
                    f"{own / item.persists * 1000:.3f}",
                    f"{own / total:.1%}",
                ]
            )
    return Table(
        "Where a saturated round's store time goes: CPU per persist, by function (cProfile, "
        "no I/O)",
        ["workload", "CPU ms / persist", "function", "calls", "own ms / persist", "share"],
        rows,
        [
            "The store's side of the saturated rounds above without the API server: a "
            "backend that answers at once, every dirty shard persisted in one thread under "
            "cProfile, bases prepared between rounds (untimed). CPU ms / persist = process "
            "time over the persists (the profiler's own overhead included); the rest of a "
            "round is the PUTs, which the raw side pays too.",
        ],
    )


@dataclass
class Measured:
    persists: list[Arm]
    rounds: list[Arm]
    seen_rows: int
    iterations: int
    shards: int
    profiles: list[Profiled] = field(default_factory=list)


def measure(plane: ControlPlane, quick: bool) -> Measured:
    iterations, seen_rows, shards, rounds = (6, 500, 4, 2) if quick else (120, 5000, 50, 10)
    shapes = ("uuid",) if quick else ("uuid", "old-design")
    persists: list[Arm] = []
    for shape in shapes:
        for changed in (1, 100):
            _progress(f"persist after {changed} changed row(s), {shape}")
            persists += measure_persists(plane, shape, changed, iterations, seen_rows)
    round_arms: list[Arm] = []
    for shape in shapes:
        _progress(f"saturated round, {shards} shards, {shape}")
        round_arms += measure_rounds(plane, shape, shards, 100, rounds, seen_rows)
    _progress("the store's CPU in saturated rounds, profiled")
    profiles = [profile_round(shape, shards, rounds, seen_rows) for shape in shapes]
    return Measured(persists, round_arms, seen_rows, iterations, shards, profiles)


def _p(samples: list[float], fraction: float, digits: int) -> str:
    return f"{percentile(samples, fraction):.{digits}f}"


def _prepare(arm: Arm, digits: int) -> str:
    if not arm.prepare:
        return "-"
    return f"{_p(arm.prepare, 0.5, digits)} / {max(arm.prepare):.{digits}f}"


def persist_table(found: Measured) -> Table:
    target50, target90 = HUNDRED_ROWS_TARGET
    return Table.of(
        f"Persist of one {found.seen_rows:,}-row shard after N changed rows: new bases prepared "
        "between persists vs encoded by the persist, interleaved (ms)",
        [
            ("workload", lambda arm: arm.shape),
            ("rows changed", lambda arm: str(arm.changed)),
            ("new bases", lambda arm: arm.bases),
            ("samples", lambda arm: str(len(arm.store))),
            ("new bases written", lambda arm: str(arm.new_bases)),
            ("prepared", lambda arm: str(arm.prepared) if arm.prepare else "-"),
            ("prepare ms p50 / max", lambda arm: _prepare(arm, 1)),
            ("store p50", lambda arm: _p(arm.store, 0.5, 1)),
            ("store p90", lambda arm: _p(arm.store, 0.9, 1)),
            ("raw PUT p50", lambda arm: _p(arm.raw, 0.5, 1)),
            ("raw PUT p90", lambda arm: _p(arm.raw, 0.9, 1)),
            ("store / raw p50", lambda arm: f"{arm.ratio(0.5):.2f}x"),
            ("store / raw p90", lambda arm: f"{arm.ratio(0.9):.2f}x"),
        ],
        found.persists,
        [
            "store = Store.flush() after N seen rows got new values; raw PUT = the very blob "
            "and annotations that store sent, with a write id of its own, into an object of "
            "its own (bench.scale's method). The four steps of an iteration (each store's "
            "flush, each raw PUT) rotate. 'new bases written' = persists whose head names a "
            "new base; 'prepare ms' = Store.prepare_compactions between persists, untimed in "
            "them.",
            f"Targets after 100 changed rows: p50 <= {target50}x, p90 <= {target90:g}x raw PUT.",
        ],
    )


def round_table(found: Measured) -> Table:
    return Table.of(
        f"Saturated round: {found.shards} shards dirty (100 changed rows each), one flush, new "
        "bases prepared between rounds vs encoded by the persist, interleaved (s)",
        [
            ("workload", lambda arm: arm.shape),
            ("new bases", lambda arm: arm.bases),
            ("rounds", lambda arm: str(len(arm.store))),
            ("prepared", lambda arm: str(arm.prepared) if arm.prepare else "-"),
            ("prepare s p50 / max", lambda arm: _prepare(arm, 3)),
            ("store flush p50", lambda arm: _p(arm.store, 0.5, 3)),
            ("store flush max", lambda arm: f"{max(arm.store):.3f}"),
            ("raw PUTs p50", lambda arm: _p(arm.raw, 0.5, 3)),
            ("raw PUTs max", lambda arm: f"{max(arm.raw):.3f}"),
            ("store / raw p50", lambda arm: f"{arm.ratio(0.5):.2f}x"),
        ],
        found.rounds,
        [
            f"raw PUTs = the blobs that store's flush sent, from {PERSIST_CONCURRENCY} threads "
            "(the store's pool size); the four steps of a round rotate. After each round the "
            "preparing store runs Store.prepare_compactions (untimed in the rounds). "
            f"Target: store / raw p50 <= {ROUND_TARGET_RATIO:g}x.",
        ],
    )


def run(quick: bool = False, plane: ControlPlane | None = None) -> Report:
    if plane is None:
        with running_control_plane() as own:
            return run(quick, own)
    found = measure(plane, quick)
    tables = [persist_table(found), round_table(found), profile_table(found.profiles)]
    return Report("Persist tail", tables, measured=found)


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "a 500-row shard, few iterations")
    found.add_argument("--write-doc", action="store_true", help="write its docs section")
    args = found.parse_args(argv)
    report = run(args.quick)
    if args.write_doc:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        write_section(
            report,
            "persist-tail",
            "Persist tail: new bases prepared between persists (scripts/bench/persist_tail.py)",
            lines=[
                "`PYTHONPATH=scripts .venv/bin/python -m bench.persist_tail --write-doc`, its "
                f"output as printed; load average at its end {load} on {os.cpu_count()} cores.",
                "",
            ],
        )
    return emit(report, args)


if __name__ == "__main__":
    sys.exit(main())
