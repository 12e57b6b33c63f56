"""Store harnesses, one per backend, so behavioural tests run on both (issue 4, acceptance 8).

The kubernetes harness talks to the real API server as the chart's ServiceAccount (the RBAC that
`helm install` created); only tampering and assertions about raw objects use the admin client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from kubernetes import client

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.file import FileBackend, write_legacy_file
from checkpoint_runtime.constants import LEGACY_DATA_KEY
from checkpoint_runtime.errors import OversizeError
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.kubetarget import KubeTarget, RawObject

LEASE = "cr-checkpoint-runtime"
LEGACY = "old-checkpoints"


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


class KubeHarness:
    """The store harness on the real API server: a `KubeTarget` on a chart release's store."""

    kind = "kubernetes"

    def __init__(self, release: Release, admin: client.CoreV1Api) -> None:
        self.release = release
        self.target = KubeTarget.of_release(release, admin)

    @property
    def lease_name(self) -> str:
        return self.target.lease_name

    @property
    def namespace(self) -> str:
        return self.target.namespace

    @property
    def admin(self) -> client.CoreV1Api:
        return self.target.admin

    def backend(self, legacy_name: str | None = None, host: str | None = None) -> Backend:
        return self.target.backend(host=host, legacy_name=legacy_name)

    def raw(self, name: str) -> RawObject | None:
        return self.target.raw(name)

    def put_raw(self, name: str, obj: RawObject) -> None:
        self.target.put_raw(name, obj)

    def write_legacy(self, name: str, value: str) -> None:
        self.target.write_legacy(name, value)

    def legacy(self, name: str) -> tuple[str, dict[str, str]]:
        return self.target.legacy(name)

    def object_names(self) -> list[str]:
        return self.target.object_names()

    def close(self) -> None:
        self.target.close()


OVERSIZE_ROWS = 60_000
"""UUID-named seen rows that cannot fit one object (about 21 compressed bytes each as a row
block: over 1 MiB), so a store allowed one chunk slot (maxChunks 1) must refuse them."""


def refused_oversize(store: Store, rows: Mapping[str, str]) -> OversizeError:
    """Set `rows` and flush: the flush must fail with exactly one OversizeError, returned."""
    for key, value in rows.items():
        store.set(key, value)
    with pytest.raises(ExceptionGroup) as raised:
        store.flush()
    (error,) = raised.value.exceptions
    assert isinstance(error, OversizeError)
    return error
