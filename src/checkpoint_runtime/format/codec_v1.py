"""The `gzip-shards-v1` envelope: still read, written only by tests and fixtures.

A v1 blob is one gzip member (zlib level 9, fixed header) of this JSON envelope
(schemas/shard-envelope.schema.json); `codec.encode_v1_blob` writes one, `codec.decode_shard`
reads it:

    {"format": "gzip-shards-v1", "shard": "<shard key>", "rows": N, "groups": [
        {"kind": "<row kind>", "base64": 0 | 1 | 2,
         "ids": {"prefix": [...], "suffix": [...]}, "values": {"prefix": [...], "suffix": [...]}}]}

Rows are grouped by row kind and sorted by value, then id; ids and values are separate columns,
each front-coded against the previous entry (`prefix` = characters shared with it, `suffix` = the
rest); a column whose entries share hardly more than one common prefix uses that prefix length
throughout. Ids that are canonical base64 of printable text may be stored decoded (group
`base64`: 1 unpadded, 2 padded, 0 as is). A row kind without ids is a group with the single id "".
The id-encoding decision and the bulk base64 re-encoding are shared with `gzip-shards-v2`.
"""

from __future__ import annotations

import binascii
import json
import zlib
from collections.abc import Mapping
from typing import Any

from checkpoint_runtime.constants import (
    BASE64_DECODED_MAX_FRACTION,
    BASE64_TRIAL_ROWS,
    MAX_DECODED_ENVELOPE,
    SHARD_FORMAT_V1,
    UNIFORM_PREFIX_SLACK,
)
from checkpoint_runtime.errors import CorruptShardError, KeyGrammarError, OversizeError
from checkpoint_runtime.format.naming import COLLECTOR_KINDS, Kinds, namespace_kind

PLAIN, UNPADDED, PADDED = 0, 1, 2


def _shared_prefix(previous: str, current: str) -> int:
    """Length of the common prefix, by binary search over C-speed slice comparisons."""
    low, high = 0, min(len(previous), len(current))
    while low < high:
        middle = (low + high + 1) // 2
        if previous[:middle] == current[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _ascii_shared_prefixes(strings: list[str]) -> list[int]:
    """Shared-prefix lengths of ASCII strings: the first differing byte is found by XOR-ing the
    two strings as big integers (C speed, about twice as fast as the binary search)."""
    encoded = [text.encode("ascii") for text in strings]
    from_bytes = int.from_bytes
    lengths: list[int] = []
    previous = b""
    for current in encoded:
        n = min(len(previous), len(current))
        differing = from_bytes(previous[:n], "big") ^ from_bytes(current[:n], "big")
        lengths.append(n - ((differing.bit_length() + 7) >> 3))
        previous = current
    return lengths


def shared_prefixes(strings: list[str]) -> list[int]:
    """For each string, the length of the prefix it shares with the one before (0 for the first)."""
    if all(map(str.isascii, strings)):
        return _ascii_shared_prefixes(strings)
    return list(map(_shared_prefix, ["", *strings[:-1]], strings))


def _front_code(strings: list[str]) -> dict[str, list[Any]]:
    prefixes = shared_prefixes(strings)
    if len(prefixes) > 2:
        # Where entries share little beyond the column's common prefix (random names in time
        # order), one uniform prefix length costs next to nothing in size and lets the decoder
        # rebuild the column in C (see _front_decode).
        common = min(prefixes[1:])
        if sum(prefixes) - common * (len(prefixes) - 1) <= UNIFORM_PREFIX_SLACK * len(prefixes):
            prefixes = [0] + [common] * (len(prefixes) - 1)
    suffixes = [text[shared:] for text, shared in zip(strings, prefixes, strict=True)]
    return {"prefix": prefixes, "suffix": suffixes}


def _printable_base64(row_id: str) -> tuple[str, int] | None:
    """The text `row_id` is canonical base64 of, and how it was padded, if it round-trips."""
    if not row_id.isascii():
        return None
    try:
        raw = binascii.a2b_base64(row_id + "=" * (-len(row_id) % 4), strict_mode=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not text.isprintable():
        return None
    encoded = binascii.b2a_base64(raw, newline=False).decode("ascii")
    if encoded == row_id:
        return text, PADDED
    if encoded.rstrip("=") == row_id:
        return text, UNPADDED
    return None


def _by_value_then_id(entry: list[str]) -> tuple[str, str]:
    # Value order puts timestamps of one feed side by side: front coding then removes their
    # shared date and hour (measured: better than id order on UUID names, equal on sequential).
    return entry[1], entry[0]


def rows_by_kind(shard: str, rows: Mapping[str, str]) -> dict[str, list[list[str]]]:
    """Row kind -> [[id, value], ...] with ids relative to the shard."""
    head = shard + "/"
    kinds: dict[str, list[list[str]]] = {}
    for key, value in rows.items():
        if not key.startswith(head):
            raise KeyGrammarError(key, f"does not belong to shard {shard!r}")
        row_kind, _, row_id = key[len(head) :].partition("/")
        kinds.setdefault(row_kind, []).append([row_id, value])
    return kinds


def _trial_bytes(groups: Mapping[int, list[list[str]]]) -> int:
    """An estimate (gzip level 6) of what the id columns of `groups` compress to."""
    text = json.dumps([_front_code([entry[0] for entry in g]) for g in groups.values()])
    return len(zlib.compress(text.encode("utf-8"), 6))


def _split_by_encoding(entries: list[list[str]]) -> dict[int, list[list[str]]]:
    """Entries by id encoding, ids that are canonical base64 of printable text decoded."""
    split: dict[int, list[list[str]]] = {}
    for row_id, value in entries:
        decoded = _printable_base64(row_id) if row_id else None
        if decoded is None:
            split.setdefault(PLAIN, []).append([row_id, value])
        else:
            split.setdefault(decoded[1], []).append([decoded[0], value])
    for group in split.values():
        group.sort(key=_by_value_then_id)
    return split


def id_encodings(entries: list[list[str]]) -> dict[int, list[list[str]]]:
    """Split one row kind by id encoding: decoded base64 only where it pays for its decode cost.

    Decided on a deterministic sample (the first rows in value order), which is enough to tell
    high-entropy names (decoding pays) from sequential ones (it does not) at a fraction of the cost.
    """
    ordered = sorted(entries, key=_by_value_then_id)
    sample = ordered[:BASE64_TRIAL_ROWS]
    sample_split = _split_by_encoding(sample)
    if set(sample_split) == {PLAIN}:
        return {PLAIN: ordered}
    if _trial_bytes(sample_split) <= BASE64_DECODED_MAX_FRACTION * _trial_bytes({PLAIN: sample}):
        return _split_by_encoding(ordered)
    return {PLAIN: ordered}


def encode_envelope(shard: str, rows: Mapping[str, str]) -> bytes:
    """The v1 envelope JSON of `rows` (every key must lie in `shard`)."""
    raw_size = sum(map(len, rows)) + sum(map(len, rows.values()))
    if raw_size > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, raw_size, MAX_DECODED_ENVELOPE, len(rows))
    groups = []
    for row_kind, kind_entries in sorted(rows_by_kind(shard, rows).items()):
        for encoding, entries in sorted(id_encodings(kind_entries).items()):
            groups.append(
                {
                    "kind": row_kind,
                    "base64": encoding,
                    "ids": _front_code([entry[0] for entry in entries]),
                    "values": _front_code([entry[1] for entry in entries]),
                }
            )
    envelope = {"format": SHARD_FORMAT_V1, "shard": shard, "rows": len(rows), "groups": groups}
    text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(text) > MAX_DECODED_ENVELOPE:
        raise OversizeError(shard, len(text), MAX_DECODED_ENVELOPE, len(rows))
    return text


def _only(items: list[Any], kind: type) -> bool:
    return set(map(type, items)) <= {kind}


def _front_decode(shard: str, column: Any, name: str, budget: int) -> list[str]:
    """Undo front coding; every check is a bulk (C-speed) operation over the whole column."""
    if not isinstance(column, dict) or set(column) != {"prefix", "suffix"}:
        raise CorruptShardError(shard, f"{name} must hold exactly prefix and suffix")
    prefixes, suffixes = column["prefix"], column["suffix"]
    if not (isinstance(prefixes, list) and isinstance(suffixes, list)):
        raise CorruptShardError(shard, f"{name}: prefix and suffix must be lists")
    if len(prefixes) != len(suffixes) or not prefixes:
        raise CorruptShardError(shard, f"{name}: prefix and suffix differ in length or are empty")
    if not _only(prefixes, int):
        raise CorruptShardError(shard, f"{name}: prefix must be integers")
    if min(prefixes) < 0:
        raise CorruptShardError(shard, f"{name}: negative prefix length")
    try:  # every character comes from a suffix: if they encode, every decoded row does
        joined = "".join(suffixes)
        joined.encode("utf-8")
    except TypeError:
        raise CorruptShardError(shard, f"{name}: suffix must be strings") from None
    except UnicodeEncodeError:
        raise CorruptShardError(shard, f"{name}: a lone surrogate is not text") from None
    expected = sum(prefixes) + len(joined)
    if expected > budget:
        raise CorruptShardError(shard, f"{name} expands beyond {MAX_DECODED_ENVELOPE} characters")
    common = prefixes[1] if len(prefixes) > 1 else 0
    if prefixes[0] == 0 < common and prefixes.count(common) == len(prefixes) - 1:
        # Uniform prefix: every entry is the first entry's head plus its suffix.
        if len(suffixes[0]) < common:
            raise CorruptShardError(shard, f"{name}: a prefix is longer than the previous entry")
        head = suffixes[0][:common]
        return [suffixes[0], *map(head.__add__, suffixes[1:])]
    strings: list[str] = []
    append = strings.append
    previous = ""
    for prefix, suffix in zip(prefixes, suffixes, strict=True):
        previous = previous[:prefix] + suffix
        append(previous)
    # Equal totals iff no prefix ran past the previous entry (slicing would have clipped it).
    if sum(map(len, strings)) != expected:
        raise CorruptShardError(shard, f"{name}: a prefix is longer than the previous entry")
    return strings


def encode_ids(ids: list[str], encoding: int) -> list[str]:
    """Re-encode decoded ids to base64 in bulk: one C call per id, joins and splits in C.

    Stored ids of a base64 group are printable, so they hold no line break; one that does
    comes back as extra entries, which the caller detects by the count."""
    if encoding == PLAIN:
        return ids
    raw = "\n".join(ids).encode("utf-8").split(b"\n")  # stored ids are printable: no "\n"
    lines = b"".join(map(binascii.b2a_base64, raw)).decode("ascii")
    if encoding == UNPADDED:
        lines = lines.replace("=", "")
    return lines.split("\n")[:-1]


def group_header(shard: str, row_kinds: Mapping[str, bool], group: Any) -> tuple[str, int, str]:
    """A row group's row kind and base64 encoding, checked (the same in every format version),
    and how errors name the group."""
    if not isinstance(group, dict) or set(group) != {"kind", "base64", "ids", "values"}:
        raise CorruptShardError(shard, "a group must hold exactly kind, base64, ids, values")
    row_kind, encoding = group["kind"], group["base64"]
    where = f"group {row_kind!r}"
    if not isinstance(row_kind, str) or row_kind not in row_kinds:
        raise CorruptShardError(
            shard, f"{where}: not a row kind of this shard ({', '.join(sorted(row_kinds))})"
        )
    if type(encoding) is not int or encoding not in (PLAIN, UNPADDED, PADDED):
        raise CorruptShardError(shard, f"{where}: base64 must be 0, 1 or 2")
    return row_kind, encoding, where


def _decode_group(
    shard: str, row_kinds: Mapping[str, bool], group: Any, budget: int
) -> tuple[list[str], list[str]]:
    row_kind, encoding, where = group_header(shard, row_kinds, group)
    ids = _front_decode(shard, group["ids"], f"{where} ids", budget)
    values = _front_decode(shard, group["values"], f"{where} values", budget)
    if len(ids) != len(values):
        raise CorruptShardError(shard, f"{where}: ids and values differ in length")
    head = f"{shard}/{row_kind}"
    if not row_kinds[row_kind]:
        if ids != [""] or encoding != PLAIN:
            raise CorruptShardError(shard, f"{where}: row kind takes no id, so one plain row")
        return [head], values
    if not all(ids):
        raise CorruptShardError(shard, f"{where}: an id is empty")
    encoded = encode_ids(ids, encoding)
    if len(encoded) != len(ids):
        raise CorruptShardError(shard, f"{where}: a base64 id holds a line break")
    return list(map((head + "/").__add__, encoded)), values


def load_envelope(shard: str, data: bytes, what: str = "an envelope") -> dict[str, Any]:
    """The JSON object of an envelope (every format's), or a named error."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        raise CorruptShardError(shard, f"envelope is not JSON: {error}") from None
    except RecursionError:
        raise CorruptShardError(shard, f"envelope nests too deeply to be {what}") from None
    if not isinstance(document, dict):
        raise CorruptShardError(shard, "envelope is not a JSON object")
    return document


def decode_envelope(
    shard: str, envelope_bytes: bytes, kinds: Kinds = COLLECTOR_KINDS
) -> dict[str, str]:
    """Rows of an envelope, or a named error; the envelope must be for `shard`."""
    envelope = load_envelope(shard, envelope_bytes, "a v1 envelope")
    if envelope.get("format") != SHARD_FORMAT_V1:
        raise CorruptShardError(shard, f"unknown format {envelope.get('format')!r}")
    if envelope.get("shard") != shard:
        raise CorruptShardError(shard, f"envelope names shard {envelope.get('shard')!r}")
    if set(envelope) != {"format", "shard", "rows", "groups"}:
        raise CorruptShardError(shard, f"envelope fields {sorted(envelope)} are not the v1 set")
    rows, groups = envelope["rows"], envelope["groups"]
    if type(rows) is not int or rows < 0 or not isinstance(groups, list):
        raise CorruptShardError(shard, "rows must be a count and groups a list")
    try:
        row_kinds = namespace_kind(shard, kinds).row_kinds
    except KeyGrammarError as error:
        raise CorruptShardError(shard, f"not a valid shard key: {error.reason}") from None
    decoded: dict[str, str] = {}
    budget = MAX_DECODED_ENVELOPE
    for group in groups:
        keys, values = _decode_group(shard, row_kinds, group, budget)
        budget -= sum(map(len, keys)) + sum(map(len, values))
        decoded.update(zip(keys, values, strict=True))
    if len(decoded) != rows:
        raise CorruptShardError(shard, f"envelope says {rows} rows, holds {len(decoded)} distinct")
    return decoded
