"""Shared plumbing of the reliability campaign (tests and scripts/soak.py).

A `KubeTarget` is one coordination namespace on the real API server: stores talk to it as the
chart's ServiceAccount (optionally through a fault proxy), while the checker reads what is
really stored with the admin client, independently of the store under test.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import itertools
import os
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from checkpoint_runtime.backends.base import Backend, ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_LEASE_UID,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
    SHARD_DATA_KEY,
)
from checkpoint_runtime.deadline import Deadline
from checkpoint_runtime.errors import CheckpointError
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.legacy import LegacyState
from checkpoint_runtime.format.naming import label_selector

_LEASES = itertools.count(1)


@dataclass(frozen=True)
class StoredState:
    """One shard as the API server holds it, decoded by the checker."""

    rows: dict[str, str]
    epoch: int
    writer: str
    version: str
    lease: str = ""
    """The uid of the Lease object the writer's epoch belongs to ("" if not stamped)."""


@dataclass
class KubeTarget:
    """A namespace, the identity stores use there, and an admin view for the checker."""

    configuration: Any
    """Configuration as the chart's ServiceAccount (retries are forced to 0 by the backend)."""
    admin: client.CoreV1Api
    namespace: str
    backends: list[KubernetesBackend] = field(default_factory=list)
    api_clients: list[client.ApiClient] = field(default_factory=list)

    def fresh_lease(self, prefix: str = "rel") -> str:
        """A lease name no other trial used: its shards are a clean slate in this namespace."""
        return f"{prefix}-{os.getpid()}-{next(_LEASES)}"

    def backend(
        self,
        lease: str,
        *,
        host: str | None = None,
        legacy_name: str | None = None,
        request_timeout: float = 10.0,
    ) -> KubernetesBackend:
        configuration = self.configuration
        if host is not None:
            configuration = _with_host(configuration, host)
        backend = KubernetesBackend(
            configuration, self.namespace, lease, legacy_name, request_timeout=request_timeout
        )
        self.backends.append(backend)
        return backend

    def stored(self, lease: str) -> dict[str, StoredState]:
        """Every shard of store `lease` as stored (admin read, decoded with the codec)."""
        items = self.admin.list_namespaced_config_map(
            self.namespace, label_selector=label_selector(lease)
        ).items
        found: dict[str, StoredState] = {}
        for item in items:
            annotations = item.metadata.annotations or {}
            shard = annotations[ANNOTATION_SHARD_KEY]
            blob = base64.b64decode((item.binary_data or {})[SHARD_DATA_KEY])
            found[shard] = StoredState(
                rows=codec.decode_shard(shard, blob),
                epoch=int(annotations.get(ANNOTATION_EPOCH, "0")),
                writer=annotations.get(ANNOTATION_WRITER, ""),
                version=str(item.metadata.resource_version),
                lease=annotations.get(ANNOTATION_LEASE_UID, ""),
            )
        return found

    def lease_client(self) -> client.ApiClient:
        """An admin client for Lease locks (retries 0, as the elector requires). Trials use
        fresh Lease names, which the chart's Role (pinned to its own Lease) does not grant."""
        configuration = copy.copy(self.admin.api_client.configuration)
        configuration.retries = 0
        api = client.ApiClient(configuration)
        self.api_clients.append(api)
        return api

    def released_lease(self, name: str, transitions: int) -> None:
        """Create Lease `name` as admin, released (no holder) after `transitions` transitions."""
        now = dt.datetime.now(dt.UTC).replace(microsecond=1)
        spec = client.V1LeaseSpec(
            holder_identity="",
            lease_duration_seconds=1,
            lease_transitions=transitions,
            acquire_time=now,
            renew_time=now,
        )
        body = client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=spec)
        client.CoordinationV1Api(self.admin.api_client).create_namespaced_lease(
            self.namespace, body
        )

    def delete_lease(self, name: str) -> bool:
        """Delete Lease `name` as admin; False if there was none."""
        try:
            client.CoordinationV1Api(self.admin.api_client).delete_namespaced_lease(
                name, self.namespace
            )
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def close(self) -> None:
        for backend in self.backends:
            with contextlib.suppress(Exception):
                backend.close()
        self.backends.clear()
        for api in self.api_clients:
            with contextlib.suppress(Exception):
                api.close()  # type: ignore[no-untyped-call]
        self.api_clients.clear()


def _with_host(configuration: Any, host: str) -> Any:

    other = copy.deepcopy(configuration)
    other.host = host
    return other


@dataclass
class CountingBackend:
    """Wraps a backend and records every write-side call (open must make none)."""

    inner: Backend
    writes: list[str] = field(default_factory=list)

    @property
    def lease_name(self) -> str:
        return self.inner.lease_name

    def describe(self) -> str:
        return self.inner.describe()

    def list_shards(self, deadline: Deadline) -> list[StoredShard]:
        return self.inner.list_shards(deadline)

    def read_shard(self, shard: str, deadline: Deadline) -> StoredShard | None:
        return self.inner.read_shard(shard, deadline)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self.writes.append(f"create {write.shard}")
        return self.inner.create_shard(write, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self.writes.append(f"update {write.shard}")
        return self.inner.update_shard(write, version, deadline)

    def read_legacy(self, deadline: Deadline) -> LegacyState | None:
        return self.inner.read_legacy(deadline)

    def mark_legacy(self, legacy: LegacyState, digest: str, deadline: Deadline) -> None:
        self.writes.append(f"mark {legacy.name}")
        self.inner.mark_legacy(legacy, digest, deadline)


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The leaves of a (possibly nested) ExceptionGroup, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


def is_named(error: BaseException) -> bool:
    """A surfaced error the store raises on purpose (the exported types of errors.py)."""
    return all(isinstance(leaf, CheckpointError) for leaf in leaf_errors(error))


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc), for memory-stability samples."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")
