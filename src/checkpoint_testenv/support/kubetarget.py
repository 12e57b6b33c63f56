"""One coordination namespace on the real API server, as the store under test and as a checker.

Stores talk to the namespace as the chart's ServiceAccount (optionally through another host, e.g.
the fault proxy), while the checker reads and tampers with what is really stored through the
admin client, independently of the store under test.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes import client

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.backends.kubernetes import DEFAULT_REQUEST_TIMEOUT, KubernetesBackend
from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_LEASE_UID,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
    LABEL_COMPONENT,
    LEGACY_DATA_KEY,
    SHARD_DATA_KEY,
)
from checkpoint_runtime.errors import CorruptShardError
from checkpoint_runtime.format import codec, codec_v3
from checkpoint_runtime.format.naming import chunk_slot_name, label_selector, shard_name
from checkpoint_testenv.support.v3rows import v3_rows

if TYPE_CHECKING:
    from checkpoint_testenv.helm import Release

_LEASES = itertools.count(1)


@dataclass
class RawObject:
    """A stored object as the backend holds it, bypassing every store check."""

    labels: dict[str, str]
    annotations: dict[str, str]
    blob: bytes


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
    lease_name: str = ""
    """The store `backend()` opens when no other lease is named (the release's)."""
    backends: list[KubernetesBackend] = field(default_factory=list)
    api_clients: list[client.ApiClient] = field(default_factory=list)

    @classmethod
    def of_release(cls, release: Release, admin: client.CoreV1Api) -> KubeTarget:
        """The release's coordination namespace, as its ServiceAccount, on its store."""
        return cls(
            release.configuration(), admin, release.coordination_namespace, release.lease_name
        )

    def fresh_lease(self, prefix: str = "rel") -> str:
        """A lease name no other trial used: its shards are a clean slate in this namespace."""
        return f"{prefix}-{os.getpid()}-{next(_LEASES)}"

    def backend(
        self,
        lease: str | None = None,
        *,
        host: str | None = None,
        legacy_name: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> KubernetesBackend:
        """A backend on store `lease` (default: this target's), closed by `close()`."""
        configuration = self.configuration
        if host is not None:
            configuration = copy.deepcopy(configuration)
            configuration.host = host
        backend = KubernetesBackend(
            configuration,
            self.namespace,
            lease if lease is not None else self.lease_name,
            legacy_name,
            request_timeout=request_timeout,
        )
        self.backends.append(backend)
        return backend

    # -- the checker's view (admin) ------------------------------------------------------------

    def stored(self, lease: str | None = None) -> dict[str, StoredState]:
        """Every shard of store `lease` as stored (admin read, decoded with the codec)."""
        items: list[Any] = self.admin.list_namespaced_config_map(
            self.namespace, label_selector=label_selector(lease or self.lease_name)
        ).items
        found: dict[str, StoredState] = {}
        for item in items:
            annotations = item.metadata.annotations or {}
            shard = annotations[ANNOTATION_SHARD_KEY]
            blob = base64.b64decode((item.binary_data or {})[SHARD_DATA_KEY])
            found[shard] = StoredState(
                rows=self.decode(shard, blob, lease or self.lease_name),
                epoch=int(annotations.get(ANNOTATION_EPOCH, "0")),
                writer=annotations.get(ANNOTATION_WRITER, ""),
                version=str(item.metadata.resource_version),
                lease=annotations.get(ANNOTATION_LEASE_UID, ""),
            )
        return found

    def decode(self, shard: str, blob: bytes, lease: str) -> dict[str, str]:
        """The rows of a stored head blob (v1, v2, or v3 with its chunks read by the admin
        client and checked against the manifest: the checker's own, independent reader)."""
        if not codec_v3.is_v3(shard, blob):
            return codec.decode_shard(shard, blob)
        head = codec_v3.decode_head(shard, blob)

        def checked_chunks() -> Iterator[bytes]:
            for index in range(head.manifest.partitions):
                slot = head.manifest.active_slot(index)
                raw = self.raw(chunk_slot_name(shard_name(lease, shard), slot[0], int(slot[1:])))
                if raw is None or codec_v3.digest(raw.blob) != head.manifest.slots[slot].digest:
                    raise CorruptShardError(shard, f"checker: active chunk {slot} != manifest")
                yield raw.blob

        return v3_rows(shard, head, checked_chunks())

    def raw(self, name: str) -> RawObject | None:
        """ConfigMap `name` as stored, undecoded; None if there is none."""
        item = self._read(name)
        if item is None:
            return None
        blob = base64.b64decode((item.binary_data or {}).get(SHARD_DATA_KEY, ""))
        return RawObject(
            dict(item.metadata.labels or {}), dict(item.metadata.annotations or {}), blob
        )

    def put_raw(self, name: str, obj: RawObject) -> None:
        """Create or replace ConfigMap `name` with exactly `obj` (tampering)."""
        metadata = client.V1ObjectMeta(name=name, labels=obj.labels, annotations=obj.annotations)
        body = client.V1ConfigMap(
            metadata=metadata, binary_data={SHARD_DATA_KEY: base64.b64encode(obj.blob).decode()}
        )
        current = self._read(name)
        if current is None:
            self.admin.create_namespaced_config_map(self.namespace, body)
            return
        metadata.resource_version = current.metadata.resource_version
        self.admin.replace_namespaced_config_map(name, self.namespace, body)

    def write_legacy(self, name: str, value: str) -> None:
        """What the old release does: one ConfigMap, one data entry; keeps other metadata."""
        current = self._read(name)
        if current is None:
            body = client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name), data={LEGACY_DATA_KEY: value}
            )
            self.admin.create_namespaced_config_map(self.namespace, body)
            return
        current.data = {LEGACY_DATA_KEY: value}
        self.admin.replace_namespaced_config_map(name, self.namespace, current)

    def legacy(self, name: str) -> tuple[str, dict[str, str]]:
        """The legacy ConfigMap's document and annotations."""
        item: Any = self.admin.read_namespaced_config_map(name, self.namespace)
        return item.data[LEGACY_DATA_KEY], dict(item.metadata.annotations or {})

    def object_names(self) -> list[str]:
        """Names of every store object (shards of any lease) in the namespace."""
        items: list[Any] = self.admin.list_namespaced_config_map(self.namespace).items
        return sorted(
            i.metadata.name for i in items if (i.metadata.labels or {}).get(LABEL_COMPONENT)
        )

    # -- Leases (admin) -------------------------------------------------------------------------

    def lease_client(self) -> client.ApiClient:
        """An admin client for Lease locks (retries 0, as the elector requires). Trials use
        fresh Lease names, which the chart's Role (pinned to its own Lease) does not grant."""
        api = api_client(self.admin.api_client.configuration)
        self.api_clients.append(api)
        return api

    def released_lease(self, name: str, transitions: int) -> None:
        """Write Lease `name` as admin, released (no holder) after `transitions` transitions:
        created, or its spec replaced if it exists."""
        now = dt.datetime.now(dt.UTC).replace(microsecond=1)
        spec = client.V1LeaseSpec(
            holder_identity="",
            lease_duration_seconds=1,
            lease_transitions=transitions,
            acquire_time=now,
            renew_time=now,
        )
        leases = client.CoordinationV1Api(self.admin.api_client)
        body = client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=spec)
        try:
            leases.create_namespaced_lease(self.namespace, body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            current: Any = leases.read_namespaced_lease(name, self.namespace)
            current.spec = spec
            leases.replace_namespaced_lease(name, self.namespace, current)

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

    def lease_holder(self, name: str) -> str | None:
        """The holder of Lease `name` (admin read; "" if released); None if there is none."""
        try:
            lease: Any = client.CoordinationV1Api(self.admin.api_client).read_namespaced_lease(
                name, self.namespace
            )
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return str(lease.spec.holder_identity or "")

    def _read(self, name: str) -> Any:
        """ConfigMap `name` (admin read); None if there is none."""
        try:
            return self.admin.read_namespaced_config_map(name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def close(self) -> None:
        """Close every backend and Lease client made so far; the target stays usable."""
        for backend in self.backends:
            with contextlib.suppress(Exception):
                backend.close()
        self.backends.clear()
        for api in self.api_clients:
            with contextlib.suppress(Exception):
                api.close()  # type: ignore[no-untyped-call]
        self.api_clients.clear()
