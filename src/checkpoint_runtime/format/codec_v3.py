"""`gzip-shards-v3`: a head (the commit point) and chunk slots; deterministic, bounded, fail-closed.

The head is the shard's own object. Its blob is a multi-member gzip stream:

- a head member, the manifest:

      {"format": "gzip-shards-v3", "member": "head", "shard": "<shard key>", "rows": N,
       "partitions": P, "active": "abba...",
       "slots": {"a0": ["<resourceVersion>", "<sha256 hex of the slot's blob>", bytes], ...},
       "encoding": "rowblock-1"}

  `rows` counts the base's rows; `partitions` is how many chunks hold the base (0: the base is
  inline, in the head); `active` names, per chunk index, the generation (`a`/`b`) whose slot
  holds that chunk; `slots` records every slot ever written, of both generations, with the
  resourceVersion its write returned and the digest of its content; `encoding` names the
  layout of every base member (inline and chunks): `rowblock-1`;
- with `partitions` 0, a base member (member `base`);
- optionally one delta member (as v2's, format v3), written against the base identified by
  `base_crc(...)`.

A chunk slot holds one gzip member, a base member of one hash partition of the rows. A base
member (inline or chunk) is one line of JSON, a line break, and a row block of its rows
(format/rowblock.py):

      {"format": "gzip-shards-v3", "member": "chunk", "shard": "<shard key>",
       "encoding": "rowblock-1", "chunk": i, "partitions": P}\n<row block>

(an inline base has member `base` and no chunk or partitions).

v3 as first written (a head without `encoding`) kept its base members in the v2 column layout
(`{"format": "gzip-shards-v3", "member": "chunk", ..., "rows": n, "groups": [...]}`): still
read; the store compacts such a shard whole at its next persist, so a head it writes always
names its encoding. A reader of that first layout refuses a head naming one (its field set).

A row belongs to chunk `crc32(key) mod P` (`partition_of`), so a change of one row touches one
chunk. Decoding refuses, with CorruptShardError: everything v2 refuses, a head whose manifest is
malformed (an active chunk without a slot record, a generation other than a/b, an index past
the partitions), an unknown encoding, a base member whose header line is not the set above or
names another shard, member kind or encoding than its head, everything rowblock.decode refuses,
a row that is not a row of the shard's kind, a chunk for another index or partition count, a
row in the wrong chunk, a row in two chunks, row counts that do not add up, more than 128 MiB
inflated over the head and every chunk together, and (row blocks) more than
MAX_DECODED_ROW_CHARS characters of rows over them. Checking a chunk's blob against the manifest
digest is the reader's (it decides between corruption and a compaction committed meanwhile).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from checkpoint_runtime.constants import (
    BASE_ENCODING,
    CHUNK_GENERATIONS,
    DELTA_DEFLATE_LEVEL,
    HEAD_MEMBER_CACHE,
    MAX_CHUNKS_LIMIT,
    MAX_DECODED_ENVELOPE,
    MAX_DECODED_ROW_CHARS,
    SHARD_FORMAT,
)
from checkpoint_runtime.errors import (
    CorruptShardError,
    KeyGrammarError,
    OversizeError,
)
from checkpoint_runtime.format import codec, rowblock
from checkpoint_runtime.format.codec import gunzip_members, gzip_fast
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    CollectorKind,
    Kinds,
    namespace_kind,
    relative_row_problem,
)

JSON_COLUMNS = ""
"""The encoding of v3 as first written (a head without `encoding`): the v2 column layout."""
HEAD_FIELDS_JSON = frozenset({"format", "member", "shard", "rows", "partitions", "active", "slots"})
HEAD_FIELDS = HEAD_FIELDS_JSON | {"encoding"}
CHUNK_FIELDS = frozenset({"format", "member", "shard", "chunk", "partitions", "rows", "groups"})
"""A chunk member's fields in the JSON column layout."""
BASE_LINE_FIELDS = frozenset({"format", "member", "shard", "encoding"})
CHUNK_LINE_FIELDS = BASE_LINE_FIELDS | {"chunk", "partitions"}
_SLOT = re.compile(r"^([ab])(0|[1-9][0-9]{0,2})$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def partition_of(key: str, partitions: int) -> int:
    """The chunk index of row `key` among `partitions` chunks (stable: crc32 of the key)."""
    return zlib.crc32(key.encode("utf-8")) % partitions


def partition(rows: Mapping[str, str], partitions: int) -> list[dict[str, str]]:
    """`rows` cut into `partitions` hash partitions."""
    parts: list[dict[str, str]] = [{} for _ in range(partitions)]
    for key, value in rows.items():
        parts[zlib.crc32(key.encode("utf-8")) % partitions][key] = value
    return parts


def digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def slot_key(generation: str, index: int) -> str:
    return f"{generation}{index}"


def other_generation(generation: str) -> str:
    return CHUNK_GENERATIONS[1 - CHUNK_GENERATIONS.index(generation)]


@dataclass(frozen=True)
class Slot:
    """What the manifest records of one chunk slot: its version, content digest and size."""

    version: str
    digest: str
    bytes: int


@dataclass(frozen=True)
class Manifest:
    """The head's record of the chunk slots: how many chunks, which generation is active per
    index, and every slot written so far (both generations)."""

    partitions: int = 0
    active: str = ""
    slots: Mapping[str, Slot] = field(default_factory=dict)

    def active_slot(self, index: int) -> str:
        return slot_key(self.active[index], index)

    def inactive_slot(self, index: int) -> str:
        """The slot a compaction writes chunk `index` into (the generation not active; `a` for
        an index past the active ones)."""
        if index < len(self.active):
            return slot_key(other_generation(self.active[index]), index)
        return slot_key(CHUNK_GENERATIONS[0], index)

    def active_slots(self) -> list[str]:
        return [self.active_slot(index) for index in range(self.partitions)]

    @property
    def chunk_bytes(self) -> int:
        return sum(self.slots[name].bytes for name in self.active_slots())

    def document(self) -> dict[str, list[Any]]:
        return {
            name: [slot.version, slot.digest, slot.bytes]
            for name, slot in sorted(self.slots.items())
        }


def base_crc(manifest: Manifest, inline: bytes | None) -> int:
    """What a delta names as its base: the inline base member's CRC, or a CRC over the active
    chunks' digests (a new compaction changes it)."""
    if inline is not None:
        return zlib.crc32(inline) & 0xFFFFFFFF
    text = ",".join(f"{name}:{manifest.slots[name].digest}" for name in manifest.active_slots())
    return zlib.crc32(f"{manifest.partitions}|{text}".encode()) & 0xFFFFFFFF


# -- encoding -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodedChunk:
    index: int
    blob: bytes
    raw_bytes: int
    rows: int

    @property
    def digest(self) -> str:
        return digest(self.blob)


def _row_problem(kind: CollectorKind, shard: str, key: str) -> str | None:
    head = shard + "/"
    if not key.startswith(head):
        return f"does not belong to shard {shard!r}"
    return relative_row_problem(kind, key[len(head) :])


def base_member(
    shard: str,
    rows: Mapping[str, str],
    member: str,
    extra: Mapping[str, Any],
    kinds: Kinds = COLLECTOR_KINDS,
) -> bytes:
    """A base member's data: its JSON line, then the row block of `rows` (every key a row of
    `shard`, else KeyGrammarError; past a decode bound, OversizeError)."""
    kind = namespace_kind(shard, kinds)
    for key in rows:
        problem = _row_problem(kind, shard, key)
        if problem is not None:
            raise KeyGrammarError(key, problem)
    chars = rowblock.row_chars(rows)
    if chars > MAX_DECODED_ROW_CHARS:
        raise OversizeError(shard, chars, MAX_DECODED_ROW_CHARS, len(rows))
    line = {"format": SHARD_FORMAT, "member": member, "shard": shard, "encoding": BASE_ENCODING}
    text = json.dumps({**line, **extra}, ensure_ascii=False, separators=(",", ":")).encode()
    data = text + b"\n" + rowblock.encode(rows, shard=shard)
    if len(data) > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, len(data), MAX_DECODED_ENVELOPE, len(rows))
    return data


def encode_chunk(
    shard: str, rows: Mapping[str, str], index: int, partitions: int, kinds: Kinds = COLLECTOR_KINDS
) -> EncodedChunk:
    """One chunk slot's blob: a base member of `rows` (partition `index` of `partitions`)."""
    data = base_member(shard, rows, "chunk", {"chunk": index, "partitions": partitions}, kinds)
    return EncodedChunk(index, gzip_fast(data), len(data), len(rows))


def encode_inline(
    shard: str, rows: Mapping[str, str], kinds: Kinds = COLLECTOR_KINDS
) -> tuple[bytes, int]:
    """An inline base member of `rows` and its raw bytes."""
    data = base_member(shard, rows, "base", {}, kinds)
    return gzip_fast(data), len(data)


def decoded_size(rows: Mapping[str, str], member_bytes: int) -> int:
    """What the decode bounds count for a base of `rows` whose members inflate to
    `member_bytes`, in bytes of MAX_DECODED_ENVELOPE: the larger of those bytes and the rows'
    characters scaled to it (MAX_DECODED_ROW_CHARS bounds them). At most MAX_DECODED_ENVELOPE
    exactly when the encoder admits the base."""
    chars = rowblock.row_chars(rows)
    return max(member_bytes, math.ceil(chars * MAX_DECODED_ENVELOPE / MAX_DECODED_ROW_CHARS))


def measure(shard: str, rows: Mapping[str, str]) -> tuple[int, int]:
    """Compressed bytes of `rows` as one base member, and their decoded size (`decoded_size`):
    what the startup projection scales."""
    blob, raw = encode_inline(shard, rows)
    return len(blob), decoded_size(rows, raw)


@dataclass(frozen=True)
class EncodedHead:
    blob: bytes
    raw_bytes: int
    """Raw bytes of the head's members (head, inline base, delta)."""
    delta_bytes: int


@functools.lru_cache(maxsize=HEAD_MEMBER_CACHE)
def _head_member(text: bytes) -> bytes:
    """The head member of `text`. A head's manifest changes only at a compaction, so most
    persists rewrite the same head member beside a new delta: compressing it again would
    cost a deflate (and a compressor allocation) per persist for identical bytes."""
    return gzip_fast(text, DELTA_DEFLATE_LEVEL)


def encode_head(
    shard: str,
    manifest: Manifest,
    base_rows: int,
    inline: bytes | None,
    inline_raw: int,
    changes: Mapping[str, str | None],
    rows_after: int,
) -> EncodedHead:
    """The head blob: the manifest, the inline base (if any), and a delta of `changes`."""
    head = {
        "format": SHARD_FORMAT,
        "member": "head",
        "shard": shard,
        "rows": base_rows,
        "partitions": manifest.partitions,
        "active": manifest.active,
        "slots": manifest.document(),
        "encoding": BASE_ENCODING,
    }
    text = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    blob = _head_member(text) + (inline or b"")
    raw = len(text) + inline_raw
    delta_bytes = 0
    if changes:
        delta = codec.delta_envelope(
            shard, base_crc(manifest, inline), changes, rows_after, SHARD_FORMAT
        )
        member = gzip_fast(delta, DELTA_DEFLATE_LEVEL)
        blob += member
        raw += len(delta)
        delta_bytes = len(member)
    if raw > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, raw, MAX_DECODED_ENVELOPE, rows_after)
    return EncodedHead(blob, raw, delta_bytes)


# -- decoding -------------------------------------------------------------------------------------


@dataclass
class DecodedHead:
    """A parsed head: the manifest, the inline base rows, the delta (not yet applied)."""

    manifest: Manifest
    base_rows: int
    inline: bytes | None
    """The inline base member's bytes (None: the base is in chunks)."""
    inline_rows: dict[str, str] | None
    inline_raw: int
    delta: dict[str, Any] | None
    raw_bytes: int
    budget: int
    """Decode budget (inflated bytes) left for the chunks."""
    encoding: str = BASE_ENCODING
    """The base members' layout: BASE_ENCODING, or JSON_COLUMNS (v3 as first written)."""
    chars_budget: int = MAX_DECODED_ROW_CHARS
    """Characters of rows the chunks may still expand to (row blocks)."""


@dataclass(frozen=True)
class DecodedChunk:
    rows: dict[str, str]
    raw_bytes: int
    """Inflated bytes (counted against the shard's decode bound)."""
    chars: int
    """Characters of rows (row blocks; 0 in the JSON column layout)."""


def _manifest(shard: str, document: dict[str, Any]) -> Manifest:
    partitions, active, slots = document["partitions"], document["active"], document["slots"]
    if type(partitions) is not int or not 0 <= partitions <= MAX_CHUNKS_LIMIT:
        raise CorruptShardError(shard, f"head: partitions must be 0..{MAX_CHUNKS_LIMIT}")
    if not isinstance(active, str) or len(active) != partitions or set(active) - {"a", "b"}:
        raise CorruptShardError(shard, "head: active must name a generation (a/b) per chunk")
    if not isinstance(slots, dict):
        raise CorruptShardError(shard, "head: slots must be an object")
    parsed: dict[str, Slot] = {}
    for name, record in slots.items():
        match = _SLOT.match(name)
        if match is None or int(match.group(2)) >= MAX_CHUNKS_LIMIT:
            raise CorruptShardError(shard, f"head: {name!r} is not a slot")
        if (
            not isinstance(record, list)
            or len(record) != 3
            or not isinstance(record[0], str)
            or not record[0]
            or not isinstance(record[1], str)
            or not _DIGEST.match(record[1])
            or type(record[2]) is not int
            or record[2] < 0
        ):
            raise CorruptShardError(shard, f"head: slot {name!r} must be [version, sha256, bytes]")
        parsed[name] = Slot(record[0], record[1], record[2])
    manifest = Manifest(partitions, active, parsed)
    missing = [name for name in manifest.active_slots() if name not in parsed]
    if missing:
        raise CorruptShardError(shard, f"head: active chunk slot(s) {missing} never written")
    return manifest


def _key_check(shard: str, kinds: Kinds) -> rowblock.KeyCheck:
    """Refuses keys that are not rows of `shard`: a group whose head spells the shard, a row
    kind taking an id and a "/" is judged once (its keys differ only in their non-empty ids);
    any other group and the plain keys key by key."""
    kind = codec.row_kinds(shard, kinds)
    prefix = shard + "/"

    def check(head: str | None, keys: list[str]) -> None:
        if (
            head is not None
            and head.startswith(prefix)
            and "/" in head[len(prefix) :]
            and relative_row_problem(kind, head[len(prefix) :] + "-") is None
        ):
            return
        for key in keys:
            problem = _row_problem(kind, shard, key)
            if problem is not None:
                raise CorruptShardError(shard, f"row {key!r:.120}: {problem}")

    return check


def _decode_base_member(
    shard: str, data: bytes, member: str, chars_budget: int, kinds: Kinds
) -> tuple[dict[str, Any], dict[str, str], int]:
    """A row-block base member: its JSON line (checked) and its rows and their characters."""
    end = data.find(b"\n")
    if end < 0:
        raise CorruptShardError(shard, f"{member} member: no line break after its JSON line")
    line = codec.load(shard, data[:end])
    fields = CHUNK_LINE_FIELDS if member == "chunk" else BASE_LINE_FIELDS
    if line.get("format") != SHARD_FORMAT:
        raise CorruptShardError(shard, f"unknown format {line.get('format')!r}")
    if line.get("member") != member:
        raise CorruptShardError(shard, f"expected a {member} member, got {line.get('member')!r}")
    if line.get("shard") != shard:
        raise CorruptShardError(shard, f"{member} member names shard {line.get('shard')!r}")
    if line.get("encoding") != BASE_ENCODING:
        raise CorruptShardError(
            shard, f"{member} member encoding {line.get('encoding')!r} is not its head's"
        )
    if set(line) != fields:
        raise CorruptShardError(shard, f"{member} member fields {sorted(line)} are not the v3 set")
    rows, chars = rowblock.decode_counted(
        data, shard=shard, budget=chars_budget, check=_key_check(shard, kinds), start=end + 1
    )
    return line, rows, chars


def decode_head(shard: str, blob: bytes, kinds: Kinds = COLLECTOR_KINDS) -> DecodedHead:
    """Parse a v3 head blob (its first member must already be known to be a v3 head)."""
    members = gunzip_members(blob, MAX_DECODED_ENVELOPE, shard)
    used = sum(len(member.data) for member in members)
    document = codec.load(shard, members[0].data)
    encoding = document.get("encoding", JSON_COLUMNS)
    if encoding not in (BASE_ENCODING, JSON_COLUMNS) or ("encoding" in document and not encoding):
        raise CorruptShardError(shard, f"head: unknown base encoding {encoding!r}")
    fields = HEAD_FIELDS if encoding else HEAD_FIELDS_JSON
    codec.check_member(shard, document, "head", fields, SHARD_FORMAT)
    manifest = _manifest(shard, document)
    rest = members[1:]
    inline = inline_rows = None
    inline_raw = chars = 0
    if manifest.partitions == 0:
        if not rest:
            raise CorruptShardError(shard, "head without chunks holds no base member")
        start = members[0].end
        inline = blob[start : rest[0].end]
        if encoding:
            _, inline_rows, chars = _decode_base_member(
                shard, rest[0].data, "base", MAX_DECODED_ROW_CHARS, kinds
            )
        else:
            base = codec.load(shard, rest[0].data)
            inline_rows = codec.decode_base(shard, base, SHARD_FORMAT, kinds=kinds)
        inline_raw = len(rest[0].data)
        if len(inline_rows) != document["rows"]:
            raise CorruptShardError(shard, "head rows disagree with its base")
        rest = rest[1:]
    delta = None
    if rest:
        if len(rest) > 1:
            raise CorruptShardError(shard, "head holds more than one delta member")
        delta = codec.load(shard, rest[0].data)
    return DecodedHead(
        manifest,
        document["rows"],
        inline,
        inline_rows,
        inline_raw,
        delta,
        used,
        MAX_DECODED_ENVELOPE - used,
        encoding,
        MAX_DECODED_ROW_CHARS - chars,
    )


def decode_chunk(
    shard: str,
    blob: bytes,
    index: int,
    partitions: int,
    budget: int,
    *,
    encoding: str = BASE_ENCODING,
    chars_budget: int = MAX_DECODED_ROW_CHARS,
    kinds: Kinds = COLLECTOR_KINDS,
) -> DecodedChunk:
    """Rows of chunk `index` of `partitions` in its head's `encoding`, and the decode budget
    they used (the bounds are shared by the head and every chunk: `budget` inflated bytes,
    `chars_budget` characters of rows); refuses a chunk holding a row of another chunk."""
    members = gunzip_members(blob, budget, shard)
    if len(members) != 1:
        raise CorruptShardError(shard, f"chunk {index}: trailing bytes after the gzip member")
    data = members[0].data
    chars = 0
    if encoding:
        document, rows, chars = _decode_base_member(shard, data, "chunk", chars_budget, kinds)
    else:
        document = codec.load(shard, data)
        rows = codec.decode_base(
            shard, document, SHARD_FORMAT, "chunk", CHUNK_FIELDS, budget, kinds=kinds
        )
    if (
        type(document["chunk"]) is not int
        or type(document["partitions"]) is not int
        or document["chunk"] != index
        or document["partitions"] != partitions
    ):
        raise CorruptShardError(
            shard,
            f"chunk slot for index {index} of {partitions} holds chunk "
            f"{document['chunk']!r} of {document['partitions']!r}",
        )
    if partitions > 1:  # one partition holds every row
        crcs = map(zlib.crc32, map(str.encode, rows))
        if set(map(partitions.__rmod__, crcs)) - {index}:
            wrong = next(key for key in rows if partition_of(key, partitions) != index)
            raise CorruptShardError(shard, f"chunk {index} holds row {wrong!r} of another chunk")
    return DecodedChunk(rows, len(data), chars)


def assemble(
    shard: str,
    head: DecodedHead,
    chunks: Iterable[dict[str, str]],
    kinds: Kinds = COLLECTOR_KINDS,
) -> codec.DecodedShard:
    """The shard's rows: the base (inline or every chunk) with the head's delta applied; the
    head's inline rows or the largest chunk's dict become them (changed in place)."""
    # The decoded dicts are the caller's to give: the largest becomes the shard's rows (no copy).
    if head.inline_rows is not None:
        rows = head.inline_rows
    else:
        parts = sorted(chunks, key=len, reverse=True)
        rows = parts[0] if parts else {}
        for chunk in parts[1:]:
            rows.update(chunk)
    if len(rows) != head.base_rows:
        raise CorruptShardError(
            shard, f"head says {head.base_rows} base rows, chunks hold {len(rows)}"
        )
    prior: dict[str, str | None] = {}
    if head.delta is not None:
        crc = base_crc(head.manifest, head.inline)
        codec.apply_delta(shard, head.delta, crc, rows, prior, SHARD_FORMAT, kinds=kinds)
    return codec.DecodedShard(SHARD_FORMAT, rows, None, prior)


def is_v3(shard: str, blob: bytes) -> bool:
    """Whether the blob's first member is a v3 head (peeked without decoding the rest)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        start = inflater.decompress(blob, 64)
    except zlib.error:
        return False
    return start.startswith(b'{"format":"' + SHARD_FORMAT.encode() + b'","member":"head"')
