"""Reading `gzip-shards-v1` (SPEC §4: every format ever written stays readable): round trip,
determinism of the v1 writer, bounded and fail-closed decoding. The v1 writer is kept for these
tests and for fixtures; the store writes v2 (test_codec_v2.py)."""

from __future__ import annotations

import base64
import gzip
import json
import uuid
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoint_runtime.constants import MAX_DECODED_ENVELOPE, SHARD_FORMAT_V1
from checkpoint_runtime.errors import CorruptShardError, KeyGrammarError
from checkpoint_runtime.format import codec, codec_v1
from checkpoint_runtime.format.reference_rows import FeedWorkload, flowlogs_rows
from checkpoint_testenv.baseline import baseline_encode

SHARD = "tn/objectstore/feed"
SCHEMA = json.loads(
    (Path(__file__).parents[2] / "schemas" / "shard-envelope.schema.json").read_text()
)


def rows_of(shape: str = "old-design", seen: int = 200) -> dict[str, str]:
    workload = FeedWorkload(SHARD, seen, shape, gap_rows=3)
    return workload.rows


def envelope_of(rows: dict[str, str]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(codec_v1.encode_envelope(SHARD, rows))
    return document


def blob_of(document: Any) -> bytes:
    return codec.gzip_fixed(json.dumps(document).encode())


@pytest.mark.parametrize("shape", ["old-design", "uuid"])
def test_round_trip_and_schema(shape: str) -> None:
    rows = rows_of(shape)
    assert codec.decode_shard(SHARD, codec.encode_v1_blob(SHARD, rows)) == rows
    assert codec.encode_shard(SHARD, rows).rows == len(rows)
    jsonschema.validate(envelope_of(rows), SCHEMA)


def test_equal_input_gives_equal_bytes_whatever_the_insertion_order() -> None:
    rows = rows_of()
    reordered = dict(reversed(list(rows.items())))
    first = codec.encode_v1_blob(SHARD, rows)
    assert codec.encode_v1_blob(SHARD, reordered) == first
    assert first[4:8] == b"\0\0\0\0"  # gzip mtime is zero
    assert gzip.decompress(first)  # and it is ordinary gzip


def test_flowlogs_rows_and_padded_and_unpadded_base64_ids_round_trip() -> None:
    rows = flowlogs_rows("tn/flowlogs")
    rows["tn/flowlogs/replay/YWJj"] = "unpadded? no: 'abc' is 4 chars, canonical"
    rows["tn/flowlogs/replay/YWI="] = "padded"
    rows["tn/flowlogs/replay/YWI"] = "unpadded"
    rows["tn/flowlogs/replay/////"] = "not printable base64"
    rows["tn/flowlogs/replay/ünïcode"] = "ok"
    assert codec.decode_shard("tn/flowlogs", codec.encode_v1_blob("tn/flowlogs", rows)) == rows


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.one_of(
            st.text(min_size=1, max_size=30).map(lambda i: f"{SHARD}/seen/{i}"),
            st.text(min_size=1, max_size=30).map(lambda i: f"{SHARD}/gap/{i}"),
            st.sampled_from([f"{SHARD}/cursor", f"{SHARD}/scan"]),
        ),
        st.text(max_size=40),
        max_size=30,
    )
)
def test_any_rows_of_the_shard_round_trip(rows: dict[str, str]) -> None:
    assert codec.decode_shard(SHARD, codec.encode_v1_blob(SHARD, rows)) == rows


def test_encoder_refuses_rows_of_another_shard() -> None:
    with pytest.raises(KeyGrammarError):
        codec.encode_v1_blob(SHARD, {"tn/objectstore/other/cursor": "x"})


def test_gzip_bomb_is_rejected_without_inflating_it() -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    bomb = b"".join(compressor.compress(chunk) for _ in range(129)) + compressor.flush()
    assert len(bomb) < 200_000 < MAX_DECODED_ENVELOPE
    with pytest.raises(CorruptShardError, match="exceeds"):
        codec.decode_shard(SHARD, bomb)


def test_front_coding_cannot_expand_past_the_bound() -> None:
    document = envelope_of({f"{SHARD}/seen/a": "x"})
    big = "v" * (1 << 20)
    document["groups"] = [
        {
            "kind": "seen",
            "base64": 0,
            "ids": {"prefix": [0] * 200, "suffix": [str(i) for i in range(200)]},
            "values": {"prefix": [0] + [1 << 20] * 199, "suffix": [big] + [""] * 199},
        }
    ]
    document["rows"] = 200
    with pytest.raises(CorruptShardError, match="expands beyond"):
        codec.decode_shard(SHARD, blob_of(document))


def mutate(path: str, value: Any) -> Any:
    document: Any = envelope_of(rows_of(seen=5))
    target = document
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return document


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"not gzip at all", "bad gzip"),
        (codec.encode_v1_blob(SHARD, {f"{SHARD}/cursor": "x"})[:-6], "truncated"),
        (codec.encode_v1_blob(SHARD, {f"{SHARD}/cursor": "x"}) + b"junk", "trailing"),
        (codec.gzip_fixed(b"\xff\xfe not json"), "not JSON"),
        (codec.gzip_fixed(b"[1, 2]"), "not a JSON object"),
        (blob_of(mutate("format", "gzip-shards-v9")), "unknown format"),
        (blob_of(mutate("shard", "tn/objectstore/other")), "names shard"),
        (blob_of(mutate("rows", 99)), "holds"),
        (blob_of(mutate("extra", 1)), "v1 set"),
        (blob_of(mutate("groups.0.kind", "replay")), "not a row kind"),
        (blob_of(mutate("groups.0.base64", 7)), "base64 must be"),
        (blob_of(mutate("groups.0.ids.prefix.0", -1)), "negative"),
        (blob_of(mutate("groups.0.ids.prefix.0", 500)), "longer than the previous"),
        (blob_of(mutate("groups.0.ids.prefix.0", True)), "integers"),
        (blob_of(mutate("groups.0.ids.suffix.0", 5)), "strings"),
        (blob_of(mutate("groups.0.values.suffix", [])), "differ in length"),
        (blob_of(mutate("groups.0.ids", {"prefix": [0], "suffix": ["x"], "more": 1})), "exactly"),
    ],
)
def test_corrupt_shards_fail_closed_with_a_named_error(blob: bytes, message: str) -> None:
    with pytest.raises(CorruptShardError, match=message):
        codec.decode_shard(SHARD, blob)


def test_row_of_another_shard_inside_an_envelope_is_rejected() -> None:
    document = envelope_of({f"{SHARD}/cursor": "x"})
    document["groups"][0]["ids"]["suffix"] = ["../../other"]
    with pytest.raises(CorruptShardError, match="takes no id"):
        codec.decode_shard(SHARD, blob_of(document))
    document = envelope_of({f"{SHARD}/seen/x": "x"})
    document["groups"][0]["ids"]["suffix"] = [""]
    with pytest.raises(CorruptShardError, match="empty"):
        codec.decode_shard(SHARD, blob_of(document))


def test_schema_rejects_what_the_decoder_rejects() -> None:
    for path, value in [("format", "x"), ("groups.0.base64", 3), ("groups.0.ids.prefix.0", -1)]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(mutate(path, value), SCHEMA)
    assert SCHEMA["properties"]["format"]["const"] == SHARD_FORMAT_V1


def test_envelope_beats_the_baseline_on_both_workloads() -> None:
    """Size is a property of the bytes, not a timing: checked here, measured in the bench."""
    for shape in ("old-design", "uuid"):
        rows = FeedWorkload(SHARD, 5000, shape).rows
        ours = len(codec.encode_shard(SHARD, rows).blob)
        assert ours <= 0.75 * len(baseline_encode(rows)), shape


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_decode_only_to_a_named_error(blob: bytes) -> None:
    with pytest.raises(CorruptShardError):
        codec.decode_shard(SHARD, blob)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: (
            st.lists(c, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "format",
                        "shard",
                        "rows",
                        "groups",
                        "kind",
                        "base64",
                        "ids",
                        "values",
                        "prefix",
                        "suffix",
                    ]
                ),
                c,
                max_size=5,
            )
        ),
        max_leaves=30,
    )
)
def test_arbitrary_json_decodes_only_to_rows_or_a_named_error(document: Any) -> None:
    if isinstance(document, dict):
        document = {"format": SHARD_FORMAT_V1, "shard": SHARD, **document}
    try:
        rows = codec.decode_shard(SHARD, blob_of(document))
    except CorruptShardError:
        return
    assert all(key.startswith(SHARD + "/") for key in rows)


def group_encodings(rows: dict[str, str]) -> set[tuple[str, int]]:
    return {(g["kind"], g["base64"]) for g in envelope_of(rows)["groups"]}


def test_ids_are_stored_decoded_only_where_that_pays_off() -> None:
    uuid_rows = rows_of("uuid", seen=2000)
    assert ("seen", 1) in group_encodings(uuid_rows)  # UUID names: decoded, ~10 % smaller
    assert ("seen", 0) in group_encodings(rows_of("old-design", seen=5000))  # not worth it
    names = [f"logs/{uuid.UUID(int=i * 7919)}.gz".encode() for i in range(1, 2000)]
    padded = {f"{SHARD}/seen/{base64.b64encode(name).decode()}": "t" for name in names}
    assert ("seen", 2) in group_encodings(padded)
    mixed = {**uuid_rows, **padded}
    assert codec.decode_shard(SHARD, codec.encode_v1_blob(SHARD, mixed)) == mixed
    assert codec.decode_shard(SHARD, codec.encode_shard(SHARD, mixed).blob) == mixed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab/0", max_size=6), max_size=12))
def test_ascii_fast_path_finds_the_same_shared_prefixes(strings: list[str]) -> None:
    slow = list(map(codec_v1._shared_prefix, ["", *strings[:-1]], strings))
    assert codec_v1._ascii_shared_prefixes(strings) == slow


def naive_front_decode(prefixes: list[int], suffixes: list[str]) -> list[str] | None:
    strings, previous = [], ""
    for prefix, suffix in zip(prefixes, suffixes, strict=True):
        if prefix > len(previous):
            return None
        previous = previous[:prefix] + suffix
        strings.append(previous)
    return strings


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.text(alphabet="ab", max_size=3)), min_size=1, max_size=8
    )
)
def test_front_decoding_fast_path_agrees_with_the_definition(column: list[tuple[int, str]]) -> None:
    prefixes, suffixes = [p for p, _ in column], [s for _, s in column]
    expected = naive_front_decode(prefixes, suffixes)
    data = {"prefix": prefixes, "suffix": suffixes}
    if expected is None:
        with pytest.raises(CorruptShardError):
            codec_v1._front_decode(SHARD, data, "column", MAX_DECODED_ENVELOPE)
    else:
        assert codec_v1._front_decode(SHARD, data, "column", MAX_DECODED_ENVELOPE) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab/0é", max_size=6), min_size=1, max_size=12))
def test_front_coding_round_trips(strings: list[str]) -> None:
    coded = codec_v1._front_code(strings)
    assert codec_v1._front_decode(SHARD, coded, "column", MAX_DECODED_ENVELOPE) == strings


def test_uniform_prefix_columns_decode_fast_and_still_fail_closed() -> None:
    rows = rows_of("uuid", seen=300)
    document = envelope_of(rows)
    seen = next(g for g in document["groups"] if g["kind"] == "seen")
    prefixes = seen["ids"]["prefix"]
    assert len(set(prefixes[1:])) == 1  # random names: one uniform prefix length
    assert codec.decode_shard(SHARD, blob_of(document)) == rows
    seen["ids"]["prefix"] = [0] + [len(seen["ids"]["suffix"][0]) + 1] * (len(prefixes) - 1)
    with pytest.raises(CorruptShardError, match="longer than the previous"):
        codec.decode_shard(SHARD, blob_of(document))


def surrogate_blob(encoding: int) -> bytes:
    document = envelope_of({f"{SHARD}/seen/x": "v"})
    document["groups"][0].update(base64=encoding, ids={"prefix": [0], "suffix": ["\ud800"]})
    return blob_of(document)  # ASCII JSON carrying a lone \\ud800 escape


@pytest.mark.parametrize("encoding", [0, 1])
def test_lone_surrogates_are_corrupt_so_every_opened_shard_can_be_written_back(
    encoding: int,
) -> None:
    with pytest.raises(CorruptShardError, match="surrogate"):
        codec.decode_shard(SHARD, surrogate_blob(encoding))


def test_deeply_nested_json_is_a_corrupt_shard_not_a_recursion_error() -> None:
    with pytest.raises(CorruptShardError, match="nests too deeply"):
        codec.decode_shard(SHARD, codec.gzip_fixed(b"[" * 100_000))


def test_a_line_break_in_a_base64_group_id_is_corrupt() -> None:
    document = envelope_of({f"{SHARD}/seen/x": "v", f"{SHARD}/seen/y": "w"})
    document["groups"][0].update(base64=1, ids={"prefix": [0, 0], "suffix": ["a\nb", "c"]})
    with pytest.raises(CorruptShardError, match="line break"):
        codec.decode_shard(SHARD, blob_of(document))
