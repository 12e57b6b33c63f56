"""Store benchmark (measure 4): in-memory set/get, synchronous batch, open of 100 shards.

- `set` and `get` are in memory (they only mark the owning shard dirty), timed over a store
  holding one 5000-row feed shard.
- `batch` persists every touched shard before returning: timed on the file backend in a temp
  dir (encode, write, fsync, rename), for one and many changed rows and for three shards.
- Open = discover + decode every shard (Store.open), for 100 shards on the file backend and on
  a real kube-apiserver + etcd (started here unless `run` is given a ControlPlane).

    PYTHONPATH=scripts .venv/bin/python -m bench.store_ops [--quick] [--no-apiserver] [--part P]
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.report import Report, Table, Target, emit, parser, verdict
from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.backends.kubernetes import LIST_PAGE, KubernetesBackend
from checkpoint_runtime.format.naming import (
    chunk_label_selector,
    collector_namespace,
    rfc3339_from_ns,
)
from checkpoint_runtime.format.reference_rows import EPOCH_NS, FeedWorkload
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.downgrade import downgrade_to_v2
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane
from checkpoint_testenv.support.timing import rotated

LEASE = "bench-checkpoints"
FEED = "tailnet-1/objectstore/feed-1"
SHARD_ROWS = 5000
OPEN_TARGET_SECONDS = 1.2  # open 100 shards x 5000 rows (v3)


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
    format: str
    shards: int
    rows_per_shard: int
    objects: int
    stored_bytes: int
    seconds: list[float]
    ratios: list[float] = field(default_factory=list)
    """v3 only: per repetition, this open / the v2 open of the same backend in that repetition."""

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


def _drop_slots(backend: Backend, plane: ControlPlane | None, deadline: Deadline) -> None:
    """Delete every chunk slot object (after the heads became v2, nothing refers to them)."""
    if isinstance(backend, FileBackend):
        for slot in backend.list_slots(deadline):
            backend._path(slot.shard, slot.slot).unlink()
    elif isinstance(backend, KubernetesBackend) and plane is not None:
        core = client.CoreV1Api(backend.api_client)
        core.delete_collection_namespaced_config_map(
            backend.namespace, label_selector=chunk_label_selector(LEASE)
        )


def populate(
    make: Callable[[], Backend], plane: ControlPlane | None, rows: dict[str, str], v2: bool
) -> tuple[int, int]:
    """Write `rows` through the store (v3: a head and chunk slots per shard); with `v2`, each head
    rewritten as gzip-shards-v2 (as `checkpoint-runtime downgrade --to v2` does) and the chunk
    slots deleted: what the previous release wrote. (objects, stored bytes)."""
    backend = make()
    store = _open(backend)
    store.batch(rows)
    if v2:
        report = downgrade_to_v2(store.shard_states(), backend, store.fence, store.new_deadline())
        if report.too_large or report.unchanged:
            raise RuntimeError(f"downgrade left shards as they were: {report}")
        _drop_slots(backend, plane, store.new_deadline())
        store = _open(make())
    deadline = store.new_deadline()
    objects = len(backend.list_shards(deadline)) + len(backend.list_slots(deadline))
    stored = sum(state.compressed_bytes for state in store.shard_states().values())
    return objects, stored


def _open_makers(
    plane: ControlPlane | None, folder: Path, label: str
) -> dict[str, Callable[[], Backend]]:
    """Where each (backend, format) case keeps its shards."""
    makers: dict[str, Callable[[], Backend]] = {}
    for form in ("v2", "v3"):
        path = folder / f"{label}-{form}"
        makers[f"file {form}"] = lambda path=path: FileBackend(path, LEASE)
        if plane is not None:
            namespace = plane.create_namespace(f"bench-open-{form}")
            makers[f"kube-apiserver {form}"] = lambda namespace=namespace: KubernetesBackend(
                plane.configuration(), namespace, LEASE
            )
    return makers


def _time_open(make: Callable[[], Backend], count: int) -> float:
    backend = make()
    started = time.perf_counter()
    store = _open(backend)
    seconds = time.perf_counter() - started
    if len(store.shard_states()) != count:
        raise RuntimeError(f"opened {len(store.shard_states())} shards, not {count}")
    with contextlib.suppress(AttributeError):
        backend.close()  # type: ignore[attr-defined]
    return seconds


def measure_open(
    plane: ControlPlane | None, folder: Path, count: int, rows_per_shard: int, repetitions: int
) -> list[OpenTime]:
    """Populate `count` shards per backend in v3 and in v2, then time Store.open of each,
    interleaved (every repetition opens each once, the order rotating)."""
    rows: dict[str, str] = {}
    for shard in _shards(count):
        rows.update(FeedWorkload(shard, rows_per_shard, "uuid").rows)
    makers = _open_makers(plane, folder, f"open-{count}-{rows_per_shard}")
    results = {}
    for case, make in makers.items():
        backend, form = case.rsplit(" ", 1)
        objects, stored = populate(make, plane, rows, v2=form == "v2")
        results[case] = OpenTime(backend, form, count, rows_per_shard, objects, stored, [])
    cases = list(makers.items())
    for repetition in range(repetitions):
        for case, make in rotated(cases, repetition):
            results[case].seconds.append(_time_open(make, count))
        for case, result in results.items():
            if result.format == "v3":
                baseline = results[case.replace(" v3", " v2")].seconds[-1]
                result.ratios.append(result.seconds[-1] / baseline)
    return sorted(results.values(), key=lambda item: (item.backend != "file", item.format))


# -- the report -----------------------------------------------------------------------------------


@dataclass
class StoreOpsMeasured:
    throughput: list[Throughput]
    opens: list[OpenTime]


PARTS = ("throughput", "open")


def measure_all(
    plane: ControlPlane | None, quick: bool = False, parts: Sequence[str] = PARTS
) -> StoreOpsMeasured:
    measured = StoreOpsMeasured([], [])
    with tempfile.TemporaryDirectory(prefix="bench-store-ops-") as tmp:
        folder = Path(tmp)
        if "throughput" in parts:
            measured.throughput += measure_memory(folder / "memory", quick)
            measured.throughput += measure_batch(folder / "batch", quick)
        sizes = [(10, 100)] if quick else [(100, 100), (100, 5000)]
        for count, rows in sizes if "open" in parts else ():
            measured.opens += measure_open(plane, folder, count, rows, 1 if quick else 5)
    return measured


def run(
    quick: bool = False,
    plane: ControlPlane | None = None,
    with_apiserver: bool = True,
    parts: Sequence[str] = PARTS,
) -> Report:
    """Store throughput and open time (on a real API server of its own without `plane`, unless
    `with_apiserver` is false)."""
    if plane is None and with_apiserver:
        with running_control_plane() as own:
            return run(quick, own, parts=parts)
    measured = measure_all(plane, quick, parts)
    return Report("Store", tables(measured), targets(measured), measured=measured)


def throughput_table(measured: StoreOpsMeasured) -> Table:
    return Table.of(
        "Store operation throughput",
        [
            ("operation", lambda item: item.operation),
            ("backend", lambda item: item.backend),
            ("calls", lambda item: f"{item.calls:,}"),
            ("rows / call", lambda item: str(item.rows_per_call)),
            ("calls / s", lambda item: f"{item.per_second:,.0f}"),
            ("rows / s", lambda item: f"{item.per_second * item.rows_per_call:,.0f}"),
            ("ms / call", lambda item: f"{1000 / item.per_second:.3f}"),
        ],
        measured.throughput,
        [
            "set/get: in memory on a store holding a 5000-row uuid feed shard. batch: synchronous "
            "persist of every touched 5000-row shard on the file backend (encode the whole shard, "
            "write, fsync, rename) before returning.",
        ],
    )


def _open_ratio(item: OpenTime) -> str:
    return f"{statistics.median(item.ratios):.2f}x" if item.ratios else "(baseline)"


def open_table(measured: StoreOpsMeasured) -> Table:
    return Table.of(
        "Store.open time, v3 (head + chunk slots) vs v2 (one object a shard), interleaved "
        "(discover + decode every shard; median)",
        [
            ("backend", lambda item: item.backend),
            ("format", lambda item: item.format),
            ("shards", lambda item: str(item.shards)),
            ("seen rows / shard", lambda item: f"{item.rows_per_shard:,}"),
            ("objects", lambda item: f"{item.objects:,}"),
            ("stored bytes", lambda item: f"{item.stored_bytes:,}"),
            ("repetitions", lambda item: str(len(item.seconds))),
            ("median s", lambda item: f"{item.median:.3f}"),
            ("min s", lambda item: f"{min(item.seconds):.3f}"),
            ("v3 / v2 (paired median)", _open_ratio),
        ],
        measured.opens,
        [
            "uuid workload, both formats opened by this tree's store; v3 = what the store "
            "writes, v2 = the same rows with every head rewritten as gzip-shards-v2 (the "
            "downgrade path) and the chunk slots deleted, as the previous release stored them. "
            f"kube-apiserver = real server on loopback, paged LIST ({LIST_PAGE} per page; v3 "
            "lists the heads, then the chunk slots). Every "
            "repetition opens each of them once, the order rotating; v3 / v2 = the median over "
            "repetitions of the two opens' ratio on the same backend.",
        ],
    )


def tables(measured: StoreOpsMeasured) -> list[Table]:
    found = [throughput_table(measured)] if measured.throughput else []
    return found + ([open_table(measured)] if measured.opens else [])


OPEN_WHY = (
    ". Beyond v2's work (list the heads, inflate and decode the same rows), a v3 open lists "
    "the chunk slots (file: reads each by name), checks each active one's digest against its "
    "head's manifest, and checks that every row of a chunk hashes to that chunk (a crc32 per "
    "row, when a shard has more than one chunk)"
)


def open_target(opened: OpenTime) -> Target:
    met = opened.median <= OPEN_TARGET_SECONDS
    why = f"{verdict(opened.median, OPEN_TARGET_SECONDS)}; {opened.objects:,} objects, "
    why += f"{opened.stored_bytes:,} stored bytes decoded (see the codec decode ratio)"
    if not met and opened.objects > opened.shards:
        why += OPEN_WHY
    return Target(
        f"open {opened.shards} shards x {opened.rows_per_shard} rows, {opened.backend}, v3",
        f"<= {OPEN_TARGET_SECONDS:g} s",
        f"{opened.median:.2f} s (median), {_open_ratio(opened)} v2",
        met,
        why + ".",
    )


def targets(measured: StoreOpsMeasured) -> list[Target]:
    return [
        open_target(opened)
        for opened in measured.opens
        if opened.rows_per_shard >= 1000 and opened.format == "v3"
    ]


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "fewer calls, 10 shards")
    found.add_argument(
        "--no-apiserver", action="store_true", help="open time on the file backend only"
    )
    found.add_argument("--part", action="append", choices=PARTS, help="default: all")
    args = found.parse_args(argv)
    report = run(args.quick, with_apiserver=not args.no_apiserver, parts=args.part or PARTS)
    return emit(report, args)


if __name__ == "__main__":
    sys.exit(main())
