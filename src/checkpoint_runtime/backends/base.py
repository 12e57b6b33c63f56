"""The small contract both backends fulfil, and the checks every discovered object passes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from checkpoint_runtime.constants import (
    ANNOTATION_FORMAT,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITE_ID,
    SHARD_FORMATS,
)
from checkpoint_runtime.deadline import Deadline
from checkpoint_runtime.errors import CorruptShardError, ForeignShardError, KeyGrammarError
from checkpoint_runtime.format.keys import validate_shard_key
from checkpoint_runtime.format.legacy import LegacyState
from checkpoint_runtime.format.naming import shard_labels, shard_name


@dataclass(frozen=True)
class StoredShard:
    """One shard as the backend holds it, checked for ownership but not yet decoded."""

    shard: str
    name: str
    blob: bytes
    annotations: Mapping[str, str]
    version: str


@dataclass(frozen=True)
class ShardWrite:
    """What a create or update sends: the blob and every annotation, including the write id."""

    shard: str
    blob: bytes
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def write_id(self) -> str:
        return self.annotations.get(ANNOTATION_WRITE_ID, "")


@dataclass(frozen=True)
class WriteResult:
    """A committed write: the new version, and whether it was recognised only by reading back."""

    version: str
    resolved_uncertain: bool = False


class Backend(Protocol):
    """Storage of one store's shards (identified by its Lease name) and of its legacy object.

    `create_shard` fails with ConflictError if the shard exists; `update_shard` fails with
    ConflictError unless the stored version equals `version`. Both may raise WriteUncertainError.
    """

    lease_name: str

    def describe(self) -> str: ...

    def close(self) -> None:
        """Release connections; the backend is not used afterwards."""

    def list_shards(self, deadline: Deadline) -> list[StoredShard]: ...

    def read_shard(self, shard: str, deadline: Deadline) -> StoredShard | None: ...

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult: ...

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult: ...

    def read_legacy(self, deadline: Deadline) -> LegacyState | None: ...

    def mark_legacy(self, legacy: LegacyState, digest: str, deadline: Deadline) -> None: ...


def check_owned(
    lease_name: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    expected_shard: str | None = None,
) -> str:
    """Return the object's shard key if it is one of this store's shards, else raise.

    Runs before decoding: an unlabeled, mislabeled or misplaced object (or a hash collision,
    seen as a name that is not the hash of its annotated shard key) is refused, not read.
    """
    wanted = shard_labels(lease_name)
    if {key: labels.get(key) for key in wanted} != wanted:
        raise ForeignShardError(name, f"labels {dict(labels)} are not this store's {wanted}")
    shard = annotations.get(ANNOTATION_SHARD_KEY)
    if not shard:
        raise ForeignShardError(name, f"no {ANNOTATION_SHARD_KEY} annotation")
    try:
        validate_shard_key(shard)
    except KeyGrammarError as error:
        raise ForeignShardError(name, f"annotated shard key is invalid: {error}") from None
    if name != shard_name(lease_name, shard):
        raise ForeignShardError(
            name, f"name is not the one of annotated shard {shard!r}: misplaced or a hash collision"
        )
    if expected_shard is not None and shard != expected_shard:
        raise ForeignShardError(name, f"holds shard {shard!r}, expected {expected_shard!r}")
    if annotations.get(ANNOTATION_FORMAT) not in SHARD_FORMATS:
        raise CorruptShardError(shard, f"unknown format {annotations.get(ANNOTATION_FORMAT)!r}")
    return shard
