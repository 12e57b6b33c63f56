"""Per-shard startup projection (SPEC §6, §4a) and the `project` command.

`config()` pins maxChunks to 1 unless told otherwise: the one-object check, which the tests
written before chunk slots describe; the chunked ones say their maxChunks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime import cli
from checkpoint_runtime.collectors import builtin
from checkpoint_runtime.constants import (
    COMPACTION_WINDOW_SECONDS,
    CONFIGMAP_VALUE_LIMIT,
    DEFAULT_ETCD_QUOTA_BYTES,
    DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
    ETCD_QUOTA_WARN_FRACTION,
    MAX_DECODED_ENVELOPE,
    MAX_DECODED_ROW_CHARS,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_GAP_ROWS,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.runtime import projection
from checkpoint_runtime.runtime.settings import parse


def config(*max_seen: int, max_chunks: int = 1, **store: Any) -> dict[str, Any]:
    collectors: list[dict[str, Any]] = [
        {
            "kind": "objectstore",
            "tailnet": "tn",
            "feed": f"f{i}",
            "url": "file:///x",
            "maxSeenKeys": n,
        }
        for i, n in enumerate(max_seen)
    ]
    collectors.append({"kind": "flowlogs", "tailnet": "tn", "url": "http://127.0.0.1:1/"})
    return {
        "store": {"backend": "file", "path": "/tmp/x", "maxChunks": max_chunks, **store},
        "collectors": collectors,
    }


def test_default_bounds_fit_with_a_projection_per_shard() -> None:
    projections = projection.check(parse(config(5000, 5000)))
    assert [p.shard for p in projections] == [
        "tn/objectstore/f0",
        "tn/objectstore/f1",
        "tn/flowlogs",
    ]
    feed = projections[0]
    assert feed.fits
    assert 0 < feed.compressed_bytes < CONFIGMAP_VALUE_LIMIT // 2
    assert feed.max_rows is not None
    assert feed.max_rows > 5000


def test_a_shard_that_cannot_fit_is_refused_naming_the_knob() -> None:
    with pytest.raises(ConfigError) as raised:
        projection.check(parse(config(5000, 200_000)))
    assert raised.value.path == "collectors[1].maxSeenKeys"
    assert "tn/objectstore/f1" in str(raised.value)
    assert "lower it to at most" in str(raised.value)


def test_projection_of_a_bound_just_under_the_estimate_fits() -> None:
    first = projection.project(parse(config(5000)))[0]
    assert first.max_rows is not None
    near = projection.project(parse(config(int(first.max_rows * 0.9))))[0]
    assert near.fits
    over = projection.project(parse(config(int(first.max_rows * 1.2))))[0]
    assert not over.fits


def test_the_advice_is_one_number_with_the_stated_headroom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`project` at the default bound, `project` of a refused bound and the refusal itself
    advise the same maximum, and a shard of that many rows leaves at least 5 % free."""
    at_default = projection.project(parse(config(5000)))[0]
    refused = projection.project(parse(config(200_000)))[0]
    advice = at_default.max_rows
    assert advice is not None
    assert refused.max_rows == advice
    with pytest.raises(ConfigError) as raised:
        projection.check(parse(config(200_000)))
    assert f"lower it to at most {advice} (leaves 5% of the limit free)" in str(raised.value)
    document = tmp_path / "config.json"
    for bound in (5000, 200_000):
        document.write_text(json.dumps(config(bound)))
        cli.main(["project", "--config", str(document), "--json"])
        shown = json.loads(capsys.readouterr().out)
        assert shown["shards"][0]["max_rows"] == advice
        assert shown["max_rows_headroom_ratio"] == PROJECTION_ADVICE_HEADROOM == 0.05

    # Encoded for real at the advised count, with the projection's own sample shape.
    shard = at_default.shard
    rows = FeedWorkload(shard, advice, PROJECTION_SHAPE, gap_rows=PROJECTION_GAP_ROWS).rows
    size = len(codec_v3.encode_inline(shard, rows)[0])  # the production base encoder
    assert size <= CONFIGMAP_VALUE_LIMIT * (1 - PROJECTION_ADVICE_HEADROOM)
    assert size >= CONFIGMAP_VALUE_LIMIT * (1 - 2 * PROJECTION_ADVICE_HEADROOM)  # not far below
    assert projection.project(parse(config(advice)))[0].fits


def test_project_command_prints_a_table_and_exits_non_zero_on_misfit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(config(5000)))
    bad.write_text(json.dumps(config(500_000)))
    assert cli.main(["project", "--config", str(good)]) == 0
    assert "collectors[0].maxSeenKeys" in capsys.readouterr().out
    assert cli.main(["project", "--config", str(bad), "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["shards"][0]["fits"] is False
    assert "collectors[0].maxSeenKeys" in captured.err
    bad.write_text('{"collectors": [{"kind": "objectstore"}]}')
    assert cli.main(["project", "--config", str(bad)]) == 2


def test_a_vanishing_poll_interval_is_refused_not_overflowed() -> None:
    """A denormal pollSeconds (which overflowed replayWindowSeconds / pollSeconds and would
    busy-poll the source) is below the schema's floor of 0.1 s: refused, naming the key."""
    document = {"collectors": [{"kind": "flowlogs", "url": "http://x/", "pollSeconds": 1e-323}]}
    with pytest.raises(ConfigError) as raised:
        projection.check(parse(document))
    assert raised.value.path == "collectors[0].pollSeconds"


def test_flowlogs_beyond_the_encoded_sample_are_extrapolated_conservatively() -> None:
    """172,800 replay windows: the projection encodes 10,000 and scales, and stays above the
    exactly encoded size (measured 513,974 bytes with the v1 codec)."""
    document = {
        "collectors": [
            {
                "kind": "flowlogs",
                "url": "http://x/",
                "pollSeconds": 0.5,
                "replayWindowSeconds": 86_400,
            }
        ]
    }
    (shard,) = projection.check(parse(document))
    assert shard.extrapolated
    assert shard.rows == 172_801
    assert shard.fits


# ---- chunk slots: maxChunks ------------------------------------------------------------------


def test_chunk_slots_lift_the_one_object_ceiling_up_to_the_decode_bound() -> None:
    """A uuid seen row is about 21 compressed bytes, 76 bytes of row block and 162 characters
    (key and value): the row-character bound (twice the 128 MiB envelope bound, over all chunks
    together) admits about 1.6 million rows whatever maxChunks, past the schema's maximum of
    maxSeenKeys (1,000,000), which fits from 32 slots and is refused at 16 with both knobs
    named. (A shard past the decode bound: test_a_shard_past_the_decode_bound_is_refused...)"""
    at_256 = projection.project(parse(config(5000, max_chunks=256)))[0]
    assert at_256.max_rows == builtin.advised_max_decoded_rows(at_256.shard)
    assert 1_500_000 < at_256.max_rows < 1_700_000
    for max_chunks in (32, 256):
        (million, _) = projection.check(parse(config(1_000_000, max_chunks=max_chunks)))
        assert million.fits
        assert million.slot_bytes <= CONFIGMAP_VALUE_LIMIT * (1 - PROJECTION_ADVICE_HEADROOM)
        assert million.raw_bytes is not None
        assert million.raw_bytes <= MAX_DECODED_ENVELOPE * (1 - PROJECTION_ADVICE_HEADROOM)
    with pytest.raises(ConfigError) as raised:
        projection.check(parse(config(1_000_000, max_chunks=16)))
    at_16 = projection.project(parse(config(5000, max_chunks=16)))[0]
    assert f"lower it to at most {at_16.max_rows} " in str(raised.value)
    assert "raise store.maxChunks (now 16)" in str(raised.value)


def test_project_accepts_a_million_uuid_seen_keys_in_32_chunk_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "config.json"
    document.write_text(json.dumps(config(1_000_000, max_chunks=32)))
    assert cli.main(["project", "--config", str(document), "--json"]) == 0
    (feed, _) = json.loads(capsys.readouterr().out)["shards"]
    assert (feed["rows"] >= 1_000_000, feed["fits"], feed["max_chunks"]) == (True, True, 32)
    document.write_text(json.dumps(config(1_000_000, max_chunks=16)))
    assert cli.main(["project", "--config", str(document), "--json"]) == 1


def test_the_decode_bound_counts_what_the_encoder_counts() -> None:
    """The projection's decoded size of a feed: the larger of the base member's bytes and its
    rows' characters scaled to the envelope bound, as the encoder's own refusals count them."""
    (feed, _) = projection.project(parse(config(5000)))
    rows = FeedWorkload(feed.shard, 5000, PROJECTION_SHAPE, gap_rows=PROJECTION_GAP_ROWS).rows
    characters = sum(map(len, rows)) + sum(map(len, rows.values()))
    member = codec_v3.encode_inline(feed.shard, rows)[1]
    scaled = -(-characters * MAX_DECODED_ENVELOPE // MAX_DECODED_ROW_CHARS)
    assert feed.raw_bytes == max(member, scaled)


def test_too_few_chunk_slots_are_refused_with_one_advice_and_the_other_knob() -> None:
    with pytest.raises(ConfigError) as raised:
        projection.check(parse(config(500_000, max_chunks=8)))
    at_default = projection.project(parse(config(5000, max_chunks=8)))[0]
    assert raised.value.path == "collectors[0].maxSeenKeys"
    assert f"lower it to at most {at_default.max_rows} " in str(raised.value)
    assert "raise store.maxChunks (now 8)" in str(raised.value)
    assert "over 8 chunk slots" in str(raised.value)


def test_the_advice_grows_with_max_chunks_and_stops_at_the_decode_bound() -> None:
    advice = {
        chunks: projection.project(parse(config(5000, max_chunks=chunks)))[0].max_rows
        for chunks in (1, 2, 8, 32, 256)
    }
    assert advice[1] is not None
    assert advice[1] < advice[2] < advice[8] < advice[32]  # type: ignore[operator]
    assert advice[2] < 2 * advice[1]  # the fullest of two slots holds more than half
    decoded = projection.project(parse(config(5000, max_chunks=256)))[0]
    assert decoded.raw_bytes is not None
    # 256 slots would hold far more than the decode bound admits: the bound is the advice
    assert advice[256] == builtin.advised_max_decoded_rows(decoded.shard) < 256 * advice[1]


def test_a_shard_past_the_decode_bound_is_refused_whatever_its_slots() -> None:
    huge = projection.ShardProjection(
        "tn/objectstore/f0",
        "collectors[0].maxSeenKeys",
        2_000_000,
        56_000_000,
        True,
        1_000,
        max_chunks=256,
        raw_bytes=MAX_DECODED_ENVELOPE + 1,
    )
    assert huge.slot_bytes < CONFIGMAP_VALUE_LIMIT
    assert not huge.fits
    error = projection.misfit([huge])
    assert error is not None
    assert f"decodes to {MAX_DECODED_ENVELOPE + 1} bytes, over the" in str(error)
    assert "raise store.maxChunks" not in str(error)


def test_the_chunked_advice_fits_every_slot_when_encoded_for_real() -> None:
    """At maxChunks 2 the advised rows, split by a hash of the row key as chunk slots split
    them, encode to at most 95 % of the limit in the fuller slot (and not far below)."""
    projected = projection.project(parse(config(5000, max_chunks=2)))[0]
    advice = projected.max_rows
    assert advice is not None
    rows = FeedWorkload(projected.shard, advice, PROJECTION_SHAPE, gap_rows=0).rows
    slots: list[dict[str, str]] = [{}, {}]
    for key, value in rows.items():
        slots[hashlib.sha256(key.encode()).digest()[0] % 2][key] = value
    sizes = [len(codec_v3.encode_inline(projected.shard, slot)[0]) for slot in slots]
    assert max(sizes) <= CONFIGMAP_VALUE_LIMIT * (1 - PROJECTION_ADVICE_HEADROOM)
    assert max(sizes) >= CONFIGMAP_VALUE_LIMIT * (1 - 2 * PROJECTION_ADVICE_HEADROOM)


# ---- the etcd report -------------------------------------------------------------------------


def test_the_etcd_window_is_the_budget_over_ten_minutes_plus_one_object() -> None:
    window = projection.etcd_report(parse(config(5000)))
    assert COMPACTION_WINDOW_SECONDS == 600
    assert window.worst_case_bytes == (
        DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND * 600 + CONFIGMAP_VALUE_LIMIT
    )
    assert window.quota_bytes == DEFAULT_ETCD_QUOTA_BYTES
    assert window.fraction == pytest.approx(0.0737, abs=1e-4)
    assert not window.warns
    assert ETCD_QUOTA_WARN_FRACTION == 0.25


def test_project_warns_when_one_store_could_fill_a_quarter_of_the_quota(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "config.json"
    document.write_text(json.dumps(config(5000, etcdQuotaBytes=512 * 1024**2)))
    assert cli.main(["project", "--config", str(document), "--json"]) == 0  # a warning only
    captured = capsys.readouterr()
    etcd = json.loads(captured.out)["etcd"]
    assert etcd["warns"] is True
    assert etcd["fraction"] == pytest.approx(0.2949, abs=1e-4)
    assert "warning: one store writes at most 158334976 bytes" in captured.err
    assert "past 25%" in captured.err
    document.write_text(json.dumps(config(5000)))
    assert cli.main(["project", "--config", str(document)]) == 0
    captured = capsys.readouterr()
    assert "7.4% of the declared etcd quota" in captured.out
    assert captured.err == ""
