"""Store benchmark (measure 4): in-memory set/get, synchronous batch, open of 100 shards.

- `set` and `get` are in memory (they only mark the owning shard dirty), timed over a store
  holding one 5000-row feed shard.
- `batch` persists every touched shard before returning: timed on the file backend in a temp
  dir (encode, write, fsync, rename), for one and many changed rows and for three shards.
- Open = discover + decode every shard (Store.open), for 100 shards on the file backend and on
  a real kube-apiserver + etcd (started here unless `run` is given a ControlPlane).

    .venv/bin/python scripts/bench/store_ops.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.format.keys import collector_namespace
from checkpoint_runtime.format.reference_rows import EPOCH_NS, FeedWorkload
from checkpoint_runtime.format.values import rfc3339_from_ns
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.benchreport import Table
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane

LEASE = "bench-checkpoints"
FEED = "tailnet-1/objectstore/feed-1"
SHARD_ROWS = 5000


def _open(backend: Backend, **options: Any) -> Store:
    return Store.open(backend, writer="bench", epoch=1, deadline_seconds=600, **options)


# -- in memory ------------------------------------------------------------------------------------


@dataclass
class Throughput:
    operation: str
    backend: str
    calls: int
    rows_per_call: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds


def _rate(
    operation: str, backend: str, rows: int, calls: int, call: Callable[[int], Any]
) -> Throughput:
    started = time.perf_counter()
    for index in range(calls):
        call(index)
    return Throughput(operation, backend, calls, rows, time.perf_counter() - started)


def measure_memory(folder: Path, quick: bool) -> list[Throughput]:
    store = _open(FileBackend(folder, LEASE))
    rows = FeedWorkload(FEED, SHARD_ROWS, "uuid").rows
    store.batch(rows)
    seen = [key for key in rows if "/seen/" in key]
    count = 20_000 if quick else 300_000
    stamps = [rfc3339_from_ns(EPOCH_NS + 10**18 + index) for index in range(1000)]
    results = [
        _rate(
            "set (existing key, new value)",
            "memory",
            1,
            count,
            lambda i: store.set(seen[i % len(seen)], stamps[i % len(stamps)]),
        ),
        _rate(
            "set (new key)",
            "memory",
            1,
            count,
            lambda i: store.set(f"{FEED}/seen/new-{i}", stamps[i % len(stamps)]),
        ),
        _rate("get", "memory", 1, count, lambda i: store.get(seen[i % len(seen)])),
    ]
    return results  # never flushed: the new keys would make the shard oversize


def measure_batch(folder: Path, quick: bool) -> list[Throughput]:
    """Synchronous batches into a 5000-row feed shard (plus two more feeds for the last case).

    --quick uses 500-row shards (smoke sizes, not figures).
    """
    store = _open(FileBackend(folder, LEASE))
    feeds = [collector_namespace("objectstore", "tailnet-1", f"feed-{n}") for n in (1, 2, 3)]
    for feed in feeds:
        store.batch(FeedWorkload(feed, 500 if quick else SHARD_ROWS, "uuid").rows)
    calls = 3 if quick else 40
    results = []
    for label, changed, shards in (
        ("batch, 1 row", 1, feeds[:1]),
        ("batch, 100 rows", 100, feeds[:1]),
        ("batch, 100 rows in each of 3 shards", 100, feeds),
    ):

        def one(index: int, changed: int = changed, shards: list[str] = shards) -> None:
            stamp = rfc3339_from_ns(EPOCH_NS + 10**18 + index)
            store.batch(
                {f"{shard}/seen/batch-{row}": stamp for shard in shards for row in range(changed)}
            )

        results.append(_rate(label, "file", changed * len(shards), calls, one))
    return results


# -- open -----------------------------------------------------------------------------------------


@dataclass
class OpenTime:
    backend: str
    shards: int
    rows_per_shard: int
    stored_bytes: int
    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _shards(count: int) -> list[str]:
    side = max(1, int(count**0.5))
    names = [
        collector_namespace("objectstore", f"tailnet-{t + 1}", f"feed-{f + 1}")
        for t in range(-(-count // side))
        for f in range(side)
    ]
    return names[:count]


def measure_open(
    plane: ControlPlane | None, folder: Path, count: int, rows_per_shard: int, repetitions: int
) -> list[OpenTime]:
    """Populate `count` shards on both backends, then time Store.open, alternating backends."""
    rows: dict[str, str] = {}
    for shard in _shards(count):
        rows.update(FeedWorkload(shard, rows_per_shard, "uuid").rows)
    makers: dict[str, Callable[[], Backend]] = {
        "file": lambda: FileBackend(folder / f"open-{count}-{rows_per_shard}", LEASE)
    }
    if plane is not None:
        namespace = plane.create_namespace("bench-open")
        makers["kube-apiserver"] = lambda: KubernetesBackend(
            plane.configuration(), namespace, LEASE
        )
    results = {}
    for name, make in makers.items():
        store = _open(make())
        store.batch(rows)
        if len(store.shard_states()) != count:
            raise RuntimeError(f"{name}: expected {count} shards")
        stored = sum(state.compressed_bytes for state in store.shard_states().values())
        results[name] = OpenTime(name, count, rows_per_shard, stored, [])
    for _ in range(repetitions):
        for name, make in makers.items():
            backend = make()
            started = time.perf_counter()
            store = _open(backend)
            results[name].seconds.append(time.perf_counter() - started)
            if len(store.shard_states()) != count:
                raise RuntimeError(f"{name}: opened {len(store.shard_states())} shards")
            with contextlib.suppress(AttributeError):
                backend.close()  # type: ignore[attr-defined]
    return list(results.values())


# -- the report -----------------------------------------------------------------------------------


@dataclass
class StoreOpsReport:
    throughput: list[Throughput]
    opens: list[OpenTime]
    tables: list[Table] = field(default_factory=list)


def run(
    plane: ControlPlane | None = None, quick: bool = False, with_apiserver: bool = True
) -> StoreOpsReport:
    if plane is None and with_apiserver:
        with running_control_plane() as own:
            return run(own, quick)
    with tempfile.TemporaryDirectory(prefix="bench-store-ops-") as tmp:
        folder = Path(tmp)
        throughput = measure_memory(folder / "memory", quick)
        throughput += measure_batch(folder / "batch", quick)
        sizes = [(10, 100)] if quick else [(100, 100), (100, 5000)]
        opens = [
            item
            for count, rows in sizes
            for item in measure_open(plane, folder, count, rows, 1 if quick else 5)
        ]
    report = StoreOpsReport(throughput, opens)
    report.tables = tables(report)
    return report


def tables(report: StoreOpsReport) -> list[Table]:
    throughput = Table(
        "Store operation throughput",
        ["operation", "backend", "calls", "rows / call", "calls / s", "rows / s", "ms / call"],
        [
            [
                item.operation,
                item.backend,
                f"{item.calls:,}",
                str(item.rows_per_call),
                f"{item.per_second:,.0f}",
                f"{item.per_second * item.rows_per_call:,.0f}",
                f"{1000 / item.per_second:.3f}",
            ]
            for item in report.throughput
        ],
        [
            "set/get: in memory on a store holding a 5000-row uuid feed shard. batch: synchronous "
            "persist of every touched 5000-row shard on the file backend (encode the whole shard, "
            "write, fsync, rename) before returning.",
        ],
    )
    opens = Table(
        "Store.open time (discover + decode every shard; median)",
        [
            "backend",
            "shards",
            "seen rows / shard",
            "stored bytes",
            "repetitions",
            "median s",
            "min s",
        ],
        [
            [
                item.backend,
                str(item.shards),
                f"{item.rows_per_shard:,}",
                f"{item.stored_bytes:,}",
                str(len(item.seconds)),
                f"{item.median:.3f}",
                f"{min(item.seconds):.3f}",
            ]
            for item in report.opens
        ],
        ["uuid workload; kube-apiserver = real server on loopback, paged LIST (50 per page)."],
    )
    return [throughput, opens]


def main(argv: Sequence[str] | None = None, plane: ControlPlane | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, 10 shards")
    parser.add_argument(
        "--no-apiserver", action="store_true", help="open time on the file backend only"
    )
    args = parser.parse_args(argv)
    report = run(plane, quick=args.quick, with_apiserver=not args.no_apiserver)
    for table in report.tables:
        print(table.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
