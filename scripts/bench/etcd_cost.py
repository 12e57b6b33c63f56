"""What a persist costs etcd, read from etcd's own metrics, for two releases of the store.

1. WAL bytes per persist (`etcd_disk_wal_write_bytes_total` read before and after every
   persist) and the amplification (WAL bytes / the gzip size of exactly the rows changed), for
   this tree's store (gzip-shards-v3: a head and chunk slots) and the previous release's
   (gzip-shards-v2: one object rewritten whole), interleaved persist by persist on one etcd.
   Each release runs its own code in its own process (scripts/bench/etcd_worker.py; the old
   release's `src/` is extracted from git at V2_REV). etcd's database size
   (`etcd_mvcc_db_total_size_in_bytes`) is read around each run. From the mean WAL per persist:
   how many such shards, each persisting once a second, would fill a 2 GiB quota within one
   compaction window of the API server (600 s), on paper.
2. The write budget: one store of this tree under a saturated load (every shard dirty all the
   time, the real Debouncer), etcd's WAL sampled twice a second; the most WAL bytes in any 10 s
   window against 10 x budget + one object.
3. Time to NOSPACE: a separate etcd with a 64 MiB quota and the API server's default compaction;
   one store persists one changed row a second into a 35,000-row uuid shard until etcd refuses
   (or the time limit passes); each release on its own fresh control plane.

    PYTHONPATH=scripts .venv/bin/python -m bench.etcd_cost [--quick] [--part wal|budget|nospace ...]
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from bench.codec import entropy_bytes
from bench.report import Report, Table, Target, emit, parser, write_section
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import (
    COMPACTION_WINDOW_SECONDS,
    CONFIGMAP_VALUE_LIMIT,
    DEFAULT_ETCD_QUOTA_BYTES,
)
from checkpoint_runtime.format.naming import rfc3339_from_ns
from checkpoint_runtime.format.reference_rows import EPOCH_NS, FeedWorkload
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer
from checkpoint_testenv.controlplane import ControlPlane, EtcdAdmin, running_control_plane
from checkpoint_testenv.support.timing import nearest_rank_median as median
from checkpoint_testenv.support.timing import percentile, rotated

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# the last commit whose store writes gzip-shards-v2 (one object per shard, rewritten whole).
V2_REV = "bc8f231"
WAL = "etcd_disk_wal_write_bytes_total"
DB = "etcd_mvcc_db_total_size_in_bytes"
LEASE = "bench-etcd"
NOSPACE_QUOTA = 64 * 1024 * 1024
QUOTA_2GIB = DEFAULT_ETCD_QUOTA_BYTES


# -- the two releases -----------------------------------------------------------------------------


@contextlib.contextmanager
def release_sources(v2_rev: str) -> Iterator[dict[str, Path]]:
    """`src/` of this tree and of the old release (extracted from git) by release name."""
    with tempfile.TemporaryDirectory(prefix="bench-v2-") as folder:
        archive = subprocess.run(
            ["git", "archive", v2_rev, "src/checkpoint_runtime"],
            cwd=REPO,
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield {"v2": Path(folder) / "src", "v3": REPO / "src"}


class WorkerProcess:
    """scripts/bench/etcd_worker.py running one release's store."""

    def __init__(self, release: str, src: Path) -> None:
        self.release = release
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "etcd_worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def call(self, **request: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.release} worker exited ({self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def open(
        self, plane: ControlPlane, shard: str, rows: int, shape: str, **options: Any
    ) -> dict[str, Any]:
        namespace = plane.create_namespace(
            "bench-" + "".join(filter(str.isalnum, self.release))[:16]
        )
        return self.call(
            **options,
            op="open",
            host=plane.host,
            ca=str(plane.ca_file),
            token=plane.admin_token,
            namespace=namespace,
            lease=LEASE,
            shard=shard,
            rows=rows,
            shape=shape,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(op="close")
        self.process.wait(timeout=30)


# -- 1. WAL per persist ---------------------------------------------------------------------------


@dataclass
class WalRun:
    release: str
    shape: str
    rows: int
    changed: int
    format: str = ""
    objects: int = 0
    wal: list[float] = field(default_factory=list)
    change_bytes: list[float] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    db_growth: float = 0.0

    @property
    def amplification(self) -> list[float]:
        return [w / c for w, c in zip(self.wal, self.change_bytes, strict=True)]

    @property
    def mean_wal(self) -> float:
        return sum(self.wal) / len(self.wal)

    def shards_to_fill(self, quota: int = QUOTA_2GIB) -> float:
        """Shards persisting once a second that fill `quota` within one compaction window."""
        return quota / (self.mean_wal * COMPACTION_WINDOW_SECONDS)


def measure_wal(
    plane: ControlPlane,
    sources: dict[str, Path],
    shape: str,
    rows: int,
    changed: int,
    persists: int,
    options: dict[str, dict[str, Any]] | None = None,
) -> list[WalRun]:
    """Both releases (or variants: `options` by release, for its worker's open) side by side:
    one persist each per round, the order alternating."""
    etcd = plane.etcd()
    shard = f"bench/objectstore/{shape}-{rows}"
    workers = [WorkerProcess(release, src) for release, src in sources.items()]
    runs = []
    try:
        for worker in workers:
            opened = worker.open(
                plane, shard, rows, shape, **(options or {}).get(worker.release, {})
            )
            runs.append(
                WalRun(worker.release, shape, rows, changed, opened["format"], opened["objects"])
            )
        db_before = etcd.metrics()[DB]
        for iteration in range(persists):
            order = rotated(list(zip(workers, runs, strict=True)), iteration)
            for worker, run in order:
                before = etcd.metrics()[WAL]
                answer = worker.call(op="step", count=changed, iteration=iteration)
                after = etcd.metrics()[WAL]
                run.wal.append(after - before)
                run.change_bytes.append(answer["change_bytes"])
                run.ms.append(answer["ms"])
        growth = etcd.metrics()[DB] - db_before
        for run in runs:  # the database is shared: its growth split by WAL bytes
            share = sum(run.wal) / sum(sum(r.wal) for r in runs)
            run.db_growth = growth * share / persists
    finally:
        for worker in workers:
            worker.close()
    return runs


# -- 2. the write budget ------------------------------------------------------------------------


@dataclass
class BudgetRun:
    budget: int
    shards: int
    seconds: float
    largest_object: int
    windows: list[float] = field(default_factory=list)
    total_wal: float = 0.0
    updates: int = 0
    value_bytes: float = 0.0
    """ConfigMap value bytes the store sent (its checkpoint_shard_api_bytes_written_total)."""
    writes: float = 0.0
    """Objects written (heads and chunk slots: checkpoint_writes_total)."""

    @property
    def overhead_per_write(self) -> float:
        """WAL bytes per write beyond the values: metadata, annotations, etcd's framing."""
        return (self.total_wal - self.value_bytes) / max(self.writes, 1)

    @property
    def bound(self) -> float:
        return 10 * self.budget + self.largest_object

    @property
    def worst_window(self) -> float:
        """The most WAL bytes in any 10 s window (the whole run if shorter)."""
        return max(self.windows, default=self.total_wal)


def _budget_store(
    plane: ControlPlane, budget: int, shards: int, rows: int
) -> tuple[Store, KubernetesBackend, dict[str, list[str]]]:
    """A store under the budget with `shards` shards of `rows` uuid rows; its seen keys."""
    namespace = plane.create_namespace("bench-budget")
    backend = KubernetesBackend(plane.configuration(), namespace, LEASE)
    store = Store.open(
        backend,
        writer="bench",
        epoch=1,
        deadline_seconds=120,
        debounce_seconds=0.2,
        write_budget_bytes_per_second=budget,
    )
    seen: dict[str, list[str]] = {}
    for feed in [f"bench/objectstore/f{index}" for index in range(shards)]:
        feed_rows = FeedWorkload(feed, rows, "uuid").rows
        store.batch(feed_rows)
        seen[feed] = [key for key in feed_rows if "/seen/" in key]
    return store, backend, seen


def _counted(store: Store) -> tuple[float, float]:
    """(value bytes written, objects written) so far, from the store's own series."""
    families = {f.name: f for f in store.metrics.registry.collect()}
    return tuple(  # type: ignore[return-value]
        sum(s.value for s in families[name].samples if s.name.endswith("_total"))
        for name in ("checkpoint_shard_api_bytes_written", "checkpoint_writes")
    )


def _windows(samples: list[tuple[float, float]], span: float = 10.0) -> list[float]:
    """WAL bytes in every `span`-second window between samples (monotonic s, WAL total)."""
    windows = []
    for index, (at, value) in enumerate(samples):
        later = [v for t, v in samples[index:] if t - at <= span]
        if samples[-1][0] - at >= span:
            windows.append(later[-1] - value)
    return windows


def _saturate(store: Store, seen: dict[str, list[str]], seconds: float, errors: list[Any]) -> int:
    """Change a row of every shard every 20 ms for `seconds` (or until the debouncer fails)."""
    started = time.monotonic()
    update = 0
    while time.monotonic() - started < seconds and not errors:
        for keys in seen.values():
            store.set(keys[update % len(keys)], rfc3339_from_ns(EPOCH_NS + 10**18 + update))
        update += 1
        time.sleep(0.02)
    return update


def measure_budget(
    plane: ControlPlane, budget: int, shards: int, seconds: float, rows: int
) -> BudgetRun:
    """`shards` shards of `rows` uuid rows, every one changed continuously; the Debouncer
    persists under the budget. etcd's WAL is sampled every 0.5 s; the most bytes in any 10 s."""
    store, backend, seen = _budget_store(plane, budget, shards, rows)
    largest = max(CONFIGMAP_VALUE_LIMIT // 8, 0)
    states = store.shard_states()
    largest = max((state.compressed_bytes for state in states.values()), default=largest)
    run = BudgetRun(budget, shards, seconds, largest)
    etcd = plane.etcd()
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), etcd.metrics()[WAL]))
            stop.wait(0.5)

    value_before, writes_before = _counted(store)
    errors: list[BaseException] = []
    debouncer = Debouncer(store, errors.append)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    debouncer.start()
    update = _saturate(store, seen, seconds, errors)
    debouncer.stop()
    stop.set()
    sampler.join()
    value_after, writes_after = _counted(store)
    run.value_bytes, run.writes = value_after - value_before, writes_after - writes_before
    backend.close()
    if errors:
        raise ExceptionGroup(
            "the debouncer failed", [e for e in errors if isinstance(e, Exception)]
        )
    run.updates = update * len(seen)
    run.total_wal = samples[-1][1] - samples[0][1]
    run.windows = _windows(samples)
    return run


# -- 3. time to NOSPACE ---------------------------------------------------------------------------


@dataclass
class NospaceRun:
    release: str
    rows: int
    limit_seconds: float
    persists: int = 0
    seconds: float = 0.0
    refused: str = ""
    db_start: float = 0.0
    db_end: float = 0.0

    @property
    def db_per_persist(self) -> float:
        return (self.db_end - self.db_start) / max(self.persists, 1)


def measure_nospace(release: str, src: Path, rows: int, limit_seconds: float) -> NospaceRun:
    """A fresh control plane (64 MiB quota, default compaction); one persist a second."""
    run = NospaceRun(release, rows, limit_seconds)
    with running_control_plane(quota_backend_bytes=NOSPACE_QUOTA) as plane:
        etcd: EtcdAdmin = plane.etcd()
        worker = WorkerProcess(release, src)
        try:
            worker.open(plane, "bench/objectstore/nospace", rows, "uuid")
            run.db_start = etcd.metrics()[DB]
            started = time.monotonic()
            while time.monotonic() - started < limit_seconds:
                tick = time.monotonic()
                answer = worker.call(op="step", count=1, iteration=run.persists)
                if "error" in answer:
                    run.refused = answer["error"]
                    break
                run.persists += 1
                time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
            run.seconds = time.monotonic() - started
            run.db_end = etcd.metrics()[DB]
            if not run.refused and etcd.alarms():
                run.refused = ",".join(etcd.alarms())
        finally:
            worker.close()
    return run


# -- the report -----------------------------------------------------------------------------------


@dataclass
class EtcdMeasured:
    wal: list[WalRun] = field(default_factory=list)
    budget: list[BudgetRun] = field(default_factory=list)
    nospace: list[NospaceRun] = field(default_factory=list)
    variants: list[WalRun] = field(default_factory=list)
    """This tree's store as it writes: bases encoded by the persist, or prepared between
    persists, with unsealed or sealed heads."""

    def find(self, release: str, shape: str, rows: int, changed: int) -> WalRun | None:
        for run in self.wal:
            if (run.release, run.shape, run.rows, run.changed) == (release, shape, rows, changed):
                return run
        return None


WAL_CASES = [("uuid", 35_000, 1), ("uuid", 35_000, 100), ("uuid", 5000, 1), ("old-design", 5000, 1)]


PARTS = ("wal", "budget", "nospace", "variants")
VARIANTS = {
    "v3, base encoded by the persist": {},
    "v3, bases prepared between persists": {"prepare": True},
    "v3 sealed, bases prepared between persists": {"prepare": True, "seal": True},
}
"""The variants part: this tree's worker, opened with these options."""
VARIANT_CASES = [("uuid", 35_000, 1), ("uuid", 35_000, 100)]


def _measure_live(
    plane: ControlPlane, sources: dict[str, Path], quick: bool, parts: Sequence[str]
) -> EtcdMeasured:
    """The WAL and budget runs, on one (given) control plane."""
    measured = EtcdMeasured()
    if "wal" in parts:
        for shape, rows, changed in WAL_CASES[:1] if quick else WAL_CASES:
            persists = 10 if quick else (300 if rows > 10_000 else 100)
            measured.wal += measure_wal(
                plane, sources, shape, 500 if quick else rows, changed, persists
            )
    if "variants" in parts:
        for shape, rows, changed in VARIANT_CASES[:1] if quick else VARIANT_CASES:
            measured.variants += measure_wal(
                plane,
                dict.fromkeys(VARIANTS, REPO / "src"),
                shape,
                500 if quick else rows,
                changed,
                10 if quick else 300,
                VARIANTS,
            )
    if "budget" in parts:
        measured.budget.append(
            measure_budget(plane, 262_144, 5 if quick else 50, 12 if quick else 60, 5000)
        )
    return measured


def measure_all(
    plane: ControlPlane | None, quick: bool, parts: Sequence[str], v2_rev: str
) -> EtcdMeasured:
    measured = EtcdMeasured()
    with release_sources(v2_rev) as sources:
        if {"wal", "budget", "variants"} & set(parts):
            with contextlib.ExitStack() as stack:
                live = plane or stack.enter_context(running_control_plane())
                measured = _measure_live(live, sources, quick, parts)
        if "nospace" in parts:
            limit = {"v2": 20.0 if quick else 300.0, "v3": 20.0 if quick else 900.0}
            for release, src in sources.items():
                measured.nospace.append(
                    measure_nospace(release, src, 500 if quick else 35_000, limit[release])
                )
    return measured


def run(
    quick: bool = False,
    plane: ControlPlane | None = None,
    parts: Sequence[str] = PARTS,
    v2_rev: str = V2_REV,
) -> Report:
    """What a persist costs etcd, v2 beside v3 (on a control plane of its own without
    `plane`; the NOSPACE part always starts its own small-quota ones)."""
    measured = measure_all(plane, quick, parts, v2_rev)
    return Report(
        "What a persist costs etcd", tables(measured), targets(measured), measured=measured
    )


# -- tables ---------------------------------------------------------------------------------------

WAL_NOTES = [
    "WAL = etcd_disk_wal_write_bytes_total read from etcd's /metrics right before "
    "and after each persist (a synchronous batch); the two releases alternate "
    "persist by persist on one etcd, each in its own process running its own code "
    f"(v2 = the store at {V2_REV}). The API server's own writes (its lease, "
    "every 10 s) fall into a window now and then: they show in p99, not p50.",
    "compressed change = gzip -9 of exactly the changed rows (JSON); "
    "amplification = WAL / compressed change, per persist. objects = ConfigMaps "
    "of the store after the first write.",
    "DB growth = etcd_mvcc_db_total_size_in_bytes over the run, split between the "
    "releases by their WAL bytes. 2 GiB filled by = 2 GiB / (mean WAL per persist "
    "x 600 persists): shards persisting once a second whose history fills etcd's "
    "default quota within one compaction window of the API server (paper).",
]
BUDGET_NOTE = (
    "Every shard (5,000 uuid rows) gets a changed row every 20 ms; the real "
    "Debouncer (debounce 0.2 s) persists under the budget. WAL sampled every "
    "0.5 s; windows are 10 s spans between samples. one object = the largest "
    "stored shard object. The budget charges each write its values, annotations "
    "and a fixed allowance for the rest of the object; WAL also holds etcd's own framing."
)
NOSPACE_NOTE = (
    "A fresh etcd (--quota-backend-bytes 64 MiB) and kube-apiserver with its "
    "default "
    "compaction (--etcd-compaction-interval 5m) per release; one synchronous batch "
    "of 1 changed row a second. DB = etcd_mvcc_db_total_size_in_bytes (the file "
    "size the quota is checked against)."
)


def wal_table(runs: list[WalRun], title: str | None = None) -> Table:
    return Table.of(
        title
        or "etcd WAL bytes per persist, v2 (one object rewritten) vs v3 (head + chunk "
        "slots), interleaved",
        [
            ("release", lambda run: f"{run.release} ({run.format})"),
            ("workload", lambda run: f"{run.shape}, {run.rows:,} rows"),
            ("rows changed", lambda run: str(run.changed)),
            ("persists", lambda run: str(len(run.wal))),
            ("objects", lambda run: str(run.objects)),
            ("WAL / persist p50", lambda run: f"{median(run.wal):,.0f}"),
            ("p99", lambda run: f"{percentile(run.wal, 0.99):,.0f}"),
            ("mean", lambda run: f"{run.mean_wal:,.0f}"),
            ("compressed change p50", lambda run: f"{median(run.change_bytes):,.0f}"),
            ("amplification p50", lambda run: f"{median(run.amplification):,.1f}x"),
            ("DB growth / persist", lambda run: f"{run.db_growth:,.0f}"),
            ("2 GiB filled in 600 s by", lambda run: f"{run.shards_to_fill():,.0f} shards"),
            ("persist ms p50", lambda run: f"{median(run.ms):.1f}"),
        ],
        runs,
        WAL_NOTES,
    )


def budget_table(runs: list[BudgetRun]) -> Table:
    return Table.of(
        "Write budget: etcd WAL bytes in any 10 s window, one store under a saturated load",
        [
            ("budget B/s", lambda item: f"{item.budget:,}"),
            ("shards", lambda item: str(item.shards)),
            ("seconds", lambda item: f"{item.seconds:g}"),
            ("updates", lambda item: f"{item.updates:,}"),
            ("WAL total", lambda item: f"{item.total_wal:,.0f}"),
            ("WAL / s", lambda item: f"{item.total_wal / item.seconds:,.0f}"),
            ("max WAL in 10 s", lambda item: f"{item.worst_window:,.0f}"),
            ("10 x B + one object", lambda item: f"{item.bound:,.0f}"),
            ("max / bound", lambda item: f"{item.worst_window / item.bound:.2f}"),
            ("value bytes sent", lambda item: f"{item.value_bytes:,.0f}"),
            ("writes", lambda item: f"{item.writes:,.0f}"),
            ("WAL beyond values / write", lambda item: f"{item.overhead_per_write:,.0f}"),
        ],
        runs,
        [BUDGET_NOTE],
    )


def _outcome(item: NospaceRun) -> str:
    if item.refused:
        return f"refused ({item.refused})"
    return f"no NOSPACE within {item.limit_seconds:.0f} s"


def nospace_table(runs: list[NospaceRun]) -> Table:
    return Table.of(
        "Time to NOSPACE: 64 MiB etcd quota, one 35,000-row uuid shard, 1 changed row/s",
        [
            ("release", lambda item: item.release),
            ("persists", lambda item: str(item.persists)),
            ("seconds", lambda item: f"{item.seconds:.0f}"),
            ("outcome", _outcome),
            ("DB start", lambda item: f"{item.db_start:,.0f}"),
            ("DB end", lambda item: f"{item.db_end:,.0f}"),
            ("DB growth / persist", lambda item: f"{item.db_per_persist:,.0f}"),
        ],
        runs,
        [NOSPACE_NOTE],
    )


def tables(measured: EtcdMeasured) -> list[Table]:
    out: list[Table] = []
    if measured.wal:
        out.append(wal_table(measured.wal))
    if measured.variants:
        table = wal_table(
            measured.variants,
            "etcd WAL bytes per persist, this tree: a new base encoded by the persist vs "
            "prepared between persists, unsealed vs sealed heads, interleaved",
        )
        table.notes = [
            "Three workers of this tree, persist by persist on one etcd, the order "
            "rotating (for two, alternating as in the table above). 'prepared between "
            "persists': after each persist the worker calls Store.prepare_compactions, as "
            "the runtime's debounce loop does while nothing is due (it writes nothing); the "
            "persist that passes the delta bound then writes the prepared base with a "
            "delta of the rows changed since. 'sealed': every head carries the store's "
            "seal (an HMAC annotation), as the runtime writes it.",
            *table.notes[:1],
        ]
        out.append(table)
    if measured.budget:
        out.append(budget_table(measured.budget))
    if measured.nospace:
        out.append(nospace_table(measured.nospace))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "small sizes, few persists")
    found.add_argument("--part", action="append", choices=PARTS, help="default: all")
    found.add_argument("--v2-rev", default=V2_REV, help="git revision of the v2 store")
    found.add_argument("--json", type=Path, help="also write the raw measurements here")
    found.add_argument(
        "--write-doc",
        action="store_true",
        help="write the variants part's table as a docs/benchmarks.md section",
    )
    args = found.parse_args(argv)
    report = run(quick=args.quick, parts=args.part or PARTS, v2_rev=args.v2_rev)
    if args.write_doc and report.measured.variants:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        variants = Report(report.title, [t for t in report.tables if "this tree" in t.title])
        write_section(
            variants,
            "etcd-variants",
            "etcd WAL per persist, prepared bases and sealed heads (scripts/bench/etcd_cost.py)",
            lines=[
                "`PYTHONPATH=scripts .venv/bin/python -m bench.etcd_cost --part variants "
                f"--write-doc`, its output as printed; load average at its end {load} on "
                f"{os.cpu_count()} cores (WAL bytes do not depend on the load, times do).",
                "",
            ],
        )
    if args.json:
        measured = report.measured
        args.json.write_text(
            json.dumps(
                {
                    "wal": [vars(r) for r in measured.wal],
                    "budget": [vars(r) for r in measured.budget],
                    "nospace": [vars(r) for r in measured.nospace],
                    "variants": [vars(r) for r in measured.variants],
                },
                default=str,
            )
        )
    return emit(report, args)


# -- targets (all.py writes them into the targets table) --------------------------------------

ONE_ROW_WAL_P50 = 8 * 1024  # WAL bytes per 1-row persist, 35k-row uuid shard, median
ONE_ROW_WAL_P99 = 64 * 1024
HUNDRED_ROW_WAL_P50 = 64 * 1024
AMPLIFICATION_P50 = 50.0  # 1 row, any shard size
SHARDS_TO_FILL = 250  # busy near-limit shards that fill 2 GiB in one compaction window
NOSPACE_SECONDS = 900  # no NOSPACE within 15 min on a 64 MiB quota
AMPLIFICATION_WHY = (
    "A base small enough to stay inline in the head (one object per collector at stock "
    "settings) is rewritten with the head on every persist, as in v2; a chunked shard's head "
    "carries the manifest, the stamps and the delta, plus etcd's own per-revision framing."
)


def one_row_targets(measured: EtcdMeasured) -> list[Target]:
    one = measured.find("v3", "uuid", 35_000, 1)
    if one is None:
        return []
    old = measured.find("v2", "uuid", 35_000, 1)
    p50, p99 = median(one.wal), percentile(one.wal, 0.99)
    baseline = f"; v2 {median(old.wal):,.0f} B p50" if old is not None else ""
    shards = one.shards_to_fill()
    return [
        Target(
            f"etcd WAL per 1-row persist, 35k-row uuid shard, {len(one.wal)} persists",
            f"median <= {ONE_ROW_WAL_P50:,} B, p99 <= {ONE_ROW_WAL_P99:,} B",
            f"{p50:,.0f} B p50, {p99:,.0f} B p99",
            p50 <= ONE_ROW_WAL_P50 and p99 <= ONE_ROW_WAL_P99,
            f"v3 writes the head (manifest + delta) on most persists and rewrites the "
            f"changed chunks at a compaction{baseline}.",
        ),
        Target(
            "busy near-limit shards that fill a 2 GiB quota in one compaction window (paper)",
            f">= {SHARDS_TO_FILL}",
            f"{shards:,.0f}" + (f" (v2: {old.shards_to_fill():.1f})" if old else ""),
            shards >= SHARDS_TO_FILL,
            "2 GiB / (mean WAL per 1-row persist of the 35k-row uuid shard x 600 persists).",
        ),
    ]


def hundred_rows_targets(measured: EtcdMeasured) -> list[Target]:
    hundred = measured.find("v3", "uuid", 35_000, 100)
    if hundred is None:
        return []
    p50 = median(hundred.wal)
    return [
        Target(
            f"etcd WAL per 100-row persist, 35k-row uuid shard, {len(hundred.wal)} persists",
            f"median <= {HUNDRED_ROW_WAL_P50:,} B",
            f"{p50:,.0f} B p50",
            p50 <= HUNDRED_ROW_WAL_P50,
            "the head carries the delta of every row changed since the last compaction.",
        )
    ]


def amplification_targets(measured: EtcdMeasured) -> list[Target]:
    ones = [run for run in measured.wal if run.release == "v3" and run.changed == 1]
    if not ones:
        return []
    worst = max(ones, key=lambda run: median(run.amplification))
    return [
        Target(
            "amplification (WAL / compressed change), 1 row, any shard size, median",
            f"<= {AMPLIFICATION_P50:g}x",
            ", ".join(f"{r.shape} {r.rows:,}: {median(r.amplification):.1f}x" for r in ones),
            all(median(r.amplification) <= AMPLIFICATION_P50 for r in ones),
            f"worst: {worst.shape} {worst.rows:,} rows ({worst.objects} object(s)). "
            + AMPLIFICATION_WHY
            + one_object_floor(worst),
        )
    ]


def one_object_floor(run: WalRun) -> str:
    """Why a shard kept in one object cannot go below a floor: every persist rewrites the
    object, which holds at least the rows' entropy, against a change of one compressed row."""
    if run.objects != 1:
        return ""
    entropy = entropy_bytes(run.shape, run.rows)
    change = median(run.change_bytes)
    return (
        f" Kept in one object, no encoding can write less per persist than the rows' entropy "
        f"({entropy:,.0f} B for {run.rows:,} {run.shape} rows), so its amplification is at "
        f"least {entropy / change:.0f}x (entropy / {change:,.0f} B of compressed change): "
        f"under {AMPLIFICATION_P50:g}x only with the base in a chunk slot, a second object, "
        f"which the one-object-per-collector target rules out at these sizes."
    )


def budget_target(item: BudgetRun) -> Target:
    worst_window = item.worst_window
    return Target(
        f"write budget {item.budget:,} B/s: etcd WAL in any 10 s, {item.shards} saturated shards",
        "<= 10 x B + one object's size",
        f"{worst_window:,.0f} B (bound {item.bound:,.0f})",
        worst_window <= item.bound,
        f"{item.updates:,} updates over {item.seconds:g} s, WAL sampled every 0.5 s; "
        f"mean {item.total_wal / item.seconds:,.0f} B/s. ConfigMap value bytes sent: "
        f"{item.value_bytes:,.0f} (the budget also charges annotations and a fixed "
        f"allowance per object); the WAL also carries every write's metadata and "
        f"etcd's framing ({item.overhead_per_write:,.0f} B a "
        f"write, {item.writes:,.0f} writes). Against one object of the ConfigMap limit "
        f"({CONFIGMAP_VALUE_LIMIT:,} B) the bound is "
        f"{10 * item.budget + CONFIGMAP_VALUE_LIMIT:,} B.",
    )


def nospace_target(item: NospaceRun, baseline: NospaceRun | None) -> Target:
    return Target(
        "time to NOSPACE: 64 MiB quota, one 35k-row shard, 1 row/s",
        f"none within {NOSPACE_SECONDS // 60} min",
        f"refused after {item.seconds:.0f} s"
        if item.refused
        else f"none within {item.seconds:.0f} s",
        (not item.refused and item.seconds >= NOSPACE_SECONDS)
        if item.limit_seconds >= NOSPACE_SECONDS
        else None,
        (
            f"v2 refused after {baseline.seconds:.0f} s ({baseline.persists} persists); "
            if baseline and baseline.refused
            else ""
        )
        + f"DB growth {item.db_per_persist:,.0f} B per persist.",
    )


def targets(measured: EtcdMeasured) -> list[Target]:
    """Every target these measurements decide, in the order of the targets table."""
    one = one_row_targets(measured)
    baseline = next((n for n in measured.nospace if n.release == "v2"), None)
    return [
        *one[:1],
        *hundred_rows_targets(measured),
        *amplification_targets(measured),
        *one[1:],
        *map(budget_target, measured.budget),
        *(nospace_target(item, baseline) for item in measured.nospace if item.release == "v3"),
    ]


if __name__ == "__main__":
    sys.exit(main())
