"""The 128 MiB bound on what one shard may decode to, from both sides.

The encoder refuses to produce an envelope the decoder would refuse (escaping makes the JSON
text longer than the rows it holds, so the bound is checked on the text, not only on the rows).
The decoder's budget is one for the whole shard: every group of a base (v2 and v1) and every
column of a group draw from it, so a shard cut into pieces each under the bound is refused.
The bound across gzip members is covered in test_codec_v2.py.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from checkpoint_runtime.constants import MAX_DECODED_ENVELOPE, SHARD_FORMAT_V1, SHARD_FORMAT_V2
from checkpoint_runtime.errors import CorruptShardError, OversizeError
from checkpoint_runtime.format import codec

SHARD = "tn/objectstore/feed"
MIB = 1 << 20
PIECE = 70  # MiB per piece: each piece is under the bound, two of them are over


def test_the_encoder_refuses_rows_over_the_bound() -> None:
    rows = {f"{SHARD}/cursor": "c" * (MAX_DECODED_ENVELOPE + 1)}
    with pytest.raises(OversizeError):
        codec.encode_shard(SHARD, rows)


def test_the_encoder_refuses_an_envelope_whose_escaped_text_is_over_the_bound() -> None:
    """The rows are a sixth of the bound; JSON writes each control character as \\u0001, so
    the envelope text is past it. Without the encoder's check on the text it would write a
    shard that no reader can open."""
    value = "\x01" * (MAX_DECODED_ENVELOPE // 6 + MIB)
    rows = {f"{SHARD}/cursor": value}
    assert len(value) < MAX_DECODED_ENVELOPE
    with pytest.raises(OversizeError) as raised:
        codec.encode_shard(SHARD, rows)
    assert raised.value.limit == MAX_DECODED_ENVELOPE


def test_a_delta_that_would_take_the_shard_past_the_bound_is_refused() -> None:
    """Base and delta are each under the bound; together they decode past it."""
    base = codec.encode_shard(SHARD, {f"{SHARD}/cursor": "b" * (PIECE * MIB)}).base
    changes: dict[str, str | None] = {f"{SHARD}/scan": "d" * (PIECE * MIB)}
    with pytest.raises(OversizeError):
        codec.encode_delta(SHARD, base, changes, 2)


# -- the decoder's budget is one per shard -----------------------------------------------------


def _v2_values(total_mib: int) -> dict[str, Any]:
    """A v2 run column of `total_mib` entries of 1 MiB each, a few bytes on the wire."""
    return {"runs": [["v" * MIB, total_mib]], "lines": "\n" * (total_mib - 1)}


def _v2_ids(count: int) -> dict[str, Any]:
    return {"runs": [["", count]], "lines": "\n".join(map(str, range(count)))}


def _v2_blob(groups: list[dict[str, Any]], rows: int) -> bytes:
    base = {"format": SHARD_FORMAT_V2, "member": "base", "shard": SHARD, "rows": rows}
    return gzip.compress(json.dumps({**base, "groups": groups}).encode())


def test_v2_groups_share_one_budget() -> None:
    """Two row groups of 70 MiB each: each is under the bound, the shard is not."""
    groups = [
        {"kind": kind, "base64": 0, "ids": _v2_ids(PIECE), "values": _v2_values(PIECE)}
        for kind in ("seen", "gap")
    ]
    with pytest.raises(CorruptShardError, match="expands beyond"):
        codec.decode_shard(SHARD, _v2_blob(groups, 2 * PIECE))


def test_v2_ids_and_values_of_one_group_share_one_budget() -> None:
    ids = {"runs": [["i" * MIB, PIECE]], "lines": "\n".join(map(str, range(PIECE)))}
    group = {"kind": "seen", "base64": 0, "ids": ids, "values": _v2_values(PIECE)}
    with pytest.raises(CorruptShardError, match="expands beyond"):
        codec.decode_shard(SHARD, _v2_blob([group], PIECE))


def _v1_column(entries: int, head: str) -> dict[str, Any]:
    """A v1 front-coded column: every entry repeats the first one's `head`."""
    suffix = [head, *map(str, range(1, entries))]
    return {"prefix": [0, *[len(head)] * (entries - 1)], "suffix": suffix}


def test_v1_groups_share_one_budget() -> None:
    """The released format's reader keeps one budget across groups too."""
    groups = [
        {
            "kind": kind,
            "base64": 0,
            "ids": {"prefix": [0] * PIECE, "suffix": [str(i) for i in range(PIECE)]},
            "values": _v1_column(PIECE, "v" * MIB),
        }
        for kind in ("seen", "gap")
    ]
    envelope = {"format": SHARD_FORMAT_V1, "shard": SHARD, "rows": 2 * PIECE, "groups": groups}
    with pytest.raises(CorruptShardError, match="expands beyond"):
        codec.decode_shard(SHARD, gzip.compress(json.dumps(envelope).encode()))
