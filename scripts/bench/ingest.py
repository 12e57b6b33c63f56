"""Ingestion throughput of one replica (`just bench-ingest`): objects/s from the real S3 server
(SeaweedFS) through the object-store collector, checkpointed on the real API server, and
flow-log windows/s through the flowlogs collector, with 1, 10 and 100 collectors in one process.

Each side runs beside its baseline, interleaved in one process (the order rotating per round):

- object store: C collectors (one thread each, as the runtime's runner polls them) each make
  one first poll of their own prefix: list, read every object (16 GETs in flight per chunk of
  100), parse, emit to a JSON-lines sink, and one synchronous batch per chunk into a Store on
  the API server (a new namespace per run, so every object is new). The baseline is a bare
  loop of the same client (an s3fs filesystem made by the collector's own `open_url`) doing the
  same LIST and GETs at the same concurrency, and nothing else. collector / bare is the share of
  the bare loop's rate the collector keeps (target >= 0.5).
- flow logs: C flowlogs collectors (one tailnet each) each poll W windows of a flow-log endpoint
  (in a process of its own) holding 2 records a window, each window emitted and checkpointed
  (a synchronous batch); the baseline GETs the same windows with the same client call.

CPU per object is this process's CPU (every thread) over the run; the servers' CPU (SeaweedFS,
kube-apiserver, etcd, the flow-log endpoint: every child process) is counted beside it, so a
run that saturates says where: this process near one core is the GIL, the machine's cores
full is the machine.

    PYTHONPATH=scripts .venv/bin/python -m bench.ingest [--quick] [--objects N] [--rounds N]
        [--profile] [--write-doc]
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import DOCUMENT, Report, Table, emit, parser, write_section
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.collectors.flowlogs import FlowLogsCollector, http_fetch
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector, open_url
from checkpoint_runtime.collectors.sink import JsonLinesSink
from checkpoint_runtime.constants import (
    FLOWLOGS_REQUEST_TIMEOUT_SECONDS,
    OBJECTSTORE_CHUNK_OBJECTS,
    OBJECTSTORE_READ_THREADS,
)
from checkpoint_runtime.format.naming import CURSOR, rfc3339_ns
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import s3server
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane
from checkpoint_testenv.s3server import S3Server
from checkpoint_testenv.support.timing import rotated

LEASE = "bench-ingest"
COLLECTORS = (1, 10, 100)
GROUPS = 10
"""Objects live under feeds/g<group>/p<part>/: one collector reads feeds/, ten read one group
each, a hundred one part each; the same objects for every count."""
RATIO_TARGET = 0.5
FLOW_WINDOW_SECONDS = 1.0
FLOW_RECORDS_PER_WINDOW = 2
FLOW_T0 = datetime(2026, 1, 1, tzinfo=UTC)
DOC = DOCUMENT
SECTION = "ingest"
"""docs/benchmarks.md keeps this report between `<!-- ingest:start ... -->` and
`<!-- ingest:end -->` (all.py keeps such sections when it regenerates the document)."""


# -- the machine's CPU --------------------------------------------------------------------------


def _descendants_cpu() -> float:
    """CPU seconds (user + system) of every live process descending from this one."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        seconds[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    mine = {os.getpid()}
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in mine} - mine
        grew = bool(found)
        mine |= found
    mine.discard(os.getpid())
    return sum(seconds[pid] for pid in mine)


@dataclass
class Sample:
    """One run of one side: items done, wall seconds, this process's CPU, the servers' CPU."""

    items: int
    wall: float
    cpu: float
    servers_cpu: float


def measured(items: int, work: Callable[[], None]) -> Sample:
    servers, cpu, began = _descendants_cpu(), time.process_time(), time.perf_counter()
    work()
    wall = time.perf_counter() - began
    return Sample(items, wall, time.process_time() - cpu, _descendants_cpu() - servers)


def in_threads(calls: Sequence[Callable[[], Any]]) -> None:
    """Every call in a thread of its own, started together; raises the first failure."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> None:
        start.wait()
        try:
            call()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


# -- the object store ---------------------------------------------------------------------------


def object_names(objects: int) -> list[str]:
    """`objects` names spread evenly over GROUPS x GROUPS parts."""
    parts = GROUPS * GROUPS
    return [
        f"feeds/g{index % parts // GROUPS}/p{index % parts:02d}/obj-{index:06d}.json"
        for index in range(objects)
    ]


def object_body(name: str) -> bytes:
    """Two JSON lines, about the size of a small flow-log export."""
    first = {"object": name, "n": 1, "src": "100.64.0.1:41641", "dst": "100.64.0.2:443"}
    return (json.dumps(first) + "\n" + json.dumps({"n": 2, "bytes": 1234}) + "\n").encode()


def prefixes(collectors: int) -> list[str]:
    if collectors == 1:
        return ["feeds"]
    if collectors == GROUPS:
        return [f"feeds/g{group}" for group in range(GROUPS)]
    if collectors == GROUPS * GROUPS:
        return [f"feeds/g{part // GROUPS}/p{part:02d}" for part in range(GROUPS * GROUPS)]
    raise ValueError(f"collectors must be one of {COLLECTORS}, not {collectors}")


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ (s3fs reads credentials from it), restored afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Bench:
    """What every run uses: the servers, the bucket, a sink, the objects."""

    plane: ControlPlane
    s3: S3Server
    bucket: str
    objects: int
    sink: JsonLinesSink
    stores: list[Store] = field(default_factory=list)

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def new_store(self) -> Store:
        namespace = self.plane.create_namespace("bench-ingest")
        backend = KubernetesBackend(self.plane.configuration(), namespace, LEASE)
        store = Store.open(backend, writer="bench", epoch=1, deadline_seconds=120)
        self.stores.append(store)
        return store

    def close(self) -> None:
        for store in self.stores:
            store.backend.close()  # type: ignore[attr-defined]
        self.stores.clear()


def collectors_run(bench: Bench, count: int) -> Sample:
    """C object-store collectors, one first poll each, in threads of their own."""
    store = bench.new_store()
    feeds = [
        ObjectStoreCollector(
            store,
            bench.sink,
            feed=f"f{i:03d}",
            url=bench.url(prefix),
            endpoint_url=bench.s3.endpoint,
        )
        for i, prefix in enumerate(prefixes(count))
    ]
    in_threads([feed.list_objects for feed in feeds])  # warm: each client made, as in a runtime
    emitted: list[int] = []
    sample = measured(
        bench.objects, lambda: in_threads([lambda f=f: emitted.append(f.poll()) for f in feeds])
    )
    if sum(emitted) != 2 * bench.objects or store.dirty_shards():
        raise RuntimeError(
            f"{count} collectors emitted {sum(emitted)} records, want {2 * bench.objects}"
        )
    bench.close()
    return sample


def bare_scan(fs: Any, root: str) -> int:
    """What a first poll asks of the source, and nothing else: the listing, then every object
    read, 16 GETs in flight per chunk of 100, in name order. Objects read."""
    fs.invalidate_cache()
    found = fs.find(root, detail=True)
    paths = sorted(path for path, info in found.items() if info.get("type", "file") == "file")
    read = 0
    for start in range(0, len(paths), OBJECTSTORE_CHUNK_OBJECTS):
        chunk = paths[start : start + OBJECTSTORE_CHUNK_OBJECTS]
        with ThreadPoolExecutor(min(OBJECTSTORE_READ_THREADS, len(chunk))) as pool:
            read += sum(1 for _ in pool.map(lambda path: bytes(fs.cat_file(path)), chunk))
    return read


def bare_run(bench: Bench, count: int) -> Sample:
    sources = [open_url(bench.url(prefix), bench.s3.endpoint) for prefix in prefixes(count)]
    in_threads([lambda s=s: s[0].find(s[1]) for s in sources])  # warm, as the collectors are
    read: list[int] = []
    sample = measured(
        bench.objects,
        lambda: in_threads([lambda s=s: read.append(bare_scan(*s)) for s in sources]),
    )
    if sum(read) != bench.objects:
        raise RuntimeError(f"the bare loop read {sum(read)} objects, want {bench.objects}")
    return sample


def profile_collectors(bench: Bench, count: int = GROUPS) -> pstats.Stats:
    """cProfile of `count` collectors' first polls, each collector's thread profiled and the
    profiles merged (the GETs' pool threads are not profiled: their work is the bare loop's
    too). Sorted by own time: what the collectors themselves spend CPU on."""
    store = bench.new_store()
    feeds = [
        ObjectStoreCollector(
            store,
            bench.sink,
            feed=f"p{i:03d}",
            url=bench.url(prefix),
            endpoint_url=bench.s3.endpoint,
        )
        for i, prefix in enumerate(prefixes(count))
    ]
    in_threads([feed.list_objects for feed in feeds])
    profiles = [cProfile.Profile(time.thread_time) for _ in feeds]  # each thread's own CPU

    def poll(feed: ObjectStoreCollector, profile: cProfile.Profile) -> None:
        profile.enable()
        try:
            feed.poll()
        finally:
            profile.disable()

    in_threads([lambda f=f, p=p: poll(f, p) for f, p in zip(feeds, profiles, strict=True)])
    bench.close()
    stats = pstats.Stats(profiles[0], stream=io.StringIO())
    for profile in profiles[1:]:
        stats.add(profile)
    return stats


def profile_table(stats: pstats.Stats, objects: int, top: int = 12) -> Table:
    """The functions the collectors' own threads spent most CPU in (own time)."""
    entries = sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda item: item[1][2],
        reverse=True,
    )[:top]
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (path, line, function), (_, calls, own, cumulative, _) in entries:
        where = path.split("/site-packages/")[-1].split("/src/")[-1].split("/lib/python3")[-1]
        rows.append(
            [
                f"{function} ({where}:{line})",
                f"{calls:,}",
                f"{own:.3f}",
                f"{own / total:.1%}",
                f"{cumulative:.3f}",
            ]
        )
    return Table(
        f"Where 10 collectors' own threads spend their CPU (cProfile, first poll of {objects:,} "
        "objects)",
        ["function", "calls", "own s", "share of own time", "cumulative s"],
        rows,
        [
            "Each collector's polling thread profiled by its own CPU time (time.thread_time: "
            "waiting on the GETs, the API server or the GIL costs nothing), the profiles "
            "merged; the GETs run in each chunk's pool threads, which are not profiled (they "
            f"are the bare loop's work too). {total:.2f} CPU s in the collectors' threads in "
            "all."
        ],
    )


# -- flow logs ----------------------------------------------------------------------------------

FLOW_SERVER = """
import sys, datetime
from http.server import ThreadingHTTPServer
from checkpoint_testenv.flowlogs import FlowLogServer
ThreadingHTTPServer.request_queue_size = 1024  # 100 clients at once: no SYN retried after 1 s
t0, windows, per = datetime.datetime.fromisoformat(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
server = FlowLogServer()
for index in range(windows * per):
    server.add(t0 + datetime.timedelta(seconds=index / per), index)
print(server.url, flush=True)
sys.stdin.read()
server.close()
"""


@contextlib.contextmanager
def flow_server(windows: int) -> Iterator[str]:
    """A flow-log endpoint in a process of its own, holding FLOW_RECORDS_PER_WINDOW records
    per second from FLOW_T0 on for `windows` seconds; its URL."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FLOW_SERVER,
            FLOW_T0.isoformat(),
            str(windows),
            str(FLOW_RECORDS_PER_WINDOW),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


class Clock:
    """A collector's `now`: FLOW_T0, one window later at every call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> datetime:
        self.calls += 1
        return FLOW_T0 + timedelta(seconds=FLOW_WINDOW_SECONDS * self.calls)


def window_url(url: str, index: int) -> str:
    start = FLOW_T0 + timedelta(seconds=FLOW_WINDOW_SECONDS * index)
    end = start + timedelta(seconds=FLOW_WINDOW_SECONDS)
    query = urllib.parse.urlencode({"start": rfc3339_ns(start), "end": rfc3339_ns(end)})
    return f"{url}?{query}"


def flow_collectors_run(bench: Bench, url: str, count: int, windows: int) -> Sample:
    store = bench.new_store()
    feeds = []
    for index in range(count):
        collector = FlowLogsCollector(
            store,
            bench.sink,
            url=url,
            tailnet=f"t{index:03d}",
            poll_seconds=FLOW_WINDOW_SECONDS,
            now=Clock(),
        )
        store.set(f"{collector.namespace}/{CURSOR}", rfc3339_ns(FLOW_T0))
        feeds.append(collector)
    store.flush()
    emitted: list[int] = []

    def poll(feed: FlowLogsCollector) -> None:
        emitted.append(sum(feed.poll() for _ in range(windows)))

    sample = measured(count * windows, lambda: in_threads([lambda f=f: poll(f) for f in feeds]))
    want = count * windows * FLOW_RECORDS_PER_WINDOW
    if sum(emitted) != want or store.dirty_shards():
        raise RuntimeError(
            f"{count} flowlogs collectors emitted {sum(emitted)} records, want {want}"
        )
    bench.close()
    return sample


def flow_bare_run(url: str, count: int, windows: int) -> Sample:
    def fetch() -> None:
        for index in range(windows):
            json.loads(http_fetch(window_url(url, index), FLOWLOGS_REQUEST_TIMEOUT_SECONDS))

    return measured(count * windows, lambda: in_threads([fetch] * count))


# -- the runs -----------------------------------------------------------------------------------


Samples = dict[tuple[str, str, int], list[Sample]]
"""(source, side, collectors) -> one sample per round."""


@dataclass
class Measured:
    objects: int
    windows: int
    rounds: int
    counts: tuple[int, ...]
    samples: Samples
    upload_seconds: float
    profile: pstats.Stats | None = None
    load: tuple[float, float] = (0.0, 0.0)

    def median(self, key: tuple[str, str, int], what: Callable[[Sample], float]) -> float:
        return statistics.median(what(sample) for sample in self.samples[key])


def measure(
    plane: ControlPlane,
    s3: S3Server,
    objects: int,
    windows: int,
    rounds: int,
    counts: Sequence[int],
    profile: bool,
) -> Measured:
    load_before = os.getloadavg()[0]
    bucket = s3.create_bucket("bench-ingest")
    names = object_names(objects)
    print(f"bench-ingest: uploading {objects} objects", file=sys.stderr)
    began = time.perf_counter()
    s3.put_many(bucket, [(name, object_body(name)) for name in names])
    upload_seconds = time.perf_counter() - began
    samples: Samples = {}
    with contextlib.ExitStack() as stack:
        sink_fd = os.open(os.devnull, os.O_WRONLY)
        stack.callback(os.close, sink_fd)
        bench = Bench(plane, s3, bucket, objects, JsonLinesSink(sink_fd))
        url = stack.enter_context(flow_server(windows + 2))
        steps: list[tuple[str, str, int, Callable[[], Sample]]] = []
        for count in counts:
            steps += [
                ("s3", "collector", count, lambda c=count: collectors_run(bench, c)),
                ("s3", "bare", count, lambda c=count: bare_run(bench, c)),
                (
                    "flow",
                    "collector",
                    count,
                    lambda c=count: flow_collectors_run(bench, url, c, windows),
                ),
                ("flow", "bare", count, lambda c=count: flow_bare_run(url, c, windows)),
            ]
        for round_number in range(rounds):
            print(f"bench-ingest: round {round_number + 1}/{rounds}", file=sys.stderr)
            for source, side, count, step in rotated(steps, round_number):
                began = time.perf_counter()
                samples.setdefault((source, side, count), []).append(step())
                took = time.perf_counter() - began
                print(f"bench-ingest: {source} {side} x{count}: {took:.1f} s", file=sys.stderr)
        found = Measured(objects, windows, rounds, tuple(counts), samples, upload_seconds)
        if profile:
            found.profile = profile_collectors(bench)
    found.load = (load_before, os.getloadavg()[0])
    return found


# -- the report ---------------------------------------------------------------------------------


def _rate(sample: Sample) -> float:
    return sample.items / sample.wall


def _ratio(found: Measured, source: str, count: int) -> float:
    collector = found.median((source, "collector", count), _rate)
    return collector / found.median((source, "bare", count), _rate)


def saturation(found: Measured, source: str, side: str) -> str:
    """Where the rate stops growing with the collectors, and what was full then."""
    rates = [found.median((source, side, count), _rate) for count in found.counts]
    best = max(range(len(rates)), key=lambda i: rates[i])
    count = found.counts[best]
    own = found.median((source, side, count), lambda s: s.cpu / s.wall)
    servers = found.median((source, side, count), lambda s: s.servers_cpu / s.wall)
    cores = os.cpu_count() or 1
    what = (
        "this process near one core (the GIL)"
        if own >= 0.85
        else f"the machine's {cores} cores"
        if own + servers >= 0.85 * cores
        else "neither core budget"
    )
    return (
        f"{source} {side}: highest rate at {count} collector(s), {rates[best]:,.0f}/s, "
        f"with this process at {own:.2f} cores and the servers at {servers:.2f}: {what}"
    )


def table(found: Measured, source: str, unit: str) -> Table:
    rows = []
    for count in found.counts:
        for side in ("collector", "bare"):
            key = (source, side, count)
            rows.append(
                [
                    str(count),
                    "collectors" if side == "collector" else "bare loop (baseline)",
                    f"{found.samples[key][0].items:,}",
                    f"{found.median(key, lambda s: s.wall):.2f}",
                    f"{found.median(key, _rate):,.0f}",
                    f"{found.median(key, lambda s: s.cpu / s.items * 1000):.2f}",
                    f"{found.median(key, lambda s: s.cpu / s.wall):.2f}",
                    f"{found.median(key, lambda s: s.servers_cpu / s.items * 1000):.2f}",
                    f"{_ratio(found, source, count):.2f}" if side == "collector" else "",
                ]
            )
    title = (
        "Object-store ingestion: first poll from SeaweedFS, checkpointed on kube-apiserver"
        if source == "s3"
        else "Flow-log ingestion: windows polled, emitted and checkpointed on kube-apiserver"
    )
    return Table(
        title,
        [
            "collectors",
            "side",
            unit,
            "wall s",
            f"{unit}/s",
            f"process CPU ms / {unit[:-1]}",
            "process cores",
            f"servers' CPU ms / {unit[:-1]}",
            "collectors / bare",
        ],
        rows,
        [],
    )


def report(found: Measured) -> Report:
    s3 = table(found, "s3", "objects")
    s3.notes = [
        f"{found.objects:,} objects of two JSON lines (~150 B) under 100 prefixes; C collectors "
        "read 1, 10 or 100 disjoint prefixes of them, one thread each (the runner's), each one "
        f"first poll: list, {OBJECTSTORE_READ_THREADS} GETs in flight per chunk of "
        f"{OBJECTSTORE_CHUNK_OBJECTS}, parse, emit to a JSON-lines sink (/dev/null), one "
        "synchronous store.batch per chunk into a Store on the API server (one shard per "
        "collector, a new namespace per run). Bare loop: the same s3fs client (the collector's "
        "open_url) doing the same LIST and GETs in the same threads and pools, nothing else.",
        f"Medians of {found.rounds} round(s), every side and count once a round in rotating "
        "order. process CPU = this process (every thread); servers' CPU = every child process "
        "(SeaweedFS, and when this script started them kube-apiserver and etcd). "
        f"Target: collectors / bare >= {RATIO_TARGET}.",
        saturation(found, "s3", "collector") + "; " + saturation(found, "s3", "bare") + ".",
        f"upload: {found.upload_seconds:.1f} s with 8 threads; load average "
        f"{found.load[0]:.1f} before, {found.load[1]:.1f} after, on {os.cpu_count()} cores.",
    ]
    flow = table(found, "flow", "windows")
    flow.notes = [
        f"C flowlogs collectors (one tailnet each), {found.windows} windows of "
        f"{FLOW_WINDOW_SECONDS:g} s each, {FLOW_RECORDS_PER_WINDOW} records a window from one "
        "endpoint (checkpoint_testenv.flowlogs, in a process of its own): each poll GETs its "
        "window, emits, and checkpoints the cursor with a synchronous store.batch. Bare loop: "
        "the collector's http_fetch of the same windows and json.loads, in the same threads.",
        saturation(found, "flow", "collector") + "; " + saturation(found, "flow", "bare") + ".",
    ]
    targets_met = all(_ratio(found, "s3", c) >= RATIO_TARGET for c in found.counts)
    lines = [
        "collectors / bare (objects/s): "
        + ", ".join(f"{c}: {_ratio(found, 's3', c):.2f}" for c in found.counts)
        + f" (target >= {RATIO_TARGET}: {'met' if targets_met else 'missed'})"
    ]
    tables = [s3, flow]
    if found.profile is not None:
        tables.append(profile_table(found.profile, found.objects))
    return Report("Ingestion throughput of one replica", tables, lines=lines, measured=found)


def run(
    quick: bool = False,
    plane: ControlPlane | None = None,
    s3: S3Server | None = None,
    objects: int = 2000,
    rounds: int = 3,
    profile: bool = False,
) -> Report:
    """Ingestion throughput (100 objects, 1 and 10 collectors, one round with `quick`), on the
    given control plane and S3 server or ones of its own."""
    with contextlib.ExitStack() as stack:
        if plane is None:
            plane = stack.enter_context(running_control_plane())
        if s3 is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ingest-")))
            s3 = s3server.start_s3_server(s3server.locate() / "weed", folder / "s3")
            stack.callback(s3.stop)
        stack.enter_context(environment(s3.env()))
        if quick:
            found = measure(plane, s3, 100, 5, 1, COLLECTORS[:2], profile)
        else:
            found = measure(plane, s3, objects, 20, rounds, COLLECTORS, profile)
    return report(found)


def write_doc(found: Report, document: Path = DOC) -> None:
    """Replace (or append) this benchmark's section of docs/benchmarks.md with `found`."""
    write_section(
        found, SECTION, "Ingestion throughput of one replica (scripts/bench/ingest.py)", document
    )


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "100 objects, 1 and 10 collectors, one round")
    found.add_argument("--objects", type=int, default=2000)
    found.add_argument("--rounds", type=int, default=3)
    found.add_argument(
        "--profile", action="store_true", help="add a cProfile table of 10 collectors"
    )
    found.add_argument(
        "--write-doc", action="store_true", help="write its section of docs/benchmarks.md"
    )
    args = found.parse_args(argv)
    result = run(args.quick, objects=args.objects, rounds=args.rounds, profile=args.profile)
    if args.write_doc:
        write_doc(result)
    return emit(result, args)


if __name__ == "__main__":
    sys.exit(main())
