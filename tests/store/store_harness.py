"""Store harnesses, one per backend, so behavioural tests run on both (issue 4, acceptance 8).

The kubernetes harness talks to the real API server as the chart's ServiceAccount (the RBAC that
`helm install` created); only tampering and assertions about raw objects use the admin client.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.file import FileBackend, write_legacy_file
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import LEGACY_DATA_KEY, SHARD_DATA_KEY
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.store.core import Store

LEASE = "cr-checkpoint-runtime"
LEGACY = "old-checkpoints"


@dataclass
class RawObject:
    """A stored object as the backend holds it, bypassing every store check."""

    labels: dict[str, str]
    annotations: dict[str, str]
    blob: bytes


class Harness(Protocol):
    kind: str
    lease_name: str

    def backend(self, legacy_name: str | None = None) -> Backend: ...

    def raw(self, name: str) -> RawObject | None: ...

    def put_raw(self, name: str, obj: RawObject) -> None: ...

    def write_legacy(self, name: str, value: str) -> None: ...

    def legacy(self, name: str) -> tuple[str, dict[str, str]]: ...

    def object_names(self) -> list[str]: ...


def open_store(harness: Harness, writer: str = "leader-1", epoch: int = 1, **options: Any) -> Store:
    legacy_name = options.pop("legacy_name", None)
    return Store.open(harness.backend(legacy_name), writer=writer, epoch=epoch, **options)


def raw_shard(harness: Harness, shard: str) -> RawObject | None:
    return harness.raw(shard_name(harness.lease_name, shard))


@dataclass
class FileHarness:
    folder: Path
    kind: str = "file"
    lease_name: str = LEASE

    def backend(self, legacy_name: str | None = None) -> Backend:
        return FileBackend(self.folder, self.lease_name, legacy_name)

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.shard"

    def raw(self, name: str) -> RawObject | None:
        import json

        path = self._path(name)
        if not path.exists():
            return None
        header, _, blob = path.read_bytes().partition(b"\n")
        meta = json.loads(header)
        return RawObject(meta["labels"], meta["annotations"], blob)

    def put_raw(self, name: str, obj: RawObject) -> None:
        import json

        path = self._path(name)
        self.folder.mkdir(parents=True, exist_ok=True)
        version = "1"
        if path.exists():
            version = str(int(json.loads(path.read_bytes().partition(b"\n")[0])["version"]) + 1)
        header = {"labels": obj.labels, "annotations": obj.annotations, "version": version}
        path.write_bytes(json.dumps(header).encode() + b"\n" + obj.blob)

    def write_legacy(self, name: str, value: str) -> None:
        write_legacy_file(self.folder, name, value)

    def legacy(self, name: str) -> tuple[str, dict[str, str]]:
        import json

        document = json.loads((self.folder / f"{name}.legacy.json").read_text())
        return document["data"][LEGACY_DATA_KEY], document["annotations"]

    def object_names(self) -> list[str]:
        return sorted(p.name[: -len(".shard")] for p in self.folder.glob("*.shard"))


@dataclass
class KubeHarness:
    release: Any
    admin: client.CoreV1Api
    kind: str = "kubernetes"
    backends: list[KubernetesBackend] = field(default_factory=list)

    @property
    def lease_name(self) -> str:
        return str(self.release.lease_name)

    @property
    def namespace(self) -> str:
        return str(self.release.coordination_namespace)

    def backend(self, legacy_name: str | None = None, host: str | None = None) -> Backend:
        backend = KubernetesBackend(
            self.release.configuration(host=host), self.namespace, self.lease_name, legacy_name
        )
        self.backends.append(backend)
        return backend

    def raw(self, name: str) -> RawObject | None:
        try:
            item = self.admin.read_namespaced_config_map(name, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        blob = base64.b64decode((item.binary_data or {}).get(SHARD_DATA_KEY, ""))
        return RawObject(
            dict(item.metadata.labels or {}), dict(item.metadata.annotations or {}), blob
        )

    def put_raw(self, name: str, obj: RawObject) -> None:
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels=obj.labels, annotations=obj.annotations),
            binary_data={SHARD_DATA_KEY: base64.b64encode(obj.blob).decode()},
        )
        try:
            current = self.admin.read_namespaced_config_map(name, self.namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
            self.admin.create_namespaced_config_map(self.namespace, body)
            return
        body.metadata.resource_version = current.metadata.resource_version
        self.admin.replace_namespaced_config_map(name, self.namespace, body)

    def write_legacy(self, name: str, value: str) -> None:
        """What the old release does: one ConfigMap, one data entry; keeps other metadata."""
        try:
            current = self.admin.read_namespaced_config_map(name, self.namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
            body = client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name), data={LEGACY_DATA_KEY: value}
            )
            self.admin.create_namespaced_config_map(self.namespace, body)
            return
        current.data = {LEGACY_DATA_KEY: value}
        self.admin.replace_namespaced_config_map(name, self.namespace, current)

    def legacy(self, name: str) -> tuple[str, dict[str, str]]:
        item = self.admin.read_namespaced_config_map(name, self.namespace)
        return item.data[LEGACY_DATA_KEY], dict(item.metadata.annotations or {})

    def object_names(self) -> list[str]:
        items = self.admin.list_namespaced_config_map(self.namespace).items
        return sorted(
            i.metadata.name
            for i in items
            if (i.metadata.labels or {}).get("checkpoint-runtime.io/component")
        )
