"""The row-block layout (format/rowblock.py): round trips of any rows, determinism, and
fail-closed decoding of anything the encoder cannot have written."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoint_runtime.errors import CorruptShardError, UnencodableTextError
from checkpoint_runtime.format import rowblock
from checkpoint_runtime.format.naming import object_id
from checkpoint_runtime.format.reference_rows import SHAPES, FeedWorkload

SHARD = "tn/objectstore/feed"


def ids_of(names: list[bytes]) -> dict[str, str]:
    return {
        f"{SHARD}/seen/{base64.b64encode(n).decode().rstrip('=')}": f"v{i}"
        for i, n in enumerate(names)
    }


def parts(payload: bytes) -> tuple[dict[str, object], bytes]:
    end = payload.index(b"\n", len(rowblock.MAGIC))
    return json.loads(payload[len(rowblock.MAGIC) : end]), payload[end + 1 :]


def rebuilt(header: dict[str, object], body: bytes) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    return rowblock.MAGIC + text + b"\n" + body


@pytest.mark.parametrize("shape", SHAPES)
def test_the_reference_workloads_round_trip_in_one_group(shape: str) -> None:
    rows = FeedWorkload(SHARD, 2000, shape, gap_rows=5).rows
    payload = rowblock.encode(rows)
    assert rowblock.decode(payload) == rows
    header, _ = parts(payload)
    assert len(header["groups"]) == 1  # type: ignore[arg-type]
    assert header["groups"][0][3] == 2000  # type: ignore[index]


@pytest.mark.parametrize("width", range(1, 13))
def test_every_id_width_round_trips(width: int) -> None:
    """Each padding case (1, 2 or 3 bytes) and prefix cut: the keys come back exact."""
    names = [bytes([48 + (i * 7 + j) % 75 for j in range(width)]) for i in range(40)]
    rows = ids_of(names) | ids_of([b"common-prefix-" + n for n in names])
    assert rowblock.decode(rowblock.encode(rows)) == rows


def test_equal_rows_give_equal_bytes_in_any_order() -> None:
    rows = FeedWorkload(SHARD, 300, "uuid").rows
    assert rowblock.encode(rows) == rowblock.encode(dict(reversed(list(rows.items()))))


def test_values_take_the_layout_their_shape_allows() -> None:
    names = [f"object-{i}".encode() for i in range(10)]
    fixed = dict.fromkeys(ids_of(names), "2026-03-01T00:00:00.000000001Z")
    lines = {key: "x" * i for i, key in enumerate(ids_of(names))}
    broken = {key: f"a\nb{i}" for i, key in enumerate(ids_of(names))}
    for rows, layout in ((fixed, rowblock.FIXED), (lines, rowblock.LINES), (broken, 1)):
        payload = rowblock.encode(rows)
        assert parts(payload)[0]["groups"][0][5] == layout  # type: ignore[index]
        assert rowblock.decode(payload) == rows


def test_keys_that_are_not_canonical_base64_are_plain_rows() -> None:
    rows = {
        f"{SHARD}/cursor": "c",
        f"{SHARD}/seen/YQ==": "padded",  # padded: not the unpadded form
        f"{SHARD}/seen/YR": "non-canonical",  # unused bits set
        f"{SHARD}/seen/Y": "too short",
        f"{SHARD}/seen/a-b": "not base64",
        "no-slash": "x",
        f"{SHARD}/seen/": "empty id",
    }
    payload = rowblock.encode(rows)
    assert parts(payload)[0]["groups"] == []
    assert rowblock.decode(payload) == rows


def test_a_lone_surrogate_is_refused_on_encode() -> None:
    with pytest.raises(UnencodableTextError):
        rowblock.encode({f"{SHARD}/seen/{object_id('a')}": "\ud800"})


ROW_IDS = st.one_of(
    st.binary(min_size=1, max_size=24).map(lambda b: base64.b64encode(b).decode().rstrip("=")),
    st.text(min_size=0, max_size=12),
)
ROWS = st.dictionaries(
    st.tuples(st.sampled_from([f"{SHARD}/seen/", f"{SHARD}/gap/", "x/", ""]), ROW_IDS).map("".join),
    st.one_of(st.text(max_size=12), st.sampled_from(["2026-03-01T00:00:00.0Z", "a\nb", ""])),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ROWS)
def test_any_rows_round_trip(rows: dict[str, str]) -> None:
    try:
        payload = rowblock.encode(rows)
    except UnencodableTextError:
        return
    assert rowblock.decode(payload) == rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=3, max_size=6), min_size=2, max_size=30, unique=True))
def test_shared_prefixes_of_any_length_round_trip(tails: list[bytes]) -> None:
    rows = ids_of([b"logs/2026/03/01/" + tail for tail in tails])
    assert rowblock.decode(rowblock.encode(rows)) == rows


# -- fail closed ---------------------------------------------------------------------------


@pytest.fixture
def payload() -> bytes:
    return rowblock.encode(FeedWorkload(SHARD, 50, "old-design").rows)


def corrupt(payload: bytes) -> str:
    with pytest.raises(CorruptShardError) as error:
        rowblock.decode(payload, shard=SHARD)
    assert error.value.shard == SHARD
    return error.value.reason


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_refused_by_name(data: bytes) -> None:
    with pytest.raises(CorruptShardError):
        rowblock.decode(data)
    with pytest.raises(CorruptShardError):
        rowblock.decode(rowblock.MAGIC + data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_single_byte_change_decodes_to_other_rows_or_is_refused(data: st.DataObject) -> None:
    rows = FeedWorkload(SHARD, 30, "uuid").rows
    payload = bytearray(rowblock.encode(rows))
    at = data.draw(st.integers(0, len(payload) - 1))
    payload[at] = data.draw(st.integers(0, 255).filter(lambda b: b != payload[at]))
    try:
        decoded = rowblock.decode(bytes(payload))
    except CorruptShardError:
        return
    assert decoded != rows  # never silently the same rows from different bytes


def test_a_bad_magic_is_refused(payload: bytes) -> None:
    assert "magic" in corrupt(b"x" + payload[1:])


def test_a_truncated_payload_is_refused(payload: bytes) -> None:
    for cut in (1, 10, len(payload) // 2):
        corrupt(payload[:-cut])


def test_counts_that_disagree_are_refused(payload: bytes) -> None:
    header, body = parts(payload)
    header["rows"] = int(header["rows"]) + 1  # type: ignore[call-overload]
    assert "rows" in corrupt(rebuilt(header, body))


def test_a_non_zero_padding_byte_is_refused() -> None:
    rows = ids_of([f"obj-{i:03d}-ab".encode() for i in range(10)])  # 10 bytes: 2 pad bytes
    header, body = parts(rowblock.encode(rows))
    group = header["groups"][0]  # type: ignore[index]
    width, count = group[2], group[3]
    body = bytearray(body)
    body[width * count + 3] = 1  # the first padding column, fourth record
    assert "padding" in corrupt(rebuilt(header, bytes(body)))


def test_duplicate_keys_are_refused() -> None:
    rows = ids_of([b"same-name", b"other-one"])
    header, body = parts(rowblock.encode(rows))
    plain = json.dumps(dict.fromkeys(rows, "dup")).encode()
    header["plain"] = len(plain)
    header["rows"] = 4
    body = body[: len(body) - len(b"{}")] + plain
    assert "rows" in corrupt(rebuilt(header, body))


@pytest.mark.parametrize(
    "group",
    [
        ["no-slash", "", 3, 2, 4, 0],
        ["a/", "abc", 3, 2, 4, 0],  # prefix not a multiple of 4 characters
        ["a/", "", 3, 1, 4, 0],  # a group of one: never written
        ["a/", "", 3, 2, 4, 3],  # unknown layout
        ["a/", "", 0, 2, 4, 0],
        ["a/", "", 3, 2, 4, True],
        "not a list",
    ],
)
def test_a_malformed_group_is_refused(group: object) -> None:
    header = {"rows": 2, "groups": [group], "plain": 2}
    corrupt(rebuilt(header, bytes(100) + b"{}"))


def test_a_lone_surrogate_in_a_plain_row_is_refused() -> None:
    plain = b'{"k": "\\ud800"}'
    header = {"rows": 1, "groups": [], "plain": len(plain)}
    assert "surrogate" in corrupt(rebuilt(header, plain))


def test_a_decoded_size_past_the_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    payload = rowblock.encode(FeedWorkload(SHARD, 20, "uuid").rows)  # ~3 kB of keys
    monkeypatch.setattr(rowblock, "MAX_DECODED_ENVELOPE", 1000)
    assert "expands beyond" in corrupt(payload)


@pytest.mark.parametrize(
    "values",
    [
        ["2026-03-01T00:00:00Z", "2026-03-01T00:00:01Z"],
        ["été", "a much longer value"],
        ["a\nb", "c"],
    ],
)
def test_the_decoder_counts_exactly_the_rows_characters(values: list[str]) -> None:
    """Fixed-width, lines and JSON-list values: the count is what the encoder's bound counts."""
    rows = {
        f"{SHARD}/seen/YWJj": values[0],
        f"{SHARD}/seen/ZGVm": values[1],
        f"{SHARD}/cursor": "c",
    }
    payload = rowblock.encode(rows)
    decoded, chars = rowblock.decode_counted(payload)
    assert decoded == rows
    assert chars == rowblock.row_chars(rows)
    with pytest.raises(CorruptShardError, match="expands beyond"):
        rowblock.decode_counted(payload, budget=chars - 1)
