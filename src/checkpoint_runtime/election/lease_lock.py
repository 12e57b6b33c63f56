"""The Lease record leader election reads and writes, the lock protocol over it, and its
implementation on a `coordination.k8s.io/v1` Lease (client-go's `resourcelock/leaselock.go`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from checkpoint_runtime.constants import (
    ANNOTATION_BUCKETS,
    ANNOTATION_EPOCH_BASE,
    ANNOTATION_STORE_KEY,
)
from checkpoint_runtime.errors import ConfigError

if TYPE_CHECKING:
    from kubernetes import client

# The Kubernetes client is imported by KubernetesLeaseLock's methods, not here: the elector
# (and with it a runtime on the file store) imports this module without needing the client.


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes (client-go's LeaderElectionRecord)."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int
    epoch_base: int = 0
    """Added to lease_transitions to give the epoch (a Lease annotation; only ever raised)."""
    buckets: int = 1
    """The bucket layout the Lease records (`ANNOTATION_BUCKETS`: absent is 1, a value that is
    not a number of buckets 0, matching no layout). Read only: writes carry the annotation as
    last seen; only a create of a record with another layout than 1 writes it."""

    @property
    def epoch(self) -> int:
        return self.epoch_base + self.lease_transitions


class LeaseLock(Protocol):
    """Get/create/update of one Lease; any exception is a failed try for the elector."""

    identity: str
    uid: str
    """metadata.uid of the Lease object last read or written ("" before that)."""
    labels: Mapping[str, str]
    """metadata.labels of the Lease object last read or written (empty before that)."""
    store_key: str
    """The store key (`ANNOTATION_STORE_KEY`) the Lease last read or written carries, or the
    one given to `keep_store_key`; "" when neither. Every later create or update carries it."""

    def keep_store_key(self, key: str) -> None:
        """Carry `key` as the store key in every later create and update."""

    def describe(self) -> str: ...

    def get(self, timeout: float) -> LeaseRecord | None:
        """The current record, or None if the Lease does not exist."""

    def create(self, record: LeaseRecord, timeout: float) -> None: ...

    def update(self, record: LeaseRecord, timeout: float) -> None:
        """Replace the spec, guarded by the resourceVersion last seen by get/create/update."""


def wire_time(value: datetime) -> datetime:
    """A timestamp the client can send as a MicroTime.

    The client serialises datetimes with isoformat(), which drops the fraction when it is zero,
    and the API server's MicroTime parser (RFC 3339 with exactly six fraction digits) answers
    such a value with 400 Bad Request (checked on the real server). One microsecond more is
    far below the resolution anyone reads a renewTime at.
    """
    value = value.astimezone(UTC)
    return value if value.microsecond else value.replace(microsecond=1)


class KubernetesLeaseLock:
    """LeaseLock over CoordinationV1Api; sends the last seen resourceVersion on every update.

    The Lease it creates carries `labels` (the runtime passes the store's Lease labels,
    `naming.lease_labels`), and every update sets them, keeping any other label: a Lease created
    by an earlier release (no labels) or by someone else is labelled as the store's once one of
    its replicas holds it.
    """

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        from kubernetes import client

        if not identity:
            raise ConfigError("leaderElection", "lock identity is empty")
        if api.configuration.retries != 0:
            # urllib3's default Retry(3) re-sends a PUT whose answer was lost: the re-sent
            # renewal then fails 409 and hides that the first one committed.
            raise ConfigError(
                "leaderElection", "the Lease client must have configuration.retries = 0"
            )
        self._api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.uid = ""
        self.labels: Mapping[str, str] = {}
        self.store_key = ""
        self._own_labels = dict(labels or {})
        self._metadata: client.V1ObjectMeta | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def keep_store_key(self, key: str) -> None:
        self.store_key = key

    def _annotations(
        self, annotations: Mapping[str, str] | None, record: LeaseRecord
    ) -> dict[str, str]:
        """What a write sends: the annotations last seen, the epoch base, and the store key we
        know (kept across a Lease that was deleted meanwhile: its heads stay verifiable)."""
        merged = _with_base(annotations, record)
        if self.store_key:
            merged[ANNOTATION_STORE_KEY] = self.store_key
        return merged

    def get(self, timeout: float) -> LeaseRecord | None:
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=timeout
            )
        except ApiException as error:
            if error.status == 404:
                self._metadata = None
                self.uid = ""
                self.labels = {}
                return None
            raise
        self._remember(lease)
        return _record_of(lease.spec, lease.metadata.annotations if lease.metadata else None)

    def create(self, record: LeaseRecord, timeout: float) -> None:
        from kubernetes import client

        annotations = self._annotations(None, record)
        if record.buckets != 1:  # a store of several buckets records its layout on creation
            annotations[ANNOTATION_BUCKETS] = str(record.buckets)
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=client.V1ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                labels=dict(self._own_labels) or None,
                annotations=annotations,
            ),
            spec=_spec_of(record),
        )
        self._remember(
            self._api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
        )

    def update(self, record: LeaseRecord, timeout: float) -> None:
        from kubernetes import client

        if self._metadata is None or not self._metadata.resource_version:
            raise RuntimeError(f"lease {self.describe()}: update before get or create")
        # The resourceVersion is the guard: a recreated Lease of this name never has an old one.
        metadata = client.V1ObjectMeta(
            name=self._metadata.name,
            namespace=self._metadata.namespace,
            resource_version=self._metadata.resource_version,
            uid=self._metadata.uid,
            labels={**(self._metadata.labels or {}), **self._own_labels},
            annotations=self._annotations(self._metadata.annotations, record),
        )
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=metadata,
            spec=_spec_of(record),
        )
        self._remember(
            self._api.replace_namespaced_lease(
                self.name, self.namespace, body, _request_timeout=timeout
            )
        )

    def _remember(self, lease: client.V1Lease) -> None:
        """Keep what an update must carry: name, uid, resourceVersion, labels, annotations."""
        from kubernetes import client

        meta = lease.metadata
        if meta is None or not meta.resource_version:
            raise RuntimeError(f"lease {self.describe()}: the server returned no resourceVersion")
        self.uid = meta.uid or ""
        self.labels = dict(meta.labels or {})
        found = (meta.annotations or {}).get(ANNOTATION_STORE_KEY, "")
        if found:  # a Lease without one keeps the key we knew (ours, to be written back)
            self.store_key = found
        self._metadata = client.V1ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            resource_version=meta.resource_version,
            uid=meta.uid,
            labels=meta.labels,
            annotations=meta.annotations,
        )


def epoch_base_of(annotations: Mapping[str, str] | None) -> int:
    """The epoch base a Lease carries (0 when absent; a value that is not a whole number reads
    as 0, which can only lower our epoch, never let us pass a newer stamp)."""
    raw = (annotations or {}).get(ANNOTATION_EPOCH_BASE, "0")
    return int(raw) if raw.isascii() and raw.isdigit() else 0


def buckets_of(annotations: Mapping[str, str] | None) -> int:
    """The bucket layout a Lease records: 1 when absent, 0 when it is not a whole number."""
    raw = (annotations or {}).get(ANNOTATION_BUCKETS)
    if raw is None:
        return 1
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 3 else 0


def _with_base(annotations: Mapping[str, str] | None, record: LeaseRecord) -> dict[str, str]:
    merged = dict(annotations or {})
    if record.epoch_base or ANNOTATION_EPOCH_BASE in merged:
        merged[ANNOTATION_EPOCH_BASE] = str(record.epoch_base)
    return merged


def _record_of(
    spec: client.V1LeaseSpec | None, annotations: Mapping[str, str] | None = None
) -> LeaseRecord:
    base = epoch_base_of(annotations)
    layout = buckets_of(annotations)
    if spec is None:
        return LeaseRecord("", 0, None, None, 0, base, layout)
    return LeaseRecord(
        holder_identity=spec.holder_identity or "",
        lease_duration_seconds=int(spec.lease_duration_seconds or 0),
        acquire_time=spec.acquire_time,
        renew_time=spec.renew_time,
        lease_transitions=int(spec.lease_transitions or 0),
        epoch_base=base,
        buckets=layout,
    )


def _spec_of(record: LeaseRecord) -> client.V1LeaseSpec:
    from kubernetes import client

    return client.V1LeaseSpec(
        holder_identity=record.holder_identity,
        lease_duration_seconds=record.lease_duration_seconds,
        lease_transitions=record.lease_transitions,
        acquire_time=wire_time(record.acquire_time) if record.acquire_time else None,
        renew_time=wire_time(record.renew_time) if record.renew_time else None,
    )
