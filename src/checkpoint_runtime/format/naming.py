"""How a shard and its rows are named: the key grammar, the text forms of row ids and values,
and the objects a shard is stored as.

A key is `[<tailnet>/]<kind>[/<name>...]/<row-kind>[/<id>]`. The collector namespace (everything up
to the row kind) is the shard key, so every row of one collector lands in one shard. The kinds
shipped with the runtime are declared in COLLECTOR_KINDS, read-only. Every function of the grammar
takes the collector kinds it knows (`kinds`, the shipped ones unless told otherwise): a collector
kind table (`collectors/registry.py`) builds its own with `with_kind` (a new mapping, never a
changed one) and passes it where keys of its kinds are read, so nothing here changes at run time.

A shard's object (its head, or one of its v3 chunk slots) is named from the store's Lease name and
the shard key: `<lease>-<readable shard key>-<hash>`, and `<that>-c<generation><index>` for a slot.
Operators recognise it, the hash of (Lease name, shard key) keeps two stores in one namespace
apart, and the shard-key annotation is compared on every read so that a hash collision is detected
instead of merged.

Between the two, the text forms collectors store in row ids and values: an object name as its
row id (`object_id`, unpadded base64) and back (`name_from_object_id`), and a moment as the
RFC 3339 UTC timestamp with nine fraction digits of every collector row (`rfc3339_ns`,
`rfc3339_from_ns`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType

from checkpoint_runtime.constants import (
    CHUNK_GENERATIONS,
    COMPONENT_CHUNK,
    COMPONENT_LEASE,
    COMPONENT_SHARD,
    LABEL_COMPONENT,
    LABEL_STORE,
    MAX_DNS_SUBDOMAIN,
    SHARD_NAME_HASH_CHARS,
    STORE_LABEL_HASH_CHARS,
)
from checkpoint_runtime.errors import KeyGrammarError


@dataclass(frozen=True)
class CollectorKind:
    """How a collector kind's namespace and rows are spelled."""

    name_segments: int
    """Segments after the kind that name one collector instance (objectstore: the feed)."""
    row_kinds: dict[str, bool]
    """Row kind -> whether it takes an `/<id>` suffix."""


# The shipped collector kinds and their row kinds; the collectors and the reference rows spell
# their keys with these names.
OBJECTSTORE = "objectstore"
FLOWLOGS = "flowlogs"
CURSOR = "cursor"
SCAN = "scan"
SEEN = "seen"
GAP = "gap"
REPLAY = "replay"
# A row a collector could not parse (after a migration from the legacy format, which admits any
# string), moved here with its original value: kept and shown by `inspect`, never read again.
QUARANTINE = "quarantine"

Kinds = Mapping[str, CollectorKind]
"""Collector kind name -> its shape: what a key grammar knows."""

COLLECTOR_KINDS: Kinds = MappingProxyType(
    {
        FLOWLOGS: CollectorKind(
            name_segments=0, row_kinds={CURSOR: False, REPLAY: True, QUARANTINE: True}
        ),
        OBJECTSTORE: CollectorKind(
            name_segments=1, row_kinds={CURSOR: False, SCAN: False, SEEN: True, GAP: True}
        ),
    }
)
"""The shipped kinds: the store decodes any shard of theirs without the collectors."""


def with_kind(kinds: Kinds, name: str, kind: CollectorKind) -> Kinds:
    """A new grammar's kinds: `kinds` and the further kind `name` (`kinds` is not changed)."""
    problem = None if SEGMENT_PATTERN.match(name) else f"must match {SEGMENT_PATTERN.pattern}"
    if problem or name in kinds:
        raise KeyGrammarError(name, problem or "is already a collector kind")
    return MappingProxyType({**kinds, name: kind})


# A tailnet or feed name: one DNS-ish segment. Shared with config validation and mirrored in
# schemas/runtime-config.schema.json ($defs.segment).
SEGMENT_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
SEGMENT_MAX = 63


def segment_problem(segment: str, kinds: Kinds = COLLECTOR_KINDS) -> str | None:
    """Why `segment` cannot be a tailnet or feed name, or None if it can."""
    if not SEGMENT_PATTERN.match(segment):
        return f"{segment!r} must match {SEGMENT_PATTERN.pattern}"
    if len(segment) > SEGMENT_MAX:
        return f"{segment!r} is longer than {SEGMENT_MAX} characters"
    if segment in kinds:
        return f"{segment!r} is a collector kind; as a name it would make keys ambiguous"
    return None


@dataclass(frozen=True)
class ParsedKey:
    """A key split by the grammar."""

    shard: str
    row_kind: str
    row_id: str | None


def _namespace_end(key: str, parts: list[str], kinds: Kinds) -> tuple[CollectorKind, int]:
    """Validate the collector namespace at the start of `parts`; return its kind and length."""
    if parts[0] in kinds:
        kind_at = 0
    elif len(parts) > 1 and parts[1] in kinds:
        kind_at = 1
        problem = segment_problem(parts[0], kinds)
        if problem:
            raise KeyGrammarError(key, f"bad tailnet: {problem}")
    else:
        raise KeyGrammarError(
            key, f"no collector kind ({', '.join(sorted(kinds))}) in segment 1 or 2"
        )
    kind = kinds[parts[kind_at]]
    end = kind_at + 1 + kind.name_segments
    if len(parts) < end:
        raise KeyGrammarError(key, f"{parts[kind_at]} needs {kind.name_segments} name segment(s)")
    for name in parts[kind_at + 1 : end]:
        problem = segment_problem(name, kinds)
        if problem:
            raise KeyGrammarError(key, f"bad {parts[kind_at]} name: {problem}")
    return kind, end


def parse_key(key: str, kinds: Kinds = COLLECTOR_KINDS) -> ParsedKey:
    """Split `key` by the grammar or raise KeyGrammarError."""
    if not isinstance(key, str) or not key:
        raise KeyGrammarError(str(key), "empty or not a string")
    parts = key.split("/")
    kind, row_at = _namespace_end(key, parts, kinds)
    if len(parts) <= row_at:
        raise KeyGrammarError(key, "missing row kind")
    row_kind = parts[row_at]
    if row_kind not in kind.row_kinds:
        allowed = ", ".join(sorted(kind.row_kinds))
        raise KeyGrammarError(key, f"row kind {row_kind!r} is not one of {allowed}")
    rest = parts[row_at + 1 :]
    row_id: str | None = None
    if kind.row_kinds[row_kind]:
        row_id = "/".join(rest)
        if not row_id:
            raise KeyGrammarError(key, f"row kind {row_kind!r} needs an /<id>")
    elif rest:
        raise KeyGrammarError(key, f"row kind {row_kind!r} takes no /<id>")
    return ParsedKey(shard="/".join(parts[:row_at]), row_kind=row_kind, row_id=row_id)


def shard_key(key: str, kinds: Kinds = COLLECTOR_KINDS) -> str:
    """The collector namespace owning `key` (its shard)."""
    return parse_key(key, kinds).shard


def validate_shard_key(shard: str, kinds: Kinds = COLLECTOR_KINDS) -> None:
    """Raise KeyGrammarError unless `shard` is exactly a collector namespace."""
    if not isinstance(shard, str) or not shard:
        raise KeyGrammarError(str(shard), "empty shard key")
    parts = shard.split("/")
    _, end = _namespace_end(shard, parts, kinds)
    if len(parts) != end:
        raise KeyGrammarError(shard, "not exactly a collector namespace")


def collector_namespace(
    kind: str, tailnet: str | None = None, *names: str, kinds: Kinds = COLLECTOR_KINDS
) -> str:
    """Build the shard key of a configured collector (the inverse of the grammar)."""
    if kind not in kinds:
        raise KeyGrammarError(kind, "unknown collector kind")
    expected = kinds[kind].name_segments
    if len(names) != expected:
        raise KeyGrammarError(kind, f"takes {expected} name segment(s), got {len(names)}")
    shard = "/".join([*([tailnet] if tailnet else []), kind, *names])
    validate_shard_key(shard, kinds)
    return shard


def namespace_kind(shard: str, kinds: Kinds = COLLECTOR_KINDS) -> CollectorKind:
    """The collector kind of a valid shard key."""
    validate_shard_key(shard, kinds)
    parts = shard.split("/")
    return kinds[parts[0] if parts[0] in kinds else parts[1]]


def relative_row_problem(kind: CollectorKind, row: str) -> str | None:
    """Why `<shard>/<row>` is not a row of a shard of `kind`, or None.

    The fast path of ShardKey for decoding: the shard part is validated once, each row only by
    its row kind and id, which is equivalent to `shard_key(shard + "/" + row) == shard`.
    """
    row_kind, sep, row_id = row.partition("/")
    takes_id = kind.row_kinds.get(row_kind)
    if takes_id is None:
        return f"row kind {row_kind!r} is not one of {', '.join(sorted(kind.row_kinds))}"
    if takes_id and not row_id:
        return f"row kind {row_kind!r} needs an /<id>"
    if not takes_id and sep:
        return f"row kind {row_kind!r} takes no /<id>"
    return None


# -- row ids and values ---------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def object_id(name: str) -> str:
    """The seen/gap row id of an object name: unpadded base64 (the old design's row shape)."""
    return base64.b64encode(name.encode()).decode().rstrip("=")


def name_from_object_id(row_id: str) -> str:
    """Inverse of object_id."""
    padded = row_id + "=" * (-len(row_id) % 4)
    return base64.b64decode(padded, validate=True).decode()


def rfc3339_from_ns(ns: int) -> str:
    """Nanoseconds since the epoch as RFC 3339 UTC with nine fraction digits, the timestamp
    format of every collector row."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{fraction:09d}Z"


def rfc3339_ns(moment: datetime) -> str:
    """`moment` (any timezone) in the collector rows' timestamp format."""
    micros = (moment.astimezone(UTC) - _EPOCH) // _MICROSECOND
    return rfc3339_from_ns(micros * 1000)


# -- object names ---------------------------------------------------------------------------------

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_NOT_DNS = re.compile(r"[^a-z0-9.-]+")
READABLE_MAX = 80


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= MAX_DNS_SUBDOMAIN and bool(_DNS_SUBDOMAIN.match(name))


def shard_name(lease_name: str, shard: str) -> str:
    """The ConfigMap name of `shard` in the store identified by `lease_name`."""
    readable = _NOT_DNS.sub("-", shard.lower().replace("/", ".")).strip("-.")[:READABLE_MAX]
    digest = _digest(lease_name, shard)[:SHARD_NAME_HASH_CHARS]
    room = MAX_DNS_SUBDOMAIN - len(digest) - len(readable) - 2
    prefix = _NOT_DNS.sub("-", lease_name.lower())[: max(room, 0)].strip("-.")
    name = "-".join(part for part in (prefix, readable, digest) if part)
    name = re.sub(r"[-.]{2,}", "-", name)
    if not is_dns_subdomain(name):
        raise KeyGrammarError(shard, f"no DNS-1123 ConfigMap name can be derived ({name!r})")
    return name


def chunk_slot_name(shard_name: str, generation: str, index: int) -> str:
    """The ConfigMap name of a v3 shard's chunk slot: `<shard name>-c<generation><index>`.

    `shard_name` is the head's ConfigMap name (`shard_name(lease, shard)`), `generation` `a` or
    `b`, `index` a decimal slot index (below the store's maxChunks)."""
    if generation not in CHUNK_GENERATIONS:
        raise ValueError(f"chunk generation must be one of {CHUNK_GENERATIONS}, got {generation!r}")
    if type(index) is not int or index < 0:
        raise ValueError(f"chunk index must be an integer >= 0, got {index!r}")
    name = f"{shard_name}-c{generation}{index}"
    if not is_dns_subdomain(name):
        raise KeyGrammarError(shard_name, f"no DNS-1123 chunk slot name can be derived ({name!r})")
    return name


def store_label(lease_name: str) -> str:
    """The store label value: a hash, since a Lease name may exceed the 63-character label limit."""
    return _digest("store", lease_name)[:STORE_LABEL_HASH_CHARS]


def shard_labels(lease_name: str) -> dict[str, str]:
    return {LABEL_COMPONENT: COMPONENT_SHARD, LABEL_STORE: store_label(lease_name)}


def lease_labels(lease_name: str) -> dict[str, str]:
    """The labels of the store's Lease: the store label, with the Lease component."""
    return {LABEL_COMPONENT: COMPONENT_LEASE, LABEL_STORE: store_label(lease_name)}


def chunk_labels(lease_name: str) -> dict[str, str]:
    """A chunk slot's labels: the shard's, with the chunk component (shard discovery skips it)."""
    return {**shard_labels(lease_name), LABEL_COMPONENT: COMPONENT_CHUNK}


def object_name(lease_name: str, shard: str, slot: str | None) -> str:
    """The object name of a shard's head (slot None) or of one of its chunk slots (`a0`, `b3`)."""
    head = shard_name(lease_name, shard)
    return head if slot is None else chunk_slot_name(head, slot[0], int(slot[1:]))


def object_labels(lease_name: str, slot: str | None) -> dict[str, str]:
    """The labels of a shard's head (slot None) or of one of its chunk slots."""
    return shard_labels(lease_name) if slot is None else chunk_labels(lease_name)


def label_selector(lease_name: str) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(shard_labels(lease_name).items()))


def chunk_label_selector(lease_name: str) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(chunk_labels(lease_name).items()))
