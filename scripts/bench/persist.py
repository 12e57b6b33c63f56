"""Persist-cost benchmark (measure 2) on a real kube-apiserver + etcd.

1. Latency of persisting one dirty 5000-row shard through the store (encode, guarded PUT,
   bookkeeping) versus a raw PUT of the same bytes (`replace_namespaced_config_map`, retries 0),
   interleaved in one process; the encode alone is timed beside them to explain the gap.
2. Bytes sent to the API per changed row, sharded versus the old single ConfigMap, at sizes the
   legacy form can still hold. Measured, not computed: a byte-counting TCP relay sits between
   the client and the API server (TLS bytes on the wire), and a wrapper on the client's urllib3
   pool records each request's HTTP body.
3. API writes per debounce window under steady updates (the Debouncer thread, real timing):
   never more than the dirty shards, none when nothing changed.

Without a ControlPlane argument, `run` starts its own (scripts/testenv/build.sh binaries).

    PYTHONPATH=scripts .venv/bin/python -m bench.persist [--quick]
"""

from __future__ import annotations

import base64
import contextlib
import copy
import gc
import selectors
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from bench.report import Report, Table, emit, parser
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import LEGACY_DATA_KEY, SHARD_DATA_KEY
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.naming import rfc3339_from_ns, shard_name
from checkpoint_runtime.format.reference_rows import (
    EPOCH_NS,
    Configuration,
    FeedWorkload,
)
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane
from checkpoint_testenv.support.timing import percentile, rotated, timed_ms

LEASE = "bench-checkpoints"
FEED = "tailnet-1/objectstore/feed-1"
ROWS_AT = 5000


# -- measuring instruments ----------------------------------------------------------------------


class ByteRelay:
    """A plain TCP relay to the API server that counts the (TLS) bytes in each direction.

    The client still verifies the server's certificate end to end (it is issued for
    127.0.0.1); the relay only sees ciphertext, so it measures what really crosses the wire.
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self.sent = 0
        """Bytes from the client to the API server."""
        self.received = 0
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="byte-relay", daemon=True).start()

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.sent, self.received

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            self._sockets += [downstream, upstream]
            threading.Thread(target=self._pump, args=(downstream, upstream), daemon=True).start()

    def _pump(self, downstream: socket.socket, upstream: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(downstream, selectors.EVENT_READ, (upstream, True))
        selector.register(upstream, selectors.EVENT_READ, (downstream, False))
        try:
            while True:
                for key, _ in selector.select():
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    target, upward = key.data
                    data = source.recv(65536)
                    if not data:
                        return
                    target.sendall(data)
                    with self._lock:
                        if upward:
                            self.sent += len(data)
                        else:
                            self.received += len(data)
        except OSError:
            return
        finally:
            selector.close()
            for sock in (downstream, upstream):
                with contextlib.suppress(OSError):
                    sock.close()


class RequestLog:
    """Wraps an ApiClient's urllib3 pool: every request's method and HTTP body size."""

    def __init__(self, api_client: Any) -> None:
        self._lock = threading.Lock()
        self.methods: Counter[str] = Counter()
        self.body_bytes = 0
        pool = api_client.rest_client.pool_manager
        original = pool.request

        def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            body = kwargs.get("body")
            with self._lock:
                self.methods[method] += 1
                self.body_bytes += len(body.encode() if isinstance(body, str) else body or b"")
            return original(method, url, *args, **kwargs)

        pool.request = request

    def writes(self) -> int:
        with self._lock:
            return self.methods["PUT"] + self.methods["POST"]

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.methods["PUT"] + self.methods["POST"], self.body_bytes


def _raw_client(plane: ControlPlane, host: str | None = None) -> client.ApiClient:
    configuration = copy.deepcopy(plane.configuration(host=host))
    configuration.retries = 0
    return client.ApiClient(configuration)


def _new_store(
    plane: ControlPlane, namespace: str, host: str | None = None, **options: Any
) -> Store:
    backend = KubernetesBackend(plane.configuration(host=host), namespace, LEASE)
    return Store.open(backend, writer="bench", epoch=1, deadline_seconds=120, **options)


# -- 1. latency -----------------------------------------------------------------------------------


@dataclass
class Latency:
    shape: str
    seen_rows: int
    samples: dict[str, list[float]]
    blob_bytes: int

    def p(self, what: str, fraction: float) -> float:
        return percentile(self.samples[what], fraction)

    def without_encode(self, fraction: float = 0.5) -> float:
        """Store time minus the encode of the same iteration: the write path alone."""
        paired = [s - e for s, e in zip(self.samples["store"], self.samples["encode"], strict=True)]
        return percentile(paired, fraction)


def measure_latency(plane: ControlPlane, shape: str, iterations: int, seen_rows: int) -> Latency:
    """Alternate (store persist, raw PUT, encode alone), rotating which goes first."""
    namespace = plane.create_namespace("bench-persist")
    store = _new_store(plane, namespace)
    rows = FeedWorkload(FEED, seen_rows, shape).rows
    store.batch(rows)
    seen = [key for key in rows if "/seen/" in key]
    core_admin = client.CoreV1Api(_raw_client(plane))
    stored = core_admin.read_namespaced_config_map(shard_name(LEASE, FEED), namespace)
    raw_name = "bench-raw-put"
    blob = codec.encode_shard(FEED, rows).blob
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(
            name=raw_name,
            labels={"bench": "raw-put"},
            annotations=dict(stored.metadata.annotations),
        ),
        binary_data={SHARD_DATA_KEY: base64.b64encode(blob).decode()},
    )
    raw_version = core_admin.create_namespaced_config_map(namespace, body).metadata.resource_version

    samples: dict[str, list[float]] = {"store": [], "raw": [], "encode": []}
    for iteration in range(iterations):
        value = rfc3339_from_ns(EPOCH_NS + 10**18 + iteration)
        store.set(seen[iteration % len(seen)], value)
        current = store.shard_states()[FEED].rows
        blob = codec.encode_shard(FEED, current).blob
        body.binary_data = {SHARD_DATA_KEY: base64.b64encode(blob).decode()}
        body.metadata.resource_version = raw_version
        answers: list[Any] = []

        def raw_put(body: Any = body, answers: list[Any] = answers) -> None:
            answers.append(core_admin.replace_namespaced_config_map(raw_name, namespace, body))

        steps: list[tuple[str, Callable[[], Any]]] = [
            ("store", store.flush),
            ("raw", raw_put),
            ("encode", lambda current=current: codec.encode_shard(FEED, current)),
        ]
        gc.collect()
        for name, call in rotated(steps, iteration):
            samples[name].append(timed_ms(call))
        raw_version = answers[0].metadata.resource_version
        if store.dirty_shards():
            raise RuntimeError("the store left the shard dirty")
    core_admin.api_client.close()
    store.backend.close()  # type: ignore[attr-defined]
    return Latency(shape, seen_rows, samples, len(blob))


# -- 2. bytes per changed row ---------------------------------------------------------------------


@dataclass
class BytesPerRow:
    label: str
    shards: int
    legacy_value_bytes: int
    changed_per_window: int
    windows: int
    sharded_wire: float
    legacy_wire: float
    sharded_body: float
    legacy_body: float
    sharded_received: float
    legacy_received: float


def _changes(rows: dict[str, str], count: int, window: int) -> dict[str, str]:
    seen = [key for key in rows if key.startswith(FEED + "/seen/")]
    return {
        seen[(window * count + offset) % len(seen)]: rfc3339_from_ns(EPOCH_NS + 10**18 + window)
        for offset in range(count)
    }


def measure_bytes(
    plane: ControlPlane, relay: ByteRelay, label: str, rows: dict[str, str], per: int, windows: int
) -> BytesPerRow:
    """Per window change `per` rows of one feed, persist; count what each form sends."""
    namespace = plane.create_namespace("bench-bytes")
    store = _new_store(plane, namespace, host=relay.host)
    store.batch(rows)
    log = RequestLog(store.backend.api_client)  # type: ignore[attr-defined]
    legacy_api = _raw_client(plane, host=relay.host)
    legacy_log = RequestLog(legacy_api)
    legacy_core = client.CoreV1Api(legacy_api)
    legacy_rows = dict(rows)
    value = encode_legacy(legacy_rows)
    legacy_body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="old-checkpoints"), data={LEGACY_DATA_KEY: value}
    )
    legacy = legacy_core.create_namespaced_config_map(namespace, legacy_body)

    totals = Counter[str]()
    for window in range(windows):
        changes = _changes(rows, per, window)
        for key, new in changes.items():
            store.set(key, new)
        sent, received = relay.snapshot()
        _, body = log.snapshot()
        store.flush()
        after_sent, after_received = relay.snapshot()
        totals["sharded_wire"] += after_sent - sent
        totals["sharded_received"] += after_received - received
        totals["sharded_body"] += log.snapshot()[1] - body

        legacy_rows.update(changes)
        legacy.data = {LEGACY_DATA_KEY: encode_legacy(legacy_rows)}
        sent, received = relay.snapshot()
        _, body = legacy_log.snapshot()
        legacy = legacy_core.replace_namespaced_config_map("old-checkpoints", namespace, legacy)
        after_sent, after_received = relay.snapshot()
        totals["legacy_wire"] += after_sent - sent
        totals["legacy_received"] += after_received - received
        totals["legacy_body"] += legacy_log.snapshot()[1] - body
    changed = per * windows
    legacy_api.close()
    store.backend.close()  # type: ignore[attr-defined]
    return BytesPerRow(
        label=label,
        shards=len(store.shard_states()),
        legacy_value_bytes=len(value),
        changed_per_window=per,
        windows=windows,
        **{name: totals[name] / changed for name in totals},
    )


# -- 3. writes per debounce window ----------------------------------------------------------------


@dataclass
class WindowCount:
    label: str
    shards: int
    updated_shards: int
    debounce_seconds: float
    windows: int = 0
    writes: int = 0
    max_writes: int = 0
    max_dirty: int = 0
    over_budget: int = 0
    """Windows that wrote more shards than the dirty set they persisted (must be 0)."""
    stray_writes: int = 0
    """Writes outside any debounced persist (must be 0)."""
    idle_seconds: float = 0.0
    idle_writes: int = 0
    updates: int = 0
    starts: list[float] = field(default_factory=list)
    """When each window's persist began (monotonic seconds)."""

    def interval(self, fraction: float) -> float:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        return percentile(gaps, fraction) if gaps else float("nan")


def _count_windows(store: Store, log: RequestLog, result: WindowCount) -> None:
    """Wrap the store's persist_due (and its budget's admit) to count each window's writes
    against the dirty set persist_due itself admitted."""
    persist_due, admit = store.persist_due, store.budget.admit
    window = threading.local()

    def recorded_admit(expected: Mapping[str, int]) -> list[str]:
        """The dirty set persist_due itself admitted, so the budget is exactly what it saw."""
        found = admit(expected)
        if getattr(window, "open", False):
            window.dirty = len(found)
        return found

    def counted_persist_due() -> bool:
        began = time.monotonic()
        window.open, window.dirty = True, 0
        before = log.writes()
        try:
            persisted = persist_due()
        finally:
            window.open = False
        wrote = log.writes() - before
        if persisted:
            result.starts.append(began)
            result.windows += 1
            result.writes += wrote
            result.max_writes = max(result.max_writes, wrote)
            result.max_dirty = max(result.max_dirty, window.dirty)
            result.over_budget += wrote > window.dirty
        return persisted

    store.budget.admit = recorded_admit  # type: ignore[method-assign]
    store.persist_due = counted_persist_due  # type: ignore[method-assign]


def _steady_updates(store: Store, targets: list[str], seconds: float) -> int:
    """A changed row in every target shard every 5 ms for `seconds`; rows changed."""
    started = time.monotonic()
    update = 0
    while time.monotonic() - started < seconds:
        for shard in targets:
            store.set(f"{shard}/seen/update-{update % 50}", rfc3339_from_ns(EPOCH_NS + update))
        update += 1
        time.sleep(0.005)
    return update * len(targets)


def measure_windows(
    plane: ControlPlane, label: str, updated: int, seconds: float, idle: float, seen_rows: int
) -> WindowCount:
    """Steady updates to `updated` of 4 shards; the real Debouncer persists."""
    debounce = 0.25
    namespace = plane.create_namespace("bench-debounce")
    store = _new_store(plane, namespace, debounce_seconds=debounce)
    rows = Configuration("bench", tailnets=1, feeds_per_tailnet=3).rows(seen_rows=seen_rows)
    store.batch(rows)
    log = RequestLog(store.backend.api_client)  # type: ignore[attr-defined]
    shards = sorted(store.shard_states())
    targets = [shard for shard in shards if "/objectstore/" in shard][:updated]
    result = WindowCount(label, len(shards), updated, debounce)
    _count_windows(store, log, result)
    errors: list[BaseException] = []
    debouncer = Debouncer(store, errors.append)
    debouncer.start()
    writes_at_start = log.writes()
    result.updates = _steady_updates(store, targets, seconds)
    deadline = time.monotonic() + 10 * debounce
    while store.dirty_shards() and time.monotonic() < deadline:
        time.sleep(debounce / 10)
    time.sleep(debounce)
    idle_from = log.writes()
    time.sleep(idle)
    result.idle_seconds = idle
    result.idle_writes = log.writes() - idle_from
    debouncer.stop()
    result.stray_writes = log.writes() - writes_at_start - result.writes
    store.backend.close()  # type: ignore[attr-defined]
    if errors:
        raise ExceptionGroup(
            "the debouncer failed", [e for e in errors if isinstance(e, Exception)]
        )
    return result


# -- the report -----------------------------------------------------------------------------------


@dataclass
class PersistMeasured:
    latency: list[Latency]
    bytes_per_row: list[BytesPerRow]
    windows: list[WindowCount]

    def overhead(self, shape: str, fraction: float = 0.5) -> float:
        latency = next(item for item in self.latency if item.shape == shape)
        return latency.p("store", fraction) / latency.p("raw", fraction)


def measure_all(plane: ControlPlane, quick: bool = False) -> PersistMeasured:
    # --quick: smoke sizes (a 500-row shard), so the smoke test stays fast; not figures.
    iterations, seen_rows = (3, 500) if quick else (150, ROWS_AT)
    shapes = ("uuid",) if quick else ("uuid", "old-design")
    latency = [measure_latency(plane, shape, iterations, seen_rows) for shape in shapes]
    relay = ByteRelay(plane.port)
    try:
        feeds_rows = 200 if quick else 2000
        sizes = [
            (f"one feed x {seen_rows} + flowlogs", Configuration("one", 1, 1).rows(seen_rows)),
            (
                f"three feeds x {feeds_rows} + flowlogs",
                Configuration("three", 1, 3).rows(feeds_rows),
            ),
        ]
        combos = [(label, rows, per) for label, rows in sizes for per in (1, 100)]
        bytes_per_row = [
            measure_bytes(plane, relay, label, rows, per, 2 if quick else 10)
            for label, rows, per in (combos[:1] if quick else combos)
        ]
    finally:
        relay.close()
    seconds, idle, window_rows = (0.8, 0.3, 200) if quick else (5.0, 2.0, 1000)
    windows_counts = [
        measure_windows(
            plane, f"{updated} of 4 shards updated", updated, seconds, idle, window_rows
        )
        for updated in ((1,) if quick else (1, 3))
    ]
    return PersistMeasured(latency, bytes_per_row, windows_counts)


def run(quick: bool = False, plane: ControlPlane | None = None) -> Report:
    """Persist cost on the real API server (one of its own without `plane`)."""
    if plane is None:
        with running_control_plane() as own:
            return run(quick, own)
    measured = measure_all(plane, quick)
    return Report("Persist cost", tables(measured), measured=measured)


LATENCY_NOTES = [
    "store = Store.flush() after one set(): the stored base plus a delta of the rows "
    "changed since (a new base past the compaction bound), RV-guarded replace, "
    "bookkeeping. raw PUT = replace_namespaced_config_map of a whole-shard blob "
    "(codec.encode_shard) and the store's annotations (retries=0, same Python client). "
    "encode = codec.encode_shard alone: what a new base (compaction) costs. The three "
    "alternate in one process, the order rotating per iteration.",
    "Overhead = store / raw PUT at the same percentile. (store - encode): per iteration, "
    "the store's time minus that iteration's encode alone - the guarded write path "
    "without the re-encode, against the raw PUT.",
]
BYTES_NOTES = [
    "wire = TLS bytes client -> API server counted by a TCP relay (HTTP headers, TLS "
    "framing included); body = HTTP request body bytes recorded at the client's urllib3 "
    "pool; recv = bytes back (the PUT answer echoes the whole object).",
    "Each write changes N rows of one feed; sharded persists only that feed's shard "
    "(Store.flush), legacy rewrites the whole map (the old release's encode_legacy).",
]
WINDOWS_NOTES = [
    "writes = PUT/POST requests the store's client sent (urllib3 pool wrapper). A window "
    "is one persist_due() that persisted; 'over budget' counts windows that wrote more "
    "shards than the dirty set it persisted; 'stray' counts writes outside windows.",
    "A window interval below the debounce means rows changed during a write were "
    "persisted by the next tick without waiting a full debounce: after a write the "
    "still-dirty shard keeps its dirty_since from before the write (store/core.py).",
]


def _overhead(item: Latency, fraction: float) -> str:
    return f"{item.p('store', fraction) / item.p('raw', fraction):.2f}x"


def latency_table(measured: PersistMeasured) -> Table:
    return Table.of(
        "Persist latency of one dirty shard vs a raw PUT of the same bytes (ms)",
        [
            ("workload", lambda item: item.shape),
            ("seen rows", lambda item: f"{item.seen_rows:,}"),
            ("samples", lambda item: str(len(item.samples["store"]))),
            ("shard bytes", lambda item: f"{item.blob_bytes:,}"),
            ("store p50", lambda item: f"{item.p('store', 0.5):.1f}"),
            ("store p99", lambda item: f"{item.p('store', 0.99):.1f}"),
            ("raw PUT p50", lambda item: f"{item.p('raw', 0.5):.1f}"),
            ("raw PUT p99", lambda item: f"{item.p('raw', 0.99):.1f}"),
            ("encode p50", lambda item: f"{item.p('encode', 0.5):.1f}"),
            ("overhead p50", lambda item: _overhead(item, 0.5)),
            ("overhead p99", lambda item: _overhead(item, 0.99)),
            (
                "(store - encode) / raw p50",
                lambda item: f"{item.without_encode() / item.p('raw', 0.5):.2f}x",
            ),
        ],
        measured.latency,
        LATENCY_NOTES,
    )


def bytes_table(measured: PersistMeasured) -> Table:
    return Table.of(
        "Bytes sent to the API per changed row: sharded vs the legacy single ConfigMap",
        [
            ("state", lambda item: item.label),
            ("shards", lambda item: str(item.shards)),
            ("legacy value bytes", lambda item: f"{item.legacy_value_bytes:,}"),
            ("rows changed / write", lambda item: str(item.changed_per_window)),
            ("sharded wire B/row", lambda item: f"{item.sharded_wire:,.0f}"),
            ("legacy wire B/row", lambda item: f"{item.legacy_wire:,.0f}"),
            ("legacy / sharded", lambda item: f"{item.legacy_wire / item.sharded_wire:.1f}x"),
            ("sharded body B/row", lambda item: f"{item.sharded_body:,.0f}"),
            ("legacy body B/row", lambda item: f"{item.legacy_body:,.0f}"),
            ("sharded recv B/row", lambda item: f"{item.sharded_received:,.0f}"),
            ("legacy recv B/row", lambda item: f"{item.legacy_received:,.0f}"),
        ],
        measured.bytes_per_row,
        BYTES_NOTES,
    )


def windows_table(measured: PersistMeasured) -> Table:
    return Table.of(
        "API writes per debounce window under steady updates (Debouncer thread, real server)",
        [
            ("scenario", lambda item: item.label),
            ("debounce s", lambda item: f"{item.debounce_seconds:g}"),
            ("updates", lambda item: f"{item.updates:,}"),
            ("windows", lambda item: str(item.windows)),
            (
                "window interval min / p50 s",
                lambda item: f"{item.interval(0.0):.3f} / {item.interval(0.5):.3f}",
            ),
            ("writes", lambda item: str(item.writes)),
            ("max writes / window", lambda item: str(item.max_writes)),
            ("max dirty shards", lambda item: str(item.max_dirty)),
            ("windows over budget", lambda item: str(item.over_budget)),
            ("stray writes", lambda item: str(item.stray_writes)),
            ("idle s", lambda item: f"{item.idle_seconds:g}"),
            ("writes while idle", lambda item: str(item.idle_writes)),
        ],
        measured.windows,
        WINDOWS_NOTES,
    )


def tables(measured: PersistMeasured) -> list[Table]:
    return [latency_table(measured), bytes_table(measured), windows_table(measured)]


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, "few iterations, one size").parse_args(argv)
    return emit(run(quick=args.quick), args)


if __name__ == "__main__":
    sys.exit(main())
