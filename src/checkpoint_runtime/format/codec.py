"""The shard codec: writes `gzip-shards-v2`, reads v2 and v1; deterministic, bounded,
fail-closed.

A v2 blob is a standard multi-member gzip stream (`gzip -dc` prints every member in order), one
binaryData entry (schemas/shard-envelope-v2.schema.json):

- a base member with every row, in a columnar layout that decodes at C speed:

      {"format": "gzip-shards-v2", "member": "base", "shard": "<shard key>", "rows": N,
       "groups": [{"kind": "<row kind>", "base64": 0 | 1 | 2,
                   "ids": {"runs": [["<prefix>", count], ...], "lines": "<suffix>\\n<suffix>..."},
                   "values": {...same...}}]}

  Rows are grouped by row kind and sorted by value, then id; ids and values are separate
  columns. A column is cut into runs of consecutive entries sharing their first K characters
  (K chosen per column: the longest that keeps runs at 6 entries on average or more); each run
  stores that prefix once, and the entries' remaining suffixes
  are joined with line breaks (a column with a line break in an entry stores a list instead).
  Decoding is a split and one `map` per run. Ids that are canonical base64 of printable text
  may be stored decoded (`base64` 1 unpadded, 2 padded), where that pays for re-encoding them.
- optionally delta members, each holding the rows changed since the base (set or deleted):

      {"format": "gzip-shards-v2", "member": "delta", "shard": "<shard key>",
       "base": <CRC-32 of the base member's data>, "rows": <row count after applying>,
       "set": {"<row>": "<value>", ...}, "delete": ["<row>", ...]}

  Rows are relative to the shard (`seen/<id>`, `cursor`). Members apply in order. The store
  writes at most one delta (every change since the base); past a bound it writes a new base
  (compaction).

Equal rows give an equal base; equal rows and an equal base give an equal delta. Decoding
refuses, with CorruptShardError naming the shard: bad or truncated gzip, anything but gzip
members after the first, more than 128 MiB decoded across all members, an unknown format or
member, any field outside the set above, a member for another shard, a delta for another base,
a delta that deletes an absent row or holds a row of another shard, inconsistent counts.

Every format's blob is built of gzip members, written and read here (the first section): every
member we write carries the same hand-written header (mtime 0, OS unknown), so equal input gives
equal bytes. Two deflaters: zlib level 9 (the `gzip-shards-v1` writer, `encode_v1_blob`, and the
baseline, unchanged) and libdeflate (the `deflate` package, pinned: its output is deterministic
per version) for `gzip-shards-v2` and v3, smaller than zlib 9 at a fraction of its time.
Inflating always uses zlib, member by member, with one output budget for the whole stream
(`gunzip_members`).
"""

from __future__ import annotations

import binascii
import itertools
import json
import operator
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import deflate

from checkpoint_runtime.constants import (
    DELTA_DEFLATE_LEVEL,
    FAST_DEFLATE_LEVEL,
    GZIP_LEVEL,
    MAX_DECODED_ENVELOPE,
    MEAN_RUN_ENTRIES,
    SHARD_FORMAT_V1,
    SHARD_FORMAT_V2,
)
from checkpoint_runtime.errors import CorruptShardError, KeyGrammarError, OversizeError
from checkpoint_runtime.format import codec_v1
from checkpoint_runtime.format.codec_v1 import PLAIN, UNPADDED
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    CollectorKind,
    Kinds,
    namespace_kind,
    relative_row_problem,
)

BASE_FIELDS = frozenset({"format", "member", "shard", "rows", "groups"})
DELTA_FIELDS = frozenset({"format", "member", "shard", "base", "rows", "set", "delete"})


# -- gzip members ---------------------------------------------------------------------------------

# gzip member header: magic, deflate, no flags, mtime 0, "max compression", OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


def _member(data: bytes, body: bytes | bytearray) -> bytes:
    return GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def gzip_fixed(data: bytes) -> bytes:
    """One gzip member, zlib level 9, fixed header: deterministic for equal input."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
    return _member(data, compressor.compress(data) + compressor.flush())


def gzip_fast(data: bytes, level: int = FAST_DEFLATE_LEVEL) -> bytes:
    """One gzip member, libdeflate, fixed header: deterministic for equal input and level."""
    return _member(data, deflate.deflate_compress(data, level))


def member_crc(member: bytes) -> int:
    """The CRC-32 of a member's uncompressed data, read from its trailer."""
    crc: int = struct.unpack("<I", member[-8:-4])[0]
    return crc


@dataclass(frozen=True)
class Member:
    """One inflated member: its data and where its bytes end in the stream."""

    data: bytes
    end: int


def gunzip_members(blob: bytes, limit: int, shard: str) -> list[Member]:
    """Inflate every member of `blob`, refusing more than `limit` bytes of output in total
    (a gzip bomb stops at the bound, whichever member carries it)."""
    members: list[Member] = []
    offset, budget = 0, limit
    while True:
        if members and blob[offset : offset + 2] != GZIP_HEADER[:2]:
            raise CorruptShardError(shard, "trailing bytes after the gzip member")
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = _inflate(inflater, blob[offset:], budget)
        except zlib.error as error:
            where = "trailing bytes after the gzip member: " if members else ""
            raise CorruptShardError(shard, f"{where}bad gzip data: {error}") from None
        if out is None:
            raise CorruptShardError(shard, f"decoded envelope exceeds {limit} bytes")
        if not inflater.eof:
            raise CorruptShardError(shard, "truncated gzip data")
        budget -= len(out)
        offset = len(blob) - len(inflater.unused_data)
        members.append(Member(out, offset))
        if not inflater.unused_data:
            return members


_CHUNK = 4 << 20


def _inflate(inflater: Any, data: bytes, budget: int) -> bytes | None:
    """Inflate one member in chunks; None as soon as it passes `budget` bytes (a bomb is
    refused holding about `budget` bytes, not the twice that one growing buffer would take)."""
    chunks: list[bytes] = []
    size = 0
    pending = data
    while True:
        chunk = inflater.decompress(pending, _CHUNK)
        chunks.append(chunk)
        size += len(chunk)
        if size > budget:
            return None
        pending = inflater.unconsumed_tail
        if not pending or inflater.eof:
            return b"".join(chunks) if len(chunks) > 1 else chunks[0]


def encode_v1_blob(shard: str, rows: Mapping[str, str]) -> bytes:
    """A v1 blob of `rows`, exactly as the v1 release wrote it (tests and fixtures)."""
    return gzip_fixed(codec_v1.encode_envelope(shard, rows))


# -- what a shard write needs and a read gives ----------------------------------------------------


@dataclass(frozen=True)
class Base:
    """A shard's base member as stored: what a delta is written against."""

    member: bytes
    raw_bytes: int
    """Bytes of the base envelope before gzip."""

    @property
    def crc(self) -> int:
        return member_crc(self.member)


@dataclass(frozen=True)
class EncodedShard:
    """What a shard write needs: the blob and the sizes its annotations and metrics report."""

    shard: str
    blob: bytes
    raw_bytes: int
    """Bytes of every member's envelope before gzip."""
    rows: int
    base: Base
    delta_bytes: int = 0
    """Bytes of the delta member (0: the blob is a base alone)."""

    @property
    def compressed_bytes(self) -> int:
        return len(self.blob)


@dataclass
class DecodedShard:
    """Rows of a stored blob, and what the store needs to write deltas against its base."""

    format: str
    rows: dict[str, str]
    base: Base | None = None
    """The base member (None for a v1 blob: it is rewritten whole at its next persist)."""
    base_prior: dict[str, str | None] = field(default_factory=dict)
    """For every row a delta changed: its value in the base (None: absent from the base)."""


# -- encoding -------------------------------------------------------------------------------------


def _run_length(strings: list[str]) -> int:
    """The longest prefix length K whose runs (consecutive entries sharing their first K
    characters) hold MEAN_RUN_ENTRIES entries on average or more: longer prefixes remove more,
    more runs cost more to store and to decode (measured on both workloads, where it picks the
    smallest output). Runs(K) = 1 + #{i: shared(i-1, i) < K}, read off the sorted shares."""
    shared = sorted(codec_v1.shared_prefixes(strings)[1:])
    most_runs = max(1, len(strings) // MEAN_RUN_ENTRIES)
    return shared[min(most_runs, len(shared)) - 1]


def _run_column(strings: list[str]) -> dict[str, Any]:
    k = _run_length(strings) if len(strings) > 1 else 0
    runs: list[list[Any]] = []
    if k == 0:
        runs.append(["", len(strings)])
        suffixes = strings
    else:
        heads = [text[:k] for text in strings]
        for head, group in itertools.groupby(heads):
            runs.append([head, sum(1 for _ in group)])
        suffixes = list(map(operator.itemgetter(slice(k, None)), strings))
    lines = "\n".join(suffixes)
    if lines.count("\n") != len(suffixes) - 1:
        return {"runs": runs, "lines": suffixes}
    return {"runs": runs, "lines": lines}


def _raw_size(rows: Mapping[str, str]) -> int:
    return sum(map(len, rows)) + sum(map(len, rows.values()))


def encode_envelope(
    shard: str,
    rows: Mapping[str, str],
    fmt: str = SHARD_FORMAT_V2,
    member: str = "base",
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """The base envelope JSON of `rows` (every key must lie in `shard`): a `fmt` member of kind
    `member`, with the `extra` fields between the shard and the rows (a v3 chunk's index)."""
    raw_size = _raw_size(rows)
    if raw_size > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, raw_size, MAX_DECODED_ENVELOPE, len(rows))
    groups = []
    for row_kind, kind_entries in sorted(codec_v1.rows_by_kind(shard, rows).items()):
        for encoding, entries in sorted(codec_v1.id_encodings(kind_entries).items()):
            groups.append(
                {
                    "kind": row_kind,
                    "base64": encoding,
                    "ids": _run_column([entry[0] for entry in entries]),
                    "values": _run_column([entry[1] for entry in entries]),
                }
            )
    envelope = {
        "format": fmt,
        "member": member,
        "shard": shard,
        **(extra or {}),
        "rows": len(rows),
        "groups": groups,
    }
    text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(text) > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, len(text), MAX_DECODED_ENVELOPE, len(rows))
    return text


def encode_shard(shard: str, rows: Mapping[str, str]) -> EncodedShard:
    """A blob of one base member holding every row (a full encode: compaction, migration)."""
    envelope = encode_envelope(shard, rows)
    base = Base(gzip_fast(envelope), len(envelope))
    return EncodedShard(shard, base.member, len(envelope), len(rows), base)


def encode_delta(
    shard: str, base: Base, changes: Mapping[str, str | None], rows: int
) -> EncodedShard:
    """`base` followed by one delta member of `changes` (None deletes), `rows` rows after them.

    Without changes the blob is the base alone. Raises OversizeError if the members together
    would decode past the bound (the caller then writes a new base instead)."""
    if not changes:
        return EncodedShard(shard, base.member, base.raw_bytes, rows, base)
    text = delta_envelope(shard, base.crc, changes, rows, SHARD_FORMAT_V2)
    raw_bytes = base.raw_bytes + len(text)
    if raw_bytes > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, raw_bytes, MAX_DECODED_ENVELOPE, rows)
    member = gzip_fast(text, DELTA_DEFLATE_LEVEL)
    return EncodedShard(shard, base.member + member, raw_bytes, rows, base, len(member))


def delta_envelope(
    shard: str, base_crc: int, changes: Mapping[str, str | None], rows: int, fmt: str
) -> bytes:
    """The JSON of a delta member of `changes` (None deletes; keys checked to lie in `shard`)
    against the base `base_crc`, `rows` rows after applying it."""
    head = shard + "/"
    ordered = sorted(changes.items())
    # The keys with a given prefix are one contiguous run in sorted order: when the first and
    # the last sorted key lie in the shard, every key between them does.
    if ordered and not (ordered[0][0].startswith(head) and ordered[-1][0].startswith(head)):
        stray = next(key for key, _ in ordered if not key.startswith(head))
        raise KeyGrammarError(stray, f"does not belong to shard {shard!r}")
    start = len(head)
    delta = {
        "format": fmt,
        "member": "delta",
        "shard": shard,
        "base": base_crc,
        "rows": rows,
        "set": {key[start:]: value for key, value in ordered if value is not None},
        "delete": [key[start:] for key, value in ordered if value is None],
    }
    return json.dumps(delta, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# -- decoding -------------------------------------------------------------------------------------


def load(shard: str, data: bytes) -> dict[str, Any]:
    return codec_v1.load_envelope(shard, data)


def _check_text(shard: str, text: str, name: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise CorruptShardError(shard, f"{name}: a lone surrogate is not text") from None


@dataclass(frozen=True)
class _Column:
    """A checked run column, not yet built."""

    prefixes: list[str]
    counts: list[int]
    suffixes: str | list[str]
    """'\\n'-joined suffixes, or (when an entry holds a line break) a list of them."""
    chars: int
    """Characters its entries hold."""

    @property
    def entries(self) -> int:
        return sum(self.counts)

    def split(self) -> list[str]:
        return self.suffixes.split("\n") if isinstance(self.suffixes, str) else self.suffixes


def _column(shard: str, column: Any, name: str, budget: int) -> _Column:
    """Check a run column in bulk before anything is built: shape, counts, text, size."""
    if not isinstance(column, dict) or set(column) != {"runs", "lines"}:
        raise CorruptShardError(shard, f"{name} must hold exactly runs and lines")
    runs, lines = column["runs"], column["lines"]
    if not isinstance(runs, list) or not runs:
        raise CorruptShardError(shard, f"{name}: runs must be a non-empty list")
    # Checked in bulk (C-level maps over the runs), not run by run.
    if set(map(type, runs)) != {list} or set(map(len, runs)) != {2}:
        raise CorruptShardError(shard, f"{name}: a run must be [prefix, count > 0]")
    prefixes, counts = map(list, zip(*runs, strict=True))
    if set(map(type, prefixes)) != {str} or set(map(type, counts)) != {int} or min(counts) < 1:
        raise CorruptShardError(shard, f"{name}: a run must be [prefix, count > 0]")
    if isinstance(lines, str):
        text = lines
        suffix_chars, entries = len(lines) - lines.count("\n"), lines.count("\n") + 1
    elif isinstance(lines, list) and set(map(type, lines)) <= {str}:
        text = "".join(lines)
        suffix_chars, entries = len(text), len(lines)
    else:
        raise CorruptShardError(shard, f"{name}: lines must be a string or a list of strings")
    if entries != sum(counts):
        raise CorruptShardError(shard, f"{name}: runs count {sum(counts)}, lines {entries}")
    chars = sum(map(operator.mul, map(len, prefixes), counts)) + suffix_chars
    if chars > budget:
        raise CorruptShardError(shard, f"{name} expands beyond {MAX_DECODED_ENVELOPE} characters")
    _check_text(shard, "".join(prefixes), name)
    _check_text(shard, text, name)
    return _Column(prefixes, counts, lines, chars)


def _build(column: _Column, head: str = "") -> list[str]:
    """The column's entries, `head` prepended to each: one C-level map (or replace) per run."""
    prefixes, suffixes = column.prefixes, column.suffixes
    if isinstance(suffixes, str) and len(prefixes) == 1:
        lead = head + prefixes[0]
        return (lead + suffixes.replace("\n", "\n" + lead)).split("\n")
    entries = column.split()
    strings: list[str] = []
    start = 0
    for prefix, count in zip(prefixes, column.counts, strict=True):
        lead = head + prefix
        chunk = entries[start : start + count]
        strings += map(lead.__add__, chunk) if lead else chunk
        start += count
    return strings


def _build_base64(column: _Column, encoding: int, head: str) -> list[str] | None:
    """`head` + the base64 of each stored id, in bulk, or None if a stored id holds a line
    break (no base64 id does). A run prefix is encoded once when its UTF-8 length is a multiple
    of 3 (base64 of a concatenation is then the concatenation); the rest goes per id, one C
    call each, and joins, replaces and splits put it together."""
    suffixes = column.suffixes
    if not isinstance(suffixes, str):
        if any("\n" in entry for entry in suffixes):
            return None
        suffixes = "\n".join(suffixes)
    entries = suffixes.encode("utf-8").split(b"\n")
    pieces: list[str] = []
    start = 0
    for prefix, count in zip(column.prefixes, column.counts, strict=True):
        raw = prefix.encode("utf-8")
        cut = len(raw) - len(raw) % 3
        lead = head + binascii.b2a_base64(raw[:cut], newline=False).decode("ascii")
        chunk = entries[start : start + count]
        start += count
        if cut < len(raw):
            chunk = list(map(raw[cut:].__add__, chunk))
        encoded = b"".join(map(binascii.b2a_base64, chunk))
        if encoding == UNPADDED:
            encoded = encoded.replace(b"=", b"")
        pieces.append(lead + encoded[:-1].decode("ascii").replace("\n", "\n" + lead))
    return (pieces[0] if len(pieces) == 1 else "\n".join(pieces)).split("\n")


def _decode_group(
    shard: str, row_kinds: Mapping[str, bool], group: Any, budget: int
) -> tuple[list[str], list[str], int]:
    row_kind, encoding, where = codec_v1.group_header(shard, row_kinds, group)
    values = _column(shard, group["values"], f"{where} values", budget)
    ids = _column(shard, group["ids"], f"{where} ids", budget - values.chars)
    if ids.entries != values.entries:
        raise CorruptShardError(shard, f"{where}: ids and values differ in length")
    head = f"{shard}/{row_kind}"
    chars = values.chars + ids.chars + ids.entries * (len(head) + 1)
    if chars > budget:
        raise CorruptShardError(shard, f"{where} expands beyond {MAX_DECODED_ENVELOPE} characters")
    if not row_kinds[row_kind]:
        if _build(ids) != [""] or encoding != PLAIN:
            raise CorruptShardError(shard, f"{where}: row kind takes no id, so one plain row")
        return [head], _build(values), chars
    head += "/"
    if encoding == PLAIN:
        keys = _build(ids, head)
    else:  # base64 is 4/3 of the stored bytes: the result is bounded before it is checked
        built = _build_base64(ids, encoding, head)
        if built is None:
            raise CorruptShardError(shard, f"{where}: a base64 id holds a line break")
        keys = built
        chars = values.chars + sum(map(len, keys))
        if chars > budget:
            raise CorruptShardError(
                shard, f"{where} expands beyond {MAX_DECODED_ENVELOPE} characters"
            )
    if head in keys:
        raise CorruptShardError(shard, f"{where}: an id is empty")
    return keys, _build(values), chars


def check_member(
    shard: str,
    document: dict[str, Any],
    member: str,
    fields: frozenset[str],
    fmt: str = SHARD_FORMAT_V2,
) -> None:
    if document.get("format") != fmt:
        raise CorruptShardError(shard, f"unknown format {document.get('format')!r}")
    if document.get("member") != member:
        found = document.get("member")
        raise CorruptShardError(shard, f"expected a {member} member, got {found!r}")
    if document.get("shard") != shard:
        raise CorruptShardError(shard, f"{member} member names shard {document.get('shard')!r}")
    if set(document) != fields:
        found = sorted(document)
        raise CorruptShardError(
            shard, f"{member} member fields {found} are not the {fmt.rsplit('-', 1)[-1]} set"
        )
    if type(document["rows"]) is not int or document["rows"] < 0:
        raise CorruptShardError(shard, f"{member} member: rows must be a count")


def row_kinds(shard: str, kinds: Kinds = COLLECTOR_KINDS) -> CollectorKind:
    try:
        return namespace_kind(shard, kinds)
    except KeyGrammarError as error:
        raise CorruptShardError(shard, f"not a valid shard key: {error.reason}") from None


def decode_base(
    shard: str,
    document: dict[str, Any],
    fmt: str = SHARD_FORMAT_V2,
    member: str = "base",
    fields: frozenset[str] = BASE_FIELDS,
    budget: int = MAX_DECODED_ENVELOPE,
    *,
    kinds: Kinds = COLLECTOR_KINDS,
) -> dict[str, str]:
    """Rows of a base member (already parsed): v2's, or a v3 inline base or chunk (`fmt`,
    `member` and its `fields`), expanding to at most `budget` characters."""
    check_member(shard, document, member, fields, fmt)
    groups = document["groups"]
    if not isinstance(groups, list):
        raise CorruptShardError(shard, "groups must be a list")
    shape = row_kinds(shard, kinds).row_kinds
    decoded: dict[str, str] = {}
    for group in groups:
        keys, values, chars = _decode_group(shard, shape, group, budget)
        budget -= chars
        decoded.update(zip(keys, values, strict=True))
    if len(decoded) != document["rows"]:
        raise CorruptShardError(
            shard, f"base says {document['rows']} rows, holds {len(decoded)} distinct"
        )
    return decoded


def apply_delta(
    shard: str,
    document: dict[str, Any],
    base_crc: int,
    rows: dict[str, str],
    prior: dict[str, str | None],
    fmt: str = SHARD_FORMAT_V2,
    *,
    kinds: Kinds = COLLECTOR_KINDS,
) -> None:
    """Apply one parsed delta member to `rows` in place, recording each changed row's base value
    in `prior`; refuses (before changing anything) a delta that does not fit."""
    check_member(shard, document, "delta", DELTA_FIELDS, fmt)
    if type(document["base"]) is not int or document["base"] != base_crc:
        raise CorruptShardError(shard, "delta member was written against another base")
    changed, deleted = document["set"], document["delete"]
    if not isinstance(changed, dict) or not isinstance(deleted, list):
        raise CorruptShardError(shard, "delta: set must be an object and delete a list")
    if not set(map(type, deleted)) <= {str} or not set(map(type, changed.values())) <= {str}:
        raise CorruptShardError(shard, "delta: rows and values must be strings")
    _check_text(shard, "".join(changed) + "".join(changed.values()) + "".join(deleted), "delta")
    kind = row_kinds(shard, kinds)
    for row in itertools.chain(changed, deleted):
        problem = relative_row_problem(kind, row)
        if problem is not None:
            raise CorruptShardError(shard, f"delta row {row!r}: {problem}")
    if len(set(deleted)) != len(deleted) or not set(deleted).isdisjoint(changed):
        raise CorruptShardError(shard, "delta deletes a row twice, or sets a row it deletes")
    head = shard + "/"
    for row in deleted:
        if head + row not in rows:
            raise CorruptShardError(shard, f"delta deletes row {row!r}, which is absent")
    after = len(rows) - len(deleted) + sum(head + row not in rows for row in changed)
    if after != document["rows"]:
        raise CorruptShardError(shard, f"delta says {document['rows']} rows, gives {after}")
    for row in deleted:
        prior.setdefault(head + row, rows.pop(head + row))
    for row, value in changed.items():
        key = head + row
        prior.setdefault(key, rows.get(key))
        rows[key] = value


def decode_stored(shard: str, blob: bytes, kinds: Kinds = COLLECTOR_KINDS) -> DecodedShard:
    """Rows of a stored blob (v2 or v1) and its base, bounded and fail-closed (its rows
    spelled by the grammar of `kinds`)."""
    members = gunzip_members(blob, MAX_DECODED_ENVELOPE, shard)
    first = load(shard, members[0].data)
    if first.get("format") == SHARD_FORMAT_V1:
        if len(members) != 1:
            raise CorruptShardError(shard, "trailing bytes after the gzip member")
        return DecodedShard(
            SHARD_FORMAT_V1, codec_v1.decode_envelope(shard, members[0].data, kinds)
        )
    rows = decode_base(shard, first, kinds=kinds)
    base = Base(blob[: members[0].end], len(members[0].data))
    prior: dict[str, str | None] = {}
    for member in members[1:]:
        apply_delta(shard, load(shard, member.data), base.crc, rows, prior, kinds=kinds)
    return DecodedShard(SHARD_FORMAT_V2, rows, base, prior)


def decode_shard(shard: str, blob: bytes, kinds: Kinds = COLLECTOR_KINDS) -> dict[str, str]:
    """Rows of a stored shard blob (v2 or v1), bounded and fail-closed."""
    return decode_stored(shard, blob, kinds).rows
