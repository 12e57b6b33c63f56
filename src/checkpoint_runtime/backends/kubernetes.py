"""One ConfigMap per shard in the coordination namespace, and the gate that stops its writes while
etcd is full.

Rules this module enforces:
- its own ApiClient from a copy of the given Configuration with urllib3 retries forced to 0
  (`checkpoint_runtime.backends.apiclient`), because the default Retry(3) re-sends a PUT whose
  response was lost;
- every update carries the last observed resourceVersion; create only for a missing shard;
  409 Conflict and AlreadyExists are told apart by the Status body's `reason`;
- uncertain outcomes (5xx, 429, transport errors after sending) are resolved by reading the
  shard back and recognising our write id; an unchanged resourceVersion means nothing
  committed and the identical write is sent again after a pause (checkpoint_runtime.retry:
  jittered exponential backoff, Retry-After honoured); if the deadline runs out first,
  WriteUncertainError. 409, 422 and 413 are definitive and never retried;
- etcd's NOSPACE refusal (500 `etcdserver: mvcc: database space exceeded`) is definitive too:
  EtcdSpaceExceededError at once, no read-back, no re-send; the backend's EtcdSpaceGate then
  sends no write until its hold-off has passed (the last section, below);
- every request's timeout is bounded by the operation's remaining deadline.

The etcd-space gate: a full etcd is a definitive answer, so stop writing until it clears.

Past its space quota etcd refuses every write in the cluster (the API server answers 500 with
the message `etcdserver: mvcc: database space exceeded`), before the write is applied: nothing
was committed. Re-sending the write, or reading it back to find out, only adds load to a
cluster that already refuses everything, so the backend reports `EtcdSpaceExceededError` at
once and this gate stops its writes:

- after a refusal no write is sent for a hold-off (ETCD_SPACE_FIRST_HOLD_SECONDS, doubling
  after each further refusal up to ETCD_SPACE_MAX_HOLD_SECONDS); a write asked for meanwhile
  fails at once with the same error, without a request;
- once the hold-off has passed, the next write goes out as the probe (only one at a time:
  concurrent writes are refused until it has answered); if it commits, the gate clears and
  every shard writes again; if etcd refuses it, the next, longer hold-off starts.

So a store sends at most one write per hold-off while etcd is full, whatever its load. The
gauge `checkpoint_store_etcd_space_exceeded` is 1 while writes are stopped and the counter
`checkpoint_store_etcd_space_exceeded_total` counts refusals by etcd (not the writes the gate
refused without sending).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.constants import (
    ANNOTATION_LEASE,
    ANNOTATION_ROWS,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_SLOT,
    ANNOTATION_WRITE_ID,
    COMPONENT_SHARD,
    CONFIGMAP_VALUE_LIMIT,
    ETCD_NOSPACE_MESSAGE,
    ETCD_SPACE_FIRST_HOLD_SECONDS,
    ETCD_SPACE_MAX_HOLD_SECONDS,
    LABEL_COMPONENT,
    LEGACY_DATA_KEY,
    METRIC_ETCD_SPACE_EXCEEDED,
    SHARD_DATA_KEY,
)
from checkpoint_runtime.errors import (
    ApiRefusedError,
    ConflictError,
    CorruptShardError,
    DeadlineExceeded,
    EtcdSpaceExceededError,
    LegacyFormatError,
    OversizeError,
    WriteUncertainError,
)
from checkpoint_runtime.format.legacy import LegacyState, marked
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    Kinds,
    chunk_label_selector,
    label_selector,
    object_labels,
    object_name,
)
from checkpoint_runtime.retry import Backoff, Deadline

from .base import (
    ShardWrite,
    StoredShard,
    WriteResult,
    check_owned_object,
)

T = TypeVar("T")
DEFAULT_REQUEST_TIMEOUT = 10.0
LIST_PAGE = 10  # shards approach 1 MiB each: keep one page (and its decode) small
_TOO_LONG_MARKERS = ("Too long", "FieldValueTooLong", "must have at most")


@dataclass(frozen=True)
class ApiStatus:
    """The Status body of an API error answer, parsed once: HTTP code, reason, message."""

    code: int
    reason: str
    message: str

    @classmethod
    def of(cls, error: ApiException) -> ApiStatus:
        try:
            body = json.loads(error.body or "{}")
        except ValueError:
            body = {"message": str(error.body or "")[:200]}
        if not isinstance(body, dict):
            body = {}
        return cls(
            int(error.status or 0), str(body.get("reason") or ""), str(body.get("message") or "")
        )


def _is_uncertain(error: BaseException) -> bool:
    """Could the request have been processed although we got no definitive answer?"""
    if isinstance(error, urllib3.exceptions.HTTPError):
        return True
    if isinstance(error, ApiException):
        status = int(error.status or 0)
        if status == 500 and _is_space_exceeded(error):
            return False  # etcd refused it before applying it: definitely not committed
        return status == 0 or status == 429 or status >= 500
    return False


def _is_space_exceeded(error: ApiException) -> bool:
    status = ApiStatus.of(error)
    return is_etcd_space_exceeded(status.code, status.message)


def _definitive_answer(error: BaseException) -> ApiException | None:
    """The API's definitive answer carried by `error`, or None if the outcome is uncertain."""
    if isinstance(error, ApiException) and not _is_uncertain(error):
        return error
    return None


class KubernetesBackend:
    """Shards of the store `lease_name` as ConfigMaps in `namespace`."""

    def __init__(
        self,
        configuration: Any,
        namespace: str,
        lease_name: str,
        legacy_name: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        space: EtcdSpaceGate | None = None,
        kinds: Kinds = COLLECTOR_KINDS,
    ) -> None:
        self.api_client = api_client(configuration)  # a private copy, retries off
        self.core = client.CoreV1Api(self.api_client)
        self.namespace = namespace
        self.lease_name = lease_name
        self.kinds = kinds
        """The collector kinds whose shard keys the ownership checks admit."""
        self.legacy_name = legacy_name
        self.request_timeout = request_timeout
        self.space = space if space is not None else EtcdSpaceGate()
        """Stops this backend's writes while etcd's database is full."""

    def describe(self) -> str:
        return f"namespace {self.namespace} (store {self.lease_name})"

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]

    # -- plumbing ------------------------------------------------------------------------------

    def _timeout(self, deadline: Deadline, what: str) -> float:
        deadline.check(what)
        return deadline.timeout(self.request_timeout)

    def _read(self, call: Callable[[float], T], deadline: Deadline, what: str) -> T:
        """Run an idempotent read, retrying transient failures until the deadline."""
        backoff = Backoff()
        while True:
            try:
                return call(self._timeout(deadline, what))
            except (ApiException, urllib3.exceptions.HTTPError) as error:
                if not _is_uncertain(error):
                    raise
                last = error
            if not backoff.pause(deadline, last):
                raise DeadlineExceeded(f"{what}: still failing at the deadline: {last}")

    def _get(self, name: str, deadline: Deadline) -> Any | None:
        def call(timeout: float) -> Any:
            return self.core.read_namespaced_config_map(
                name, self.namespace, _request_timeout=timeout
            )

        try:
            return self._read(call, deadline, f"reading ConfigMap {name}")
        except ApiException as error:
            if error.status == 404:
                return None
            raise self._refused(f"reading ConfigMap {name}", error) from None

    def _refused(self, what: str, error: ApiException, shard: str | None = None) -> ApiRefusedError:
        status = ApiStatus.of(error)
        return ApiRefusedError(what, status.code, status.reason, status.message, shard)

    def _stored(
        self, item: Any, expected_shard: str | None = None, slot: str | None = None
    ) -> StoredShard:
        meta = item.metadata
        name, labels, annotations = meta.name, meta.labels or {}, meta.annotations or {}
        shard, slot = check_owned_object(
            self.lease_name, name, labels, annotations, expected_shard, slot, self.kinds
        )
        binary = item.binary_data or {}
        if item.data or set(binary) != {SHARD_DATA_KEY}:
            raise CorruptShardError(shard, f"expected exactly binaryData[{SHARD_DATA_KEY!r}]")
        try:
            blob = base64.b64decode(binary[SHARD_DATA_KEY], validate=True)
        except ValueError as error:
            raise CorruptShardError(shard, f"binaryData is not base64: {error}") from None
        return StoredShard(shard, name, blob, dict(meta.annotations), meta.resource_version, slot)

    # -- Backend -------------------------------------------------------------------------------

    def list_shards(self, deadline: Deadline) -> list[StoredShard]:
        return self._list(label_selector(self.lease_name), deadline, chunks=False)

    def list_slots(self, deadline: Deadline) -> list[StoredShard]:
        return self._list(chunk_label_selector(self.lease_name), deadline, chunks=True)

    def prefetch_slots(
        self, wanted: Mapping[tuple[str, str], str], deadline: Deadline
    ) -> dict[tuple[str, str], StoredShard]:
        """One paged list of the chunk slots (a GET per slot costs a round trip each). A slot
        not wanted at exactly its listed version (an inactive generation, a compaction since)
        is dropped with its page. A kept slot is the very object written at the version the
        manifest records (a resourceVersion names one write), checked as a read by name is."""
        found: dict[tuple[str, str], StoredShard] = {}
        selector = chunk_label_selector(self.lease_name)
        for item in self._pages(selector, deadline, "listing chunk slots"):
            meta = item.metadata
            annotations = meta.annotations or {}
            key = (annotations.get(ANNOTATION_SHARD_KEY, ""), annotations.get(ANNOTATION_SLOT, ""))
            if wanted.get(key) != meta.resource_version:
                continue
            found[key] = self._stored(item, key[0], key[1])
        return found

    def read_slot(self, shard: str, slot: str, deadline: Deadline) -> StoredShard | None:
        return self._read_object(shard, slot, deadline)

    def _read_object(self, shard: str, slot: str | None, deadline: Deadline) -> StoredShard | None:
        item = self._get(object_name(self.lease_name, shard, slot), deadline)
        return None if item is None else self._stored(item, shard, slot)

    def _pages(self, selector: str, deadline: Deadline, what: str) -> Iterator[Any]:
        """Every ConfigMap `selector` matches, a small page at a time."""
        token: str | None = None
        while True:

            def call(timeout: float, token: str | None = token) -> Any:
                return self.core.list_namespaced_config_map(
                    self.namespace,
                    label_selector=selector,
                    limit=LIST_PAGE,
                    _continue=token,
                    _request_timeout=timeout,
                )

            try:
                page = self._read(call, deadline, what)
            except ApiException as error:
                raise self._refused(what, error) from None
            yield from page.items
            token = page.metadata._continue
            if not token:
                return

    def _list(self, selector: str, deadline: Deadline, chunks: bool) -> list[StoredShard]:
        shards: list[StoredShard] = []
        for item in self._pages(selector, deadline, "listing shards"):
            slot = (item.metadata.annotations or {}).get(ANNOTATION_SLOT, "") if chunks else None
            shards.append(self._stored(item, None, slot))
        return shards

    def store_names(self, deadline: Deadline) -> list[str]:
        """The stores (Lease names) with shards in this namespace, for a "no store" message."""
        selector = f"{LABEL_COMPONENT}={COMPONENT_SHARD}"
        return sorted(
            {
                str((item.metadata.annotations or {}).get(ANNOTATION_LEASE, "?"))
                for item in self._pages(selector, deadline, "listing stores")
            }
        )

    def read_shard(self, shard: str, deadline: Deadline) -> StoredShard | None:
        return self._read_object(shard, None, deadline)

    def _body(self, write: ShardWrite, version: str | None) -> Any:
        """The ConfigMap one write sends (built once: a re-send sends the same body)."""
        return client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=object_name(self.lease_name, write.shard, write.slot),
                namespace=self.namespace,
                labels=object_labels(self.lease_name, write.slot),
                annotations=dict(write.annotations),
                resource_version=version,
            ),
            binary_data={SHARD_DATA_KEY: base64.b64encode(write.blob).decode("ascii")},
        )

    def _send(self, write: ShardWrite, body: Any, deadline: Deadline) -> str:
        """One create (no resourceVersion) or update; returns the new resourceVersion."""
        timeout = self._timeout(deadline, f"writing {write.what}")
        if body.metadata.resource_version is None:
            result = self.core.create_namespaced_config_map(
                self.namespace, body, _request_timeout=timeout
            )
        else:
            result = self.core.replace_namespaced_config_map(
                body.metadata.name, self.namespace, body, _request_timeout=timeout
            )
        return str(result.metadata.resource_version)  # type: ignore[union-attr]

    def _definitive(self, write: ShardWrite, body: Any, error: ApiException) -> Exception:
        status = ApiStatus.of(error)
        if is_etcd_space_exceeded(status.code, status.message):
            return self.space.refused(write.shard, status.message)
        if status.code == 409:
            exists = status.reason == "AlreadyExists"
            detail = "already exists" if exists else "resourceVersion changed"
            where = "" if write.slot is None else f"chunk slot {write.slot}: "
            return ConflictError(write.shard, f"{where}{detail} ({status.message})")
        too_long = any(marker in status.message for marker in _TOO_LONG_MARKERS)
        if status.code == 413 or (status.code == 422 and too_long):
            return self._server_oversize(write, body, error, status)
        if status.code == 404:
            return ConflictError(write.shard, "the shard was removed")
        return self._refused(f"writing {write.what}", error, write.shard)

    def _server_oversize(
        self, write: ShardWrite, body: Any, error: ApiException, status: ApiStatus
    ) -> OversizeError:
        """The server's own size refusal (413, or 422 too long): its message and limit, and the
        size of what it measured (the request body, the annotations or the values)."""
        message = status.message
        answer = f"{status.code} {status.reason or error.reason}: {message}"
        limits = re.findall(r"(?:more than|at most|limit is) (\d+)", message)
        limit = int(limits[-1]) if limits else CONFIGMAP_VALUE_LIMIT
        if status.code == 413:
            sent = self.api_client.sanitize_for_serialization(body)  # type: ignore[no-untyped-call]
            sent["metadata"].pop("resourceVersion", None)  # measured as a create's body
            measured, size = "the request body", len(json.dumps(sent).encode("utf-8"))
        elif "metadata.annotations" in message:
            measured = "the annotations"
            size = sum(len(k.encode()) + len(v.encode()) for k, v in write.annotations.items())
        else:
            measured, size = "the shard value", len(write.blob)
        rows = int(write.annotations.get(ANNOTATION_ROWS, 0))
        return OversizeError(
            write.shard, size, limit, rows, server_answer=answer, measured=measured
        )

    def _write(self, write: ShardWrite, version: str | None, deadline: Deadline) -> WriteResult:
        """One shard write, unless etcd's NOSPACE stopped writes (EtcdSpaceExceededError
        without a request); a commit tells the gate that etcd has space."""
        probe = self.space.admit(write.shard)
        try:
            result = self._write_once(write, self._body(write, version), deadline)
        finally:
            self.space.settled(probe)
        self.space.committed()
        return result

    def _write_once(self, write: ShardWrite, body: Any, deadline: Deadline) -> WriteResult:
        try:
            return WriteResult(self._send(write, body, deadline))
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            answer = _definitive_answer(error)
            if answer is not None:
                raise self._definitive(write, body, answer) from None
            first = error
        return self._resolve(write, body, deadline, first)

    def _resolve(
        self, write: ShardWrite, body: Any, deadline: Deadline, first: BaseException
    ) -> WriteResult:
        """Find out whether an uncertain write committed; re-send it while provably not."""
        name, version = body.metadata.name, body.metadata.resource_version
        last: BaseException = first
        backoff = Backoff()
        while backoff.pause(deadline, last):  # never re-send at once: the server is failing
            try:
                stored = self._get(name, deadline)
            except DeadlineExceeded:
                break
            except ApiRefusedError as refused:
                # The read was refused (e.g. a restarted server before its RBAC cache syncs);
                # the write's outcome is still unknown: keep asking until the deadline.
                last = refused
                continue
            if stored is not None:
                annotations = stored.metadata.annotations or {}
                if annotations.get(ANNOTATION_WRITE_ID) == write.write_id:
                    return WriteResult(str(stored.metadata.resource_version), True)
                if stored.metadata.resource_version != version:
                    state = "exists" if version is None else "changed"
                    raise ConflictError(write.shard, f"{state}, written by someone else")
            elif version is not None:
                raise ConflictError(write.shard, "the shard was removed")
            # Provably not committed (yet): send the identical write (same write id) again.
            try:
                return WriteResult(self._send(write, body, deadline), True)
            except DeadlineExceeded:
                break
            except (ApiException, urllib3.exceptions.HTTPError) as error:
                answer = _definitive_answer(error)
                if answer is not None and answer.status != 409:
                    raise self._definitive(write, body, answer) from None
                last = error  # 409 here may be our own earlier attempt: read back again
        raise WriteUncertainError(write.shard, f"unresolved at the deadline; last error: {last}")

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        return self._write(write, None, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        return self._write(write, version, deadline)

    # -- legacy --------------------------------------------------------------------------------

    def read_legacy(self, deadline: Deadline) -> LegacyState | None:
        if self.legacy_name is None:
            return None
        item = self._get(self.legacy_name, deadline)
        if item is None:
            return None
        value = (item.data or {}).get(LEGACY_DATA_KEY)
        if not isinstance(value, str):
            raise LegacyFormatError(self.legacy_name, f"no data entry {LEGACY_DATA_KEY!r}")
        return LegacyState(
            name=self.legacy_name,
            value=value,
            annotations=dict(item.metadata.annotations or {}),
            version=str(item.metadata.resource_version),
        )

    def mark_legacy(self, legacy: LegacyState, digest: str, deadline: Deadline) -> None:
        """Annotate the legacy object as migrated; its data goes back exactly as read."""
        backoff = Backoff()
        while True:
            item = self._get(legacy.name, deadline)
            if item is None:
                raise ConflictError(legacy.name, "legacy checkpoint disappeared")
            annotations = item.metadata.annotations or {}
            wanted = marked(annotations, digest, self.lease_name)
            if wanted == annotations:  # already marked, by this store too
                return
            if item.metadata.resource_version != legacy.version:
                raise ConflictError(legacy.name, "legacy checkpoint changed since it was read")
            item.metadata.annotations = wanted
            timeout = self._timeout(deadline, "marking the legacy checkpoint")
            try:
                self.core.replace_namespaced_config_map(
                    legacy.name, self.namespace, item, _request_timeout=timeout
                )
                return
            except (ApiException, urllib3.exceptions.HTTPError) as error:
                answer = _definitive_answer(error)
                if answer is not None and answer.status == 409:
                    raise ConflictError(legacy.name, "legacy checkpoint changed") from None
                if answer is not None and _is_space_exceeded(answer):
                    message = ApiStatus.of(answer).message
                    raise self.space.refused(legacy.name, message) from None
                if answer is not None:
                    raise self._refused("marking the legacy checkpoint", answer) from None
                last = error
            if not backoff.pause(deadline, last):
                raise WriteUncertainError(legacy.name, "marking the legacy checkpoint")


# -- the etcd-space gate ---------------------------------------------------------------------------


def is_etcd_space_exceeded(status: int, message: str) -> bool:
    """Is this API answer etcd's NOSPACE refusal (a 500 whose message names it)?"""
    return status == 500 and ETCD_NOSPACE_MESSAGE in message


class EtcdSpaceGate:
    """The stop-and-probe state of one backend's writes; thread-safe."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        first_hold: float = ETCD_SPACE_FIRST_HOLD_SECONDS,
        max_hold: float = ETCD_SPACE_MAX_HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first_hold = first_hold
        self.max_hold = max_hold
        self._clock = clock
        self._lock = threading.Lock()
        self._stopped = False
        self._hold = first_hold
        self._resume_at = 0.0
        self._probing = False
        self._detail = ""
        self.refusals = 0
        """Writes etcd refused for lack of space (the counter's value)."""
        if registry is not None:
            registry.register(_GateCollector(self))

    @property
    def stopped(self) -> bool:
        with self._lock:
            return self._stopped

    def resume_in(self) -> float:
        """Seconds until the next write may go out (0: now, or writes flow)."""
        with self._lock:
            return max(self._resume_at - self._clock(), 0.0) if self._stopped else 0.0

    def admit(self, shard: str) -> bool:
        """May a write of `shard` be sent now? True if it is the probe of a stopped gate,
        False if writes flow; raises EtcdSpaceExceededError if writes are stopped."""
        with self._lock:
            if not self._stopped:
                return False
            wait = self._resume_at - self._clock()
            if wait > 0 or self._probing:
                raise EtcdSpaceExceededError(
                    shard,
                    f"not sent: writes are stopped since etcd refused one ({self._detail})",
                    max(wait, 0.0) if not self._probing else self._hold,
                )
            self._probing = True
            return True

    def settled(self, probe: bool) -> None:
        """The write admitted by `admit` has an answer (whatever it was)."""
        if probe:
            with self._lock:
                self._probing = False

    def refused(self, shard: str, message: str) -> EtcdSpaceExceededError:
        """etcd refused a write of `shard`: stop writes for the next hold-off; the error."""
        with self._lock:
            self.refusals += 1
            hold = self._hold if self._stopped else self.first_hold
            self._stopped = True
            self._detail = message
            self._resume_at = self._clock() + hold
            self._hold = min(hold * 2, self.max_hold)
        return EtcdSpaceExceededError(shard, f"the API server answered 500: {message}", hold)

    def committed(self) -> None:
        """A write committed: etcd has space again, writes flow."""
        with self._lock:
            self._stopped = False
            self._hold = self.first_hold


class _GateCollector(Collector):
    """The gate's two series. They share a base name, so the count cannot be a counter: an
    OpenMetrics counter `x` exposes the sample `x_total` under the family name `x`, which the
    gauge already uses, and a scrape of that exposition fails. It is exported untyped under its
    full name: same sample name, valid in both exposition formats, `rate()` works as usual."""

    def __init__(self, gate: EtcdSpaceGate) -> None:
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        stopped = GaugeMetricFamily(
            METRIC_ETCD_SPACE_EXCEEDED,
            "1 while the store's writes are stopped because etcd's database is full (NOSPACE)",
        )
        stopped.add_metric([], 1.0 if self._gate.stopped else 0.0)
        yield stopped
        refusals = UnknownMetricFamily(
            f"{METRIC_ETCD_SPACE_EXCEEDED}_total",
            "Writes etcd refused because its database is full (NOSPACE); only grows",
        )
        refusals.add_metric([], float(self._gate.refusals))
        yield refusals
