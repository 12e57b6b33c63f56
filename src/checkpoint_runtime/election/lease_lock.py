"""The Lease record leader election reads and writes, the lock protocol over it, and its
implementation on a `coordination.k8s.io/v1` Lease (client-go's `resourcelock/leaselock.go`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.errors import ConfigError


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes (client-go's LeaderElectionRecord)."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int


class LeaseLock(Protocol):
    """Get/create/update of one Lease; any exception is a failed try for the elector."""

    identity: str

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
    """LeaseLock over CoordinationV1Api; sends the last seen resourceVersion on every update."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str) -> None:
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
        self._metadata: client.V1ObjectMeta | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def get(self, timeout: float) -> LeaseRecord | None:
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=timeout
            )
        except ApiException as error:
            if error.status == 404:
                self._metadata = None
                return None
            raise
        self._remember(lease)
        return _record_of(lease.spec)

    def create(self, record: LeaseRecord, timeout: float) -> None:
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=_spec_of(record),
        )
        self._remember(
            self._api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
        )

    def update(self, record: LeaseRecord, timeout: float) -> None:
        if self._metadata is None or not self._metadata.resource_version:
            raise RuntimeError(f"lease {self.describe()}: update before get or create")
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=self._metadata,
            spec=_spec_of(record),
        )
        self._remember(
            self._api.replace_namespaced_lease(
                self.name, self.namespace, body, _request_timeout=timeout
            )
        )

    def _remember(self, lease: client.V1Lease) -> None:
        """Keep what an update must carry: name, resourceVersion, labels and annotations."""
        meta = lease.metadata
        if meta is None or not meta.resource_version:
            raise RuntimeError(f"lease {self.describe()}: the server returned no resourceVersion")
        self._metadata = client.V1ObjectMeta(
            name=meta.name,
            namespace=meta.namespace,
            resource_version=meta.resource_version,
            labels=meta.labels,
            annotations=meta.annotations,
        )


def _record_of(spec: client.V1LeaseSpec | None) -> LeaseRecord:
    if spec is None:
        return LeaseRecord("", 0, None, None, 0)
    return LeaseRecord(
        holder_identity=spec.holder_identity or "",
        lease_duration_seconds=int(spec.lease_duration_seconds or 0),
        acquire_time=spec.acquire_time,
        renew_time=spec.renew_time,
        lease_transitions=int(spec.lease_transitions or 0),
    )


def _spec_of(record: LeaseRecord) -> client.V1LeaseSpec:
    return client.V1LeaseSpec(
        holder_identity=record.holder_identity,
        lease_duration_seconds=record.lease_duration_seconds,
        lease_transitions=record.lease_transitions,
        acquire_time=wire_time(record.acquire_time) if record.acquire_time else None,
        renew_time=wire_time(record.renew_time) if record.renew_time else None,
    )
