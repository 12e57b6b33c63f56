"""The embedded default backend: the shard codec on a local folder.

Each shard is one file `<shard name>.shard`: a JSON header line (labels, annotations, version)
then the gzip blob, exactly what the ConfigMap would hold. Writes go to a temp file, are fsynced,
renamed over the old file and the folder is fsynced, so a crash leaves the old or the new shard,
never a torn one. An flock on `.lock` serialises processes; each write is a compare-and-swap on
the version, so conflicts behave as they do against the API server.

Opened read-only (`inspect`), it creates nothing: not the folder, not the lock file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from checkpoint_runtime.constants import (
    ANNOTATION_LEASE,
    ANNOTATION_SLOT,
    COMPONENT_SHARD,
    LABEL_COMPONENT,
    LEGACY_DATA_KEY,
)
from checkpoint_runtime.errors import (
    CheckpointError,
    ConflictError,
    NoStoreError,
    StorePathError,
    UnreadableShardError,
)
from checkpoint_runtime.format.legacy import LegacyState, marked
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    Kinds,
    chunk_labels,
    object_labels,
    object_name,
    shard_labels,
    shard_name,
)
from checkpoint_runtime.retry import Deadline

from .base import (
    ShardWrite,
    StoredShard,
    WriteResult,
    check_owned_object,
)

SHARD_SUFFIX = ".shard"
LEGACY_SUFFIX = ".legacy.json"
LOCK_NAME = ".lock"
SET_ASIDE_SUFFIX = ".set-aside"
MAX_HEADER_BYTES = 65_536


class FileBackend:
    """Shards of the store `lease_name` in `folder`; the legacy object is `<legacy>.legacy.json`."""

    def __init__(
        self,
        folder: Path | str,
        lease_name: str,
        legacy_name: str | None = None,
        *,
        read_only: bool = False,
        kinds: Kinds = COLLECTOR_KINDS,
    ) -> None:
        self.folder = Path(folder)
        self.lease_name = lease_name
        self.kinds = kinds
        """The collector kinds whose shard keys the ownership checks admit."""
        self.legacy_name = legacy_name
        self.read_only = read_only
        if read_only:
            if not self.folder.exists():
                raise NoStoreError(str(folder), "the folder does not exist")
            if not self.folder.is_dir():
                raise NoStoreError(str(folder), "it is not a folder")
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StorePathError("store.path", str(folder), "exists and is not a folder") from None
        except OSError as error:
            raise StorePathError("store.path", str(folder), error.strerror or str(error)) from None
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise StorePathError(
                "store.path", str(folder), f"is not writable by this user (uid {os.getuid()})"
            )

    def describe(self) -> str:
        return f"file store {self.folder} (store {self.lease_name})"

    def close(self) -> None:
        """Nothing to release: every operation opens and closes its own files."""

    @contextlib.contextmanager
    def _locked(self, deadline: Deadline) -> Iterator[None]:
        """Hold the folder lock, polling so that the shared deadline still bounds the wait.

        Read-only: a shared lock if a writer ever made the lock file, else none (no writer)."""
        path = self.folder / LOCK_NAME
        if self.read_only and not path.exists():
            yield
            return
        mode = fcntl.LOCK_SH if self.read_only else fcntl.LOCK_EX
        with open(path, "rb" if self.read_only else "a+b") as lock:
            while True:
                try:
                    fcntl.flock(lock, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    deadline.check(f"locking {self.folder}")
                    time.sleep(min(0.01, deadline.remaining()))
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _path(self, shard: str, slot: str | None = None) -> Path:
        return self.folder / (object_name(self.lease_name, shard, slot) + SHARD_SUFFIX)

    def set_aside_hint(self, name: str) -> str:
        """The command that moves an unreadable shard object out of the store's way."""
        return (
            f"Set it aside (it is kept, renamed) with `checkpoint-runtime set-aside --path "
            f"{self.folder} --object {name}`, then restart"
        )

    def _unreadable(self, path: Path, reason: str) -> UnreadableShardError:
        name = path.name[: -len(SHARD_SUFFIX)]
        return UnreadableShardError(f"{self.folder}/{path.name}", reason, self.set_aside_hint(name))

    def _read_file(
        self, path: Path, expected_shard: str | None = None, slot: str | None = None
    ) -> StoredShard:
        data = path.read_bytes()
        header_line, sep, blob = data.partition(b"\n")
        name = path.name[: -len(SHARD_SUFFIX)]
        try:
            header = json.loads(header_line)
            labels, annotations, version = (
                header["labels"],
                header["annotations"],
                header["version"],
            )
        except (ValueError, KeyError, TypeError) as error:
            raise self._unreadable(path, f"bad shard file header: {error}") from None
        if not sep:
            raise self._unreadable(path, "shard file has no blob (truncated)")
        shard, slot = check_owned_object(
            self.lease_name, name, labels, annotations, expected_shard, slot, self.kinds
        )
        return StoredShard(shard, name, blob, dict(annotations), str(version), slot)

    def list_shards(self, deadline: Deadline) -> list[StoredShard]:
        deadline.check("listing shards")
        with self._locked(deadline):
            # Writes happen under this lock, so a temp file seen here belongs to a writer that
            # died before its rename: never read, safe to remove.
            for stale in [] if self.read_only else self.folder.glob(".*.tmp"):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            shards = []
            ours = shard_name(self.lease_name, "x").rsplit("-", 2)[0] + "-"
            for path in sorted(self.folder.glob("*" + SHARD_SUFFIX)):
                header = _peek_header(path)
                if not header and path.name.startswith(ours):
                    # Named like this store's shards, but no header to tell: never skip it (a
                    # later create would collide with it on every restart).
                    raise self._unreadable(path, "the file is empty or has no readable header")
                annotations = header.get("annotations")
                lease = annotations.get(ANNOTATION_LEASE) if isinstance(annotations, dict) else None
                ours_labels = (shard_labels(self.lease_name), chunk_labels(self.lease_name))
                if lease == self.lease_name and header.get("labels") not in ours_labels:
                    raise self._unreadable(path, "annotated as this store's, labeled as another's")
                if header.get("labels") != shard_labels(self.lease_name):
                    continue  # another store's shard in a shared folder: the selector skips it
                shards.append(self._read_file(path))
            return shards

    def set_aside(self, name: str, stamp: str) -> Path:
        """Rename the shard object `name` (a file name without `.shard`) out of the store's
        way, keeping its bytes: `<name>.shard.set-aside-<stamp>`."""
        path = self.folder / (name + SHARD_SUFFIX)
        if "/" in name or not path.is_file():
            raise CheckpointError(f"no shard object {name!r} in {self.folder}")
        with self._locked(Deadline(30)):
            target = path.with_name(f"{path.name}{SET_ASIDE_SUFFIX}-{stamp}")
            os.replace(path, target)
        return target

    def read_shard(self, shard: str, deadline: Deadline) -> StoredShard | None:
        deadline.check(f"reading shard {shard!r}")
        path = self._path(shard)
        with self._locked(deadline):
            if not path.exists():
                return None
            return self._read_file(path, shard)

    def read_slot(self, shard: str, slot: str, deadline: Deadline) -> StoredShard | None:
        deadline.check(f"reading chunk slot {slot} of shard {shard!r}")
        path = self._path(shard, slot)
        with self._locked(deadline):
            if not path.exists():
                return None
            return self._read_file(path, shard, slot)

    def prefetch_slots(
        self, wanted: Mapping[tuple[str, str], str], deadline: Deadline
    ) -> dict[tuple[str, str], StoredShard]:
        """None: a slot read by name is one file, as cheap as any listing."""
        del wanted, deadline
        return {}

    def list_slots(self, deadline: Deadline) -> list[StoredShard]:
        deadline.check("listing chunk slots")
        with self._locked(deadline):
            slots = []
            for path in sorted(self.folder.glob("*" + SHARD_SUFFIX)):
                header = _peek_header(path)
                if header.get("labels") != chunk_labels(self.lease_name):
                    continue
                annotations = header.get("annotations") or {}
                slots.append(self._read_file(path, None, str(annotations.get(ANNOTATION_SLOT, ""))))
            return slots

    def store_names(self, deadline: Deadline) -> list[str]:
        """The stores (Lease names) that have shards in this folder, for a "no store" message."""
        deadline.check("listing stores")
        names = set()
        for path in self.folder.glob("*" + SHARD_SUFFIX):
            header = _peek_header(path)
            if not header:  # whose it is cannot be told: name it rather than miss a store
                raise self._unreadable(path, "the file is empty or has no readable header")
            labels, annotations = header.get("labels"), header.get("annotations")
            if isinstance(labels, dict) and labels.get(LABEL_COMPONENT) == COMPONENT_SHARD:
                names.add(str((annotations or {}).get(ANNOTATION_LEASE, "?")))
        return sorted(names)

    def _write(self, write: ShardWrite, version: str | None, deadline: Deadline) -> str:
        if self.read_only:
            raise CheckpointError(f"{self.describe()} was opened read-only")
        deadline.check(f"writing {write.what}")
        path = self._path(write.shard, write.slot)
        where = "" if write.slot is None else f"chunk slot {write.slot}: "
        with self._locked(deadline):
            if version is None and path.exists():
                raise ConflictError(write.shard, f"{where}already exists")
            current = None
            if version is not None:
                if not path.exists():
                    raise ConflictError(write.shard, f"{where}the shard was removed")
                current = self._read_file(path, write.shard, write.slot).version
            if version is not None and current != version:
                raise ConflictError(
                    write.shard, f"{where}stored version is {current!r}, expected {version!r}"
                )
            new_version = str(int(current or "0") + 1)
            header = {
                "labels": object_labels(self.lease_name, write.slot),
                "annotations": dict(write.annotations),
                "version": new_version,
            }
            _atomic_write(path, json.dumps(header, sort_keys=True).encode() + b"\n" + write.blob)
            return new_version

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        return WriteResult(self._write(write, None, deadline))

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        return WriteResult(self._write(write, version, deadline))

    def _legacy_path(self) -> Path | None:
        return (
            None if self.legacy_name is None else self.folder / (self.legacy_name + LEGACY_SUFFIX)
        )

    def read_legacy(self, deadline: Deadline) -> LegacyState | None:
        path = self._legacy_path()
        if path is None:
            return None
        deadline.check("reading the legacy checkpoint")
        with self._locked(deadline):
            if not path.exists():
                return None
            document = _load_object(path)
        data = document.get("data") or {}
        value = data.get(LEGACY_DATA_KEY)
        if not isinstance(value, str):
            raise CheckpointError(f"legacy file {path} has no data entry {LEGACY_DATA_KEY!r}")
        return LegacyState(
            name=path.name,
            value=value,
            annotations=dict(document.get("annotations") or {}),
            version=str(document.get("version", "")),
        )

    def mark_legacy(self, legacy: LegacyState, digest: str, deadline: Deadline) -> None:
        path = self._legacy_path()
        if path is None:
            raise CheckpointError("no legacy checkpoint is configured")
        if self.read_only:
            raise CheckpointError(f"{self.describe()} was opened read-only")
        deadline.check("marking the legacy checkpoint")
        with self._locked(deadline):
            document = _load_object(path)
            if str(document.get("version", "")) != legacy.version:
                raise ConflictError(legacy.name, "legacy checkpoint changed since it was read")
            document["annotations"] = marked(
                document.get("annotations") or {}, digest, self.lease_name
            )
            document["version"] = str(int(legacy.version or "0") + 1)
            _atomic_write(path, json.dumps(document, sort_keys=True).encode())


def write_legacy_file(
    folder: Path, name: str, value: str, annotations: dict[str, str] | None = None
) -> Path:
    """Write a legacy object as the old release would have left it (tests, benchmarks)."""
    path = Path(folder) / (name + LEGACY_SUFFIX)
    previous = _load_object(path) if path.exists() else {}
    document = {
        "annotations": annotations if annotations is not None else previous.get("annotations", {}),
        "data": {LEGACY_DATA_KEY: value},
        "version": str(int(previous.get("version", "0")) + 1),
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(document, sort_keys=True).encode())
    return path


def _peek_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        line = handle.readline(MAX_HEADER_BYTES)
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return header if isinstance(header, dict) else {}


def _load_object(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_bytes())
    except ValueError as error:
        raise CheckpointError(f"{path} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    return document


def _atomic_write(path: Path, content: bytes) -> None:
    """Replace `path` with `content` so that a crash leaves either version, never a torn one."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
