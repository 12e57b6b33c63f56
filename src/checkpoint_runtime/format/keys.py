"""Checkpoint key grammar and ShardKey.

A key is `[<tailnet>/]<kind>[/<name>...]/<row-kind>[/<id>]`. The collector namespace (everything up
to the row kind) is the shard key, so every row of one collector lands in one shard. The kinds
shipped with the runtime are declared in COLLECTOR_KINDS (the store decodes any stored shard with
this grammar alone); a collector kind table (`collectors/registry.py`) refuses a kind the grammar
spells otherwise, and `extended` teaches the grammar a further kind for the duration of a block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

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

COLLECTOR_KINDS: dict[str, CollectorKind] = {
    FLOWLOGS: CollectorKind(
        name_segments=0, row_kinds={CURSOR: False, REPLAY: True, QUARANTINE: True}
    ),
    OBJECTSTORE: CollectorKind(
        name_segments=1, row_kinds={CURSOR: False, SCAN: False, SEEN: True, GAP: True}
    ),
}


def register_kind(name: str, kind: CollectorKind) -> None:
    """Teach the grammar a further collector kind (the collector registry calls this)."""
    problem = None if SEGMENT_PATTERN.match(name) else f"must match {SEGMENT_PATTERN.pattern}"
    if problem or name in COLLECTOR_KINDS:
        raise KeyGrammarError(name, problem or "is already a collector kind")
    COLLECTOR_KINDS[name] = kind


def unregister_kind(name: str) -> None:
    """Forget a kind added by `register_kind`."""
    del COLLECTOR_KINDS[name]


@contextmanager
def extended(name: str, kind: CollectorKind) -> Iterator[None]:
    """The grammar with the further kind `name` for the duration of a `with` block."""
    register_kind(name, kind)
    try:
        yield
    finally:
        unregister_kind(name)


# A tailnet or feed name: one DNS-ish segment. Shared with config validation and mirrored in
# schemas/runtime-config.schema.json ($defs.segment).
SEGMENT_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
SEGMENT_MAX = 63


def segment_problem(segment: str) -> str | None:
    """Why `segment` cannot be a tailnet or feed name, or None if it can."""
    if not SEGMENT_PATTERN.match(segment):
        return f"{segment!r} must match {SEGMENT_PATTERN.pattern}"
    if len(segment) > SEGMENT_MAX:
        return f"{segment!r} is longer than {SEGMENT_MAX} characters"
    if segment in COLLECTOR_KINDS:
        return f"{segment!r} is a collector kind; as a name it would make keys ambiguous"
    return None


@dataclass(frozen=True)
class ParsedKey:
    """A key split by the grammar."""

    shard: str
    row_kind: str
    row_id: str | None


def _namespace_end(key: str, parts: list[str]) -> tuple[CollectorKind, int]:
    """Validate the collector namespace at the start of `parts`; return its kind and length."""
    if parts[0] in COLLECTOR_KINDS:
        kind_at = 0
    elif len(parts) > 1 and parts[1] in COLLECTOR_KINDS:
        kind_at = 1
        problem = segment_problem(parts[0])
        if problem:
            raise KeyGrammarError(key, f"bad tailnet: {problem}")
    else:
        raise KeyGrammarError(
            key, f"no collector kind ({', '.join(sorted(COLLECTOR_KINDS))}) in segment 1 or 2"
        )
    kind = COLLECTOR_KINDS[parts[kind_at]]
    end = kind_at + 1 + kind.name_segments
    if len(parts) < end:
        raise KeyGrammarError(key, f"{parts[kind_at]} needs {kind.name_segments} name segment(s)")
    for name in parts[kind_at + 1 : end]:
        problem = segment_problem(name)
        if problem:
            raise KeyGrammarError(key, f"bad {parts[kind_at]} name: {problem}")
    return kind, end


def parse_key(key: str) -> ParsedKey:
    """Split `key` by the grammar or raise KeyGrammarError."""
    if not isinstance(key, str) or not key:
        raise KeyGrammarError(str(key), "empty or not a string")
    parts = key.split("/")
    kind, row_at = _namespace_end(key, parts)
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


def shard_key(key: str) -> str:
    """The collector namespace owning `key` (its shard)."""
    return parse_key(key).shard


def validate_shard_key(shard: str) -> None:
    """Raise KeyGrammarError unless `shard` is exactly a collector namespace."""
    if not isinstance(shard, str) or not shard:
        raise KeyGrammarError(str(shard), "empty shard key")
    parts = shard.split("/")
    _, end = _namespace_end(shard, parts)
    if len(parts) != end:
        raise KeyGrammarError(shard, "not exactly a collector namespace")


def collector_namespace(kind: str, tailnet: str | None = None, *names: str) -> str:
    """Build the shard key of a configured collector (the inverse of the grammar)."""
    if kind not in COLLECTOR_KINDS:
        raise KeyGrammarError(kind, "unknown collector kind")
    expected = COLLECTOR_KINDS[kind].name_segments
    if len(names) != expected:
        raise KeyGrammarError(kind, f"takes {expected} name segment(s), got {len(names)}")
    shard = "/".join([*([tailnet] if tailnet else []), kind, *names])
    validate_shard_key(shard)
    return shard


def namespace_kind(shard: str) -> CollectorKind:
    """The collector kind of a valid shard key."""
    validate_shard_key(shard)
    parts = shard.split("/")
    return COLLECTOR_KINDS[parts[0] if parts[0] in COLLECTOR_KINDS else parts[1]]


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
