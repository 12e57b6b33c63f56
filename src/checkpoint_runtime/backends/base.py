"""The small contract both backends fulfil, and the checks every discovered object passes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from checkpoint_runtime.constants import (
    ANNOTATION_FORMAT,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_SLOT,
    ANNOTATION_WRITE_ID,
    SHARD_FORMATS,
)
from checkpoint_runtime.errors import CorruptShardError, ForeignShardError, KeyGrammarError
from checkpoint_runtime.format.legacy import LegacyState
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    Kinds,
    chunk_labels,
    object_name,
    shard_labels,
    shard_name,
    validate_shard_key,
)
from checkpoint_runtime.retry import Deadline


@dataclass(frozen=True)
class StoredShard:
    """One shard as the backend holds it, checked for ownership but not yet decoded."""

    shard: str
    name: str
    blob: bytes
    annotations: Mapping[str, str]
    version: str
    slot: str | None = None
    """A v3 chunk slot (`a0`, `b3`, ...) of the shard; None: the shard's own object (head)."""


@dataclass(frozen=True)
class ShardWrite:
    """What a create or update sends: the blob and every annotation, including the write id.
    With `slot`, the object written is that chunk slot of the shard, not the shard's head."""

    shard: str
    blob: bytes
    annotations: Mapping[str, str] = field(default_factory=dict)
    slot: str | None = None

    @property
    def what(self) -> str:
        return (
            f"shard {self.shard!r}"
            if self.slot is None
            else (f"chunk slot {self.slot} of shard {self.shard!r}")
        )

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

    def read_slot(self, shard: str, slot: str, deadline: Deadline) -> StoredShard | None:
        """A chunk slot of `shard` (None if never written); checked like a shard."""

    def list_slots(self, deadline: Deadline) -> list[StoredShard]:
        """Every chunk slot of this store (for `inspect`: slots a shrunk shard left)."""

    def prefetch_slots(
        self, wanted: Mapping[tuple[str, str], str], deadline: Deadline
    ) -> dict[tuple[str, str], StoredShard]:
        """Chunk slots among `wanted` ((shard, slot) -> the version a head's manifest records),
        fetched the backend's cheapest way, each checked like a shard; only those stored at that
        version, and maybe none: the caller reads the others by name. It may list."""

    def read_legacy(self, deadline: Deadline) -> LegacyState | None: ...

    def mark_legacy(self, legacy: LegacyState, digest: str, deadline: Deadline) -> None: ...


def check_owned_slot(
    lease_name: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    expected: tuple[str, str] | None = None,
    kinds: Kinds = COLLECTOR_KINDS,
) -> tuple[str, str]:
    """Return (shard key, slot) if the object is one of this store's chunk slots, else raise."""
    wanted = chunk_labels(lease_name)
    if {key: labels.get(key) for key in wanted} != wanted:
        raise ForeignShardError(name, f"labels {dict(labels)} are not this store's {wanted}")
    shard, slot = annotations.get(ANNOTATION_SHARD_KEY), annotations.get(ANNOTATION_SLOT, "")
    if not shard:
        raise ForeignShardError(name, f"no {ANNOTATION_SHARD_KEY} annotation")
    try:
        validate_shard_key(shard, kinds)
        if len(slot) < 2 or not slot[1:].isdigit() or name != object_name(lease_name, shard, slot):
            raise ForeignShardError(name, f"name is not the one of slot {slot!r} of {shard!r}")
    except (KeyGrammarError, ValueError) as error:
        raise ForeignShardError(name, f"annotated shard key or slot is invalid: {error}") from None
    if expected is not None and (shard, slot) != expected:
        raise ForeignShardError(name, f"holds slot {slot!r} of {shard!r}, expected {expected}")
    return shard, slot


def check_owned(
    lease_name: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    expected_shard: str | None = None,
    kinds: Kinds = COLLECTOR_KINDS,
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
        validate_shard_key(shard, kinds)
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


def check_owned_object(
    lease_name: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    expected_shard: str | None = None,
    slot: str | None = None,
    kinds: Kinds = COLLECTOR_KINDS,
) -> tuple[str, str | None]:
    """Return (shard key, slot) if the object is one of this store's shard heads (`slot` None:
    `check_owned`) or chunk slots (`check_owned_slot`, expecting slot `slot` of
    `expected_shard` when that is given), else raise. Both backends check every object they
    read or list with it."""
    if slot is None:
        return check_owned(lease_name, name, labels, annotations, expected_shard, kinds), None
    expected = None if expected_shard is None else (expected_shard, slot)
    return check_owned_slot(lease_name, name, labels, annotations, expected, kinds)
