"""The `gzip-shards-v2` codec (SPEC §4): base and delta members, determinism, bounded and
fail-closed decoding across members."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoint_runtime.constants import MAX_DECODED_ENVELOPE
from checkpoint_runtime.constants import SHARD_FORMAT_V2 as SHARD_FORMAT
from checkpoint_runtime.errors import CorruptShardError, KeyGrammarError
from checkpoint_runtime.format import codec, codec_v1
from checkpoint_runtime.format.codec import gunzip_members, gzip_fast
from checkpoint_runtime.format.reference_rows import FeedWorkload

SHARD = "tn/objectstore/feed"
SCHEMA = json.loads(
    (Path(__file__).parents[2] / "schemas" / "shard-envelope-v2.schema.json").read_text()
)
ROW_KEYS = st.one_of(
    st.text(min_size=1, max_size=30).map(lambda i: f"{SHARD}/seen/{i}"),
    st.text(min_size=1, max_size=30).map(lambda i: f"{SHARD}/gap/{i}"),
    st.sampled_from([f"{SHARD}/cursor", f"{SHARD}/scan"]),
)


def rows_of(shape: str = "old-design", seen: int = 200) -> dict[str, str]:
    return FeedWorkload(SHARD, seen, shape, gap_rows=3).rows


def documents(blob: bytes) -> list[dict[str, Any]]:
    return [json.loads(m.data) for m in gunzip_members(blob, MAX_DECODED_ENVELOPE, SHARD)]


def member(document: Any) -> bytes:
    return gzip_fast(json.dumps(document).encode())


def with_delta(rows: dict[str, str], changes: dict[str, str | None]) -> codec.EncodedShard:
    base = codec.encode_shard(SHARD, rows).base
    after = {**rows, **{k: v for k, v in changes.items() if v is not None}}
    for key, value in changes.items():
        if value is None:
            after.pop(key)
    return codec.encode_delta(SHARD, base, changes, len(after))


CHANGES: dict[str, str | None] = {
    f"{SHARD}/cursor": "moved",
    f"{SHARD}/seen/bmV3": "2026-03-02T00:00:00.000000001Z",
    f"{SHARD}/gap/000001": None,
}


@pytest.mark.parametrize("shape", ["old-design", "uuid"])
def test_base_round_trips_and_matches_the_schema(shape: str) -> None:
    rows = rows_of(shape)
    encoded = codec.encode_shard(SHARD, rows)
    decoded = codec.decode_stored(SHARD, encoded.blob)
    assert decoded.rows == rows
    assert decoded.format == SHARD_FORMAT
    assert decoded.base == encoded.base
    assert decoded.base_prior == {}
    (document,) = documents(encoded.blob)
    jsonschema.validate(document, SCHEMA)
    assert encoded.raw_bytes == len(codec.encode_envelope(SHARD, rows))


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(ROW_KEYS, st.text(max_size=40), max_size=30))
def test_any_rows_of_the_shard_round_trip(rows: dict[str, str]) -> None:
    assert codec.decode_shard(SHARD, codec.encode_shard(SHARD, rows).blob) == rows


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(ROW_KEYS, st.text(max_size=20), max_size=20),
    st.dictionaries(ROW_KEYS, st.none() | st.text(max_size=20), max_size=10),
)
def test_any_delta_applies_to_its_base(rows: dict[str, str], wanted: dict[str, str | None]) -> None:
    changes = {k: v for k, v in wanted.items() if v is not None or k in rows}
    expected = {**rows, **{k: v for k, v in changes.items() if v is not None}}
    for key, value in changes.items():
        if value is None:
            del expected[key]
    encoded = with_delta(rows, changes)
    decoded = codec.decode_stored(SHARD, encoded.blob)
    assert decoded.rows == expected
    assert decoded.base_prior == {key: rows.get(key) for key in changes}
    for document in documents(encoded.blob):
        jsonschema.validate(document, SCHEMA)


def test_a_delta_member_holds_only_the_changed_rows_and_is_standard_gzip() -> None:
    rows = rows_of()
    encoded = with_delta(rows, CHANGES)
    base, delta = documents(encoded.blob)
    assert base["member"] == "base"
    assert delta == {
        "format": SHARD_FORMAT,
        "member": "delta",
        "shard": SHARD,
        "base": zlib.crc32(codec.encode_envelope(SHARD, rows)),
        "rows": len(rows),
        "set": {"cursor": "moved", "seen/bmV3": "2026-03-02T00:00:00.000000001Z"},
        "delete": ["gap/000001"],
    }
    assert encoded.blob.startswith(encoded.base.member)
    assert encoded.delta_bytes == len(encoded.blob) - len(encoded.base.member)
    # gzip -dc yields base then delta
    assert gzip.decompress(encoded.blob) == b"".join(
        m.data for m in gunzip_members(encoded.blob, MAX_DECODED_ENVELOPE, SHARD)
    )
    assert codec.encode_delta(SHARD, encoded.base, {}, len(rows)).blob == encoded.base.member


def test_equal_rows_and_equal_history_give_equal_bytes() -> None:
    rows = rows_of("uuid")
    reordered = dict(reversed(list(rows.items())))
    assert codec.encode_shard(SHARD, rows).blob == codec.encode_shard(SHARD, reordered).blob
    assert (
        with_delta(rows, CHANGES).blob
        == with_delta(reordered, dict(reversed(list(CHANGES.items())))).blob
    )
    assert codec.encode_shard(SHARD, rows).blob[4:8] == b"\0\0\0\0"  # gzip mtime is zero


def test_encoder_refuses_rows_of_another_shard() -> None:
    with pytest.raises(KeyGrammarError):
        codec.encode_shard(SHARD, {"tn/objectstore/other/cursor": "x"})
    base = codec.encode_shard(SHARD, rows_of()).base
    with pytest.raises(KeyGrammarError):
        codec.encode_delta(SHARD, base, {"tn/objectstore/other/cursor": "x"}, 1)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(max_size=12), min_size=0, max_size=6),
    st.text(max_size=30).filter(lambda key: not key.startswith(SHARD + "/")),
)
def test_a_delta_names_any_key_outside_its_shard_wherever_it_sorts(
    suffixes: list[str], stray: str
) -> None:
    """The encoder checks only the first and last sorted key: a key outside the shard can
    sort before, after or (never) between the shard's keys, and is named either way."""
    changes: dict[str, str | None] = {f"{SHARD}/{suffix}": "x" for suffix in suffixes}
    changes[stray] = None
    with pytest.raises(KeyGrammarError) as refused:
        codec.delta_envelope(SHARD, 0, changes, len(changes), SHARD_FORMAT)
    assert refused.value.key == stray


def test_a_v1_blob_still_decodes_and_has_no_base_to_write_deltas_against() -> None:
    rows = rows_of("uuid")
    decoded = codec.decode_stored(SHARD, codec.encode_v1_blob(SHARD, rows))
    assert decoded.rows == rows
    assert decoded.base is None
    with pytest.raises(CorruptShardError, match="trailing"):
        codec.decode_shard(SHARD, codec.encode_v1_blob(SHARD, rows) + member({"format": 1}))


# -- fail closed ----------------------------------------------------------------------------------

ROWS = {f"{SHARD}/cursor": "c", f"{SHARD}/seen/a": "1", f"{SHARD}/seen/b": "2"}
BASE = codec.encode_shard(SHARD, ROWS).base


def base_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(codec.encode_envelope(SHARD, ROWS))
    return document


def delta_document(**fields: Any) -> dict[str, Any]:
    document = {
        "format": SHARD_FORMAT,
        "member": "delta",
        "shard": SHARD,
        "base": BASE.crc,
        "rows": 3,
        "set": {"cursor": "d"},
        "delete": [],
    }
    return {**document, **fields}


def base_with(**fields: Any) -> bytes:
    return member({**base_document(), **fields})


def seen_group(**fields: Any) -> bytes:
    document = base_document()
    group = next(g for g in document["groups"] if g["kind"] == "seen")
    group.update(fields)
    return member(document)


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (BASE.member + member(delta_document(shard="tn/objectstore/other")), "names shard"),
        (BASE.member + member(delta_document(format="gzip-shards-v3")), "unknown format"),
        (base_with(format="gzip-shards-v3"), "unknown format"),
        (member({**base_document(), "member": "delta"}), "expected a base member"),
        (BASE.member + BASE.member, "expected a delta member"),
        (BASE.member + member(delta_document(delete=["seen/zzz"], rows=2)), "absent"),
        (BASE.member + member(delta_document(base=BASE.crc ^ 1)), "another base"),
        (BASE.member + member(delta_document(set={"replay/x": "v"}, rows=4)), "not one of"),
        (BASE.member + member(delta_document(set={"seen": "v"}, rows=4)), "needs an /<id>"),
        (BASE.member + member(delta_document(rows=4)), "gives 3"),
        (BASE.member + member(delta_document(delete=["seen/a"])), "gives 2"),
        (BASE.member + member(delta_document(delete=["seen/a", "seen/a"], rows=1)), "twice"),
        (BASE.member + member(delta_document(set={"seen/a": "x"}, delete=["seen/a"])), "twice"),
        (BASE.member + member(delta_document(set={"cursor": 5})), "strings"),
        (BASE.member + member(delta_document(set=[])), "must be an object"),
        (BASE.member + member(delta_document(extra=1)), "not the v2 set"),
        (BASE.member + member(delta_document(set={"cursor": "\ud800"})), "surrogate"),
        (BASE.member + gzip_fast(b"[1]"), "not a JSON object"),
        (BASE.member + member(delta_document())[:-3], "truncated"),
        (BASE.member + b"junk", "trailing"),
        (base_with(rows=9), "holds 3 distinct"),
        (base_with(extra=1), "not the v2 set"),
        (seen_group(kind="replay"), "not a row kind"),
        (seen_group(base64=7), "base64 must be"),
        (seen_group(ids={"runs": [["", 2]], "lines": "a"}), "runs count 2, lines 1"),
        (seen_group(ids={"runs": [["", 0], ["", 2]], "lines": "a\nb"}), "count > 0"),
        (seen_group(ids={"runs": [[1, 2]], "lines": "a\nb"}), "prefix, count"),
        (seen_group(ids={"runs": [], "lines": ""}), "non-empty"),
        (seen_group(ids={"runs": [["", 2]], "lines": 5}), "string or a list"),
        (seen_group(ids={"runs": [["", 2]], "lines": "a\nb", "x": 1}), "exactly runs and lines"),
        (seen_group(ids={"runs": [["", 3]], "lines": "a\nb\nc"}), "differ in length"),
        (seen_group(ids={"runs": [["", 2]], "lines": "a\n"}), "an id is empty"),
        (seen_group(ids={"runs": [["\ud800", 2]], "lines": "a\nb"}), "surrogate"),
        (seen_group(base64=1, ids={"runs": [["", 2]], "lines": ["a\nb", "c"]}), "line break"),
    ],
)
def test_corrupt_members_fail_closed_with_a_named_error(blob: bytes, message: str) -> None:
    with pytest.raises(CorruptShardError, match=message):
        codec.decode_shard(SHARD, blob)


def test_runs_cannot_expand_past_the_bound() -> None:
    big = "v" * (1 << 20)
    blob = seen_group(
        values={"runs": [[big, 200]], "lines": "\n" * 199},
        ids={"runs": [["", 200]], "lines": "\n".join(map(str, range(200)))},
    )
    with pytest.raises(CorruptShardError, match="expands beyond"):
        codec.decode_shard(SHARD, blob)


def test_the_decoded_bound_covers_all_members_together() -> None:
    """Each member alone is under 128 MiB (JSON allows trailing blanks); together they are over."""
    half = MAX_DECODED_ENVELOPE // 2 + 1
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    padded_base = codec.encode_envelope(SHARD, ROWS) + b" " * half
    base_member = compressor.compress(padded_base) + compressor.flush()
    assert codec.decode_shard(SHARD, base_member) == ROWS
    delta = json.dumps(delta_document(base=zlib.crc32(padded_base))).encode() + b" " * half
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    delta_member = compressor.compress(delta) + compressor.flush()
    with pytest.raises(CorruptShardError, match="exceeds"):
        codec.decode_shard(SHARD, base_member + delta_member)


def test_delta_of_a_base_with_line_breaks_and_base64_ids_round_trips() -> None:
    rows = {
        f"{SHARD}/seen/{codec_v1.encode_ids([f'logs/{i:04d}-name.json.gz'], 1)[0]}": f"v{i}\n"
        for i in range(300)
    }
    rows[f"{SHARD}/scan"] = "line\nbreak"
    encoded = codec.encode_shard(SHARD, rows)
    assert codec.decode_shard(SHARD, encoded.blob) == rows
    assert any(group["base64"] for group in documents(encoded.blob)[0]["groups"])
