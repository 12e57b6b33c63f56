"""A row-block layout of one shard's rows that decodes at inflate speed: the base layout of
`gzip-shards-v3` (encoding `rowblock-1`, format/codec_v3.py wraps it in a member).

`encode(rows)` gives the raw payload, ready for gzip; `decode(payload)` gives the rows back
(dict equality: the layout keeps no row order). The layout:

    b"ckpt-rowblock-1\\n"  <header: one line of JSON>  b"\\n"  <sections>

    header  {"rows": N, "groups": [[head, prefix, width, count, values_bytes, layout], ...],
             "plain": plain_bytes}

A group holds `count` rows whose keys are `head` + the unpadded standard base64 of an id of
`prefix_len + width` bytes (`head` is the key up to its last "/": `objectstore/f1/seen/`), all
ids sharing their first bytes, a multiple of 3 of them: that shared prefix is stored once, in
base64 (`prefix`), because base64 of a concatenation is then the concatenation of the base64s.
Each group's rows are sorted by value, then key, and take two sections, both fixed-width records
stored column by column (byte j of every record, for each j: gzip then sees runs and repeats
down each column, and a column of random hex costs its 4 bits a character; decoding restores
the records with one strided C-level copy per column):

- ids: the ids' remaining bytes stored decoded, `width` bytes each, zero-padded by 1 to 3 bytes
  to a multiple of 3. Decoding base64-encodes all records in one C call; the characters the
  padding adds to each record become its line break (one strided assignment; the surplus ones of
  a 2- or 3-byte padding are deleted), and a split cuts the keys apart: no call per id.
- values (`values_bytes` bytes, `layout`): ASCII values of one length, each with its line break,
  column by column (2: decoding is an untranspose and a split); else UTF-8 values joined by line
  breaks (0); else, when a value holds a line break, a JSON list (1).

Rows whose key is not `head` + canonical unpadded base64 go to one JSON object, the last
section (`plain_bytes` bytes). Decoding refuses, with CorruptShardError, anything the encoder
cannot have written: a bad magic or header, section lengths that do not add up, counts that do
not match, non-zero padding (a non-canonical id), invalid UTF-8 or a lone surrogate, duplicate
keys, and rows whose characters (keys and values) exceed the budget: MAX_DECODED_ENVELOPE
standalone, the shard's share of MAX_DECODED_ROW_CHARS inside a v3 member. Keys are counted
before they are built (a group's shared prefix is where a payload can expand), values as built
(they cannot be larger than their bytes), so the count is exactly the rows' characters, what
the encoder counts. A caller's `check` sees every group's keys with their shared head, and the
plain keys (head None), before they become rows.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from checkpoint_runtime.constants import MAX_DECODED_ENVELOPE
from checkpoint_runtime.errors import CorruptShardError, OversizeError, UnencodableTextError

MAGIC = b"ckpt-rowblock-1\n"
PLAIN_SHARD = "<row block>"  # the shard named in errors when the caller names none
_BASE64 = re.compile(r"[A-Za-z0-9+/]*")
_MIN_GROUP = 2  # a lone id row costs more as a group than as a plain row
LINES, JSON_LIST, FIXED = 0, 1, 2  # a group's values layout


def _split_key(key: str) -> tuple[str, bytes] | None:
    """(head, decoded id) when key is head + canonical unpadded base64, else None."""
    head, slash, row_id = key.rpartition("/")
    if not slash or not row_id or len(row_id) % 4 == 1 or not _BASE64.fullmatch(row_id):
        return None
    try:
        raw = binascii.a2b_base64(row_id + "=" * (-len(row_id) % 4))
    except binascii.Error:
        return None
    if binascii.b2a_base64(raw, newline=False).rstrip(b"=").decode("ascii") != row_id:
        return None
    return head + slash, raw


def _common_prefix(ids: list[bytes]) -> int:
    first, last = min(ids), max(ids)
    size = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        size += 1
    return size - size % 3


def _transpose(records: bytes, count: int) -> bytes:
    """`count` fixed-width records, column by column: byte j of every record, for each j."""
    width = len(records) // count
    return b"".join(records[j::width] for j in range(width))


def _untranspose(columns: bytes, count: int) -> bytearray:
    """Inverse of _transpose: one strided C-level copy per column."""
    width = len(columns) // count
    records = bytearray(len(columns))
    for j in range(width):
        records[j::width] = columns[j * count : (j + 1) * count]
    return records


def _encode_values(values: list[str]) -> tuple[bytes, int]:
    """(section, layout) of one group's values: fixed-width ASCII column by column when they
    all have one length, else lines, else (a value with a line break) a JSON list."""
    width = len(values[0])
    fixed = all(len(v) == width and v.isascii() and "\n" not in v for v in values)
    if width and fixed:
        return _transpose("".join(v + "\n" for v in values).encode("ascii"), len(values)), FIXED
    if any("\n" in value for value in values):
        return json.dumps(values, ensure_ascii=False).encode(), JSON_LIST
    return "\n".join(values).encode(), LINES


def encode(rows: Mapping[str, str], *, shard: str = PLAIN_SHARD) -> bytes:
    """The payload of `rows` (deterministic: equal rows give equal bytes)."""
    by_group: dict[tuple[str, int], list[tuple[str, bytes, str]]] = {}
    plain: dict[str, str] = {}
    for key, value in rows.items():
        try:
            key.encode("utf-8")
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UnencodableTextError(key) from None
        split = _split_key(key)
        if split is None:
            plain[key] = value
            continue
        head, raw = split
        by_group.setdefault((head, len(raw)), []).append((value, raw, key))
    groups: list[list[Any]] = []
    sections: list[bytes] = []
    for (head, size), members in sorted(by_group.items()):
        if len(members) < _MIN_GROUP:
            plain.update((key, value) for value, _, key in members)
            continue
        members.sort()
        ids = [raw for _, raw, _ in members]
        cut = _common_prefix(ids)
        width = size - cut
        pad = b"\0" * (3 - width % 3)
        values = [value for value, _, _ in members]
        values_bytes, layout = _encode_values(values)
        prefix = binascii.b2a_base64(ids[0][:cut], newline=False).decode("ascii")
        groups.append([head, prefix, width, len(members), len(values_bytes), layout])
        sections.append(_transpose(pad.join(raw[cut:] for raw in ids) + pad, len(members)))
        sections.append(values_bytes)
    plain_bytes = json.dumps(dict(sorted(plain.items())), ensure_ascii=False).encode()
    header = {"rows": len(rows), "groups": groups, "plain": len(plain_bytes)}
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    payload = b"".join([MAGIC, text, b"\n", *sections, plain_bytes])
    if len(payload) > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, len(payload), MAX_DECODED_ENVELOPE, len(rows))
    return payload


def _header(payload: bytes, shard: str, start: int = 0) -> tuple[dict[str, Any], int]:
    if not payload.startswith(MAGIC, start):
        raise CorruptShardError(shard, "not a row block (bad magic)")
    end = payload.find(b"\n", start + len(MAGIC))
    if end < 0:
        raise CorruptShardError(shard, "row block header is not terminated")
    try:
        header = json.loads(payload[start + len(MAGIC) : end])
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CorruptShardError(shard, "row block header is not JSON") from None
    if not isinstance(header, dict) or set(header) != {"rows", "groups", "plain"}:
        raise CorruptShardError(shard, "row block header must hold exactly rows, groups, plain")
    if not _count(header["rows"]) or not _count(header["plain"]):
        raise CorruptShardError(shard, "row block rows and plain must be counts")
    if not isinstance(header["groups"], list):
        raise CorruptShardError(shard, "row block groups must be a list")
    return header, end + 1


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_DECODED_ENVELOPE


def _group(group: Any, shard: str) -> tuple[str, str, int, int, int, int]:
    if not (
        isinstance(group, list)
        and len(group) == 6
        and isinstance(group[0], str)
        and isinstance(group[1], str)
        and all(_count(item) for item in group[2:5])
        and group[5] in (LINES, JSON_LIST, FIXED)
        and type(group[5]) is int
    ):
        raise CorruptShardError(shard, f"row block group {group!r:.80} is malformed")
    head, prefix, width, count, values_bytes, layout = group
    if count < _MIN_GROUP or not head.endswith("/") or width == 0:
        raise CorruptShardError(shard, f"row block group {head!r}: not a group the encoder writes")
    if len(prefix) % 4 or not _BASE64.fullmatch(prefix):
        raise CorruptShardError(shard, f"row block group {head!r}: prefix is not aligned base64")
    _check_text([head], shard)  # JSON escapes can spell a lone surrogate in a head
    return head, prefix, width, count, values_bytes, layout


KeyCheck = Callable[[str | None, list[str]], None]
"""Judges keys before they become rows: (the group's shared head, its keys), or (None, the
plain keys); raises to refuse them."""


def row_chars(rows: Mapping[str, str]) -> int:
    """What the decode budget counts: the rows' characters, keys and values."""
    return sum(map(len, rows)) + sum(map(len, rows.values()))


def decode(payload: bytes, *, shard: str = PLAIN_SHARD) -> dict[str, str]:
    """The rows of a payload `encode` wrote; CorruptShardError for anything else."""
    return decode_counted(payload, shard=shard)[0]


def decode_counted(
    payload: bytes,
    *,
    shard: str = PLAIN_SHARD,
    budget: int | None = None,
    check: KeyCheck | None = None,
    start: int = 0,
) -> tuple[dict[str, str], int]:
    """The rows of the payload at `start` of `payload` (to its end) and their characters
    (`row_chars`), refusing more than `budget` of them (default MAX_DECODED_ENVELOPE), and
    anything `encode` cannot have written or `check` refuses."""
    budget = MAX_DECODED_ENVELOPE if budget is None else budget
    header, at = _header(payload, shard, start)
    rows: dict[str, str] = {}
    limit = budget
    for group in header["groups"]:
        head, prefix, width, count, values_bytes, layout = _group(group, shard)
        padded = width + 3 - width % 3  # at least one byte of padding (see _keys)
        ids_end = at + padded * count
        values_end = ids_end + values_bytes
        if values_end > len(payload):
            raise CorruptShardError(shard, f"row block group {head!r} runs past the payload")
        lead = head + prefix
        chars = -(-4 * width // 3)  # unpadded base64 length of `width` bytes
        budget -= count * (len(lead) + chars)  # the keys, before they are built
        if budget < 0:
            raise CorruptShardError(shard, f"row block expands beyond {limit} characters")
        for column in range(width, padded):  # zero padding: every id canonical
            start = at + column * count
            if payload.count(0, start, start + count) != count:
                raise CorruptShardError(shard, f"row block group {head!r}: non-zero padding")
        keys = _keys(_untranspose(payload[at:ids_end], count), width, count, lead)
        values, value_chars = _values(payload[ids_end:values_end], layout, count, head, shard)
        if len(values) != count:
            raise CorruptShardError(shard, f"row block group {head!r}: {len(values)} values")
        budget -= value_chars
        if budget < 0:
            raise CorruptShardError(shard, f"row block expands beyond {limit} characters")
        if check is not None:
            check(head, keys)
        rows.update(zip(keys, values, strict=True))
        at = values_end
    if at + header["plain"] != len(payload):
        raise CorruptShardError(shard, "row block sections do not add up to the payload")
    plain = _plain(payload[at:], shard)
    budget -= row_chars(plain)
    if budget < 0:
        raise CorruptShardError(shard, f"row block expands beyond {limit} characters")
    if check is not None and plain:
        check(None, list(plain))
    rows.update(plain)
    if len(rows) != header["rows"]:
        raise CorruptShardError(shard, f"row block holds {len(rows)} rows, says {header['rows']}")
    return rows, limit - budget


def _keys(records: bytearray, width: int, count: int, lead: str) -> list[str]:
    """`lead` + the unpadded base64 of each record's first `width` bytes, in bulk: one base64
    call for all, then each record's base64 characters past the id's (the padding's: 1, 2 or 4)
    are overwritten, the last with a line break and the others with NULs that are deleted, so a
    split cuts the keys apart."""
    padded = len(records) // count
    stride = 4 * padded // 3
    extra = stride - -(-4 * width // 3)
    encoded = bytearray(binascii.b2a_base64(records, newline=False))
    if extra > 1:
        for back in range(2, extra + 1):
            encoded[stride - back :: stride] = bytes(count)
        encoded = encoded.translate(None, b"\0")
    encoded[-1 :: -(len(encoded) // count)] = b"\n" * count
    return list(map(lead.__add__, encoded[:-1].decode("ascii").split("\n")))


def _values(data: bytes, layout: int, count: int, head: str, shard: str) -> tuple[list[str], int]:
    """A group's values and their characters (counted without a step per value where the
    layout allows: fixed-width ASCII and lines)."""
    if layout == FIXED:
        width, extra = divmod(len(data), count)
        if extra or not width or not data.isascii():
            raise CorruptShardError(shard, f"row block group {head!r}: bad fixed-width values")
        if data.count(b"\n") != count or data[-count:] != b"\n" * count:
            raise CorruptShardError(shard, "bad fixed-width values")
        values = _untranspose(data, count)[:-1].decode("ascii").split("\n")
        return values, len(data) - count
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptShardError(shard, f"row block group {head!r}: values are not UTF-8") from None
    if layout == LINES:
        values = text.split("\n")
        return values, len(text) - len(values) + 1
    try:
        values = json.loads(text)
    except (ValueError, RecursionError):
        raise CorruptShardError(shard, f"row block group {head!r}: values are not JSON") from None
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise CorruptShardError(shard, f"row block group {head!r}: values must be strings")
    _check_text(values, shard)
    return values, sum(map(len, values))


def _plain(data: bytes, shard: str) -> dict[str, str]:
    try:
        plain = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise CorruptShardError(shard, "row block plain rows are not JSON") from None
    if not isinstance(plain, dict) or not all(isinstance(v, str) for v in plain.values()):
        raise CorruptShardError(shard, "row block plain rows must map strings to strings")
    _check_text(list(plain) + list(plain.values()), shard)
    return plain


def _check_text(strings: list[str], shard: str) -> None:
    """JSON escapes can spell a lone surrogate, which is not text."""
    try:
        "".join(strings).encode("utf-8")
    except UnicodeEncodeError:
        raise CorruptShardError(shard, "row block holds a lone surrogate") from None
