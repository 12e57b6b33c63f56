"""Per-shard startup projection (SPEC §6) and the `project` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime import cli
from checkpoint_runtime.constants import (
    CONFIGMAP_VALUE_LIMIT,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_GAP_ROWS,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.runtime import projection
from checkpoint_runtime.runtime.settings import parse


def config(*max_seen: int) -> dict[str, Any]:
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
    return {"store": {"backend": "file", "path": "/tmp/x"}, "collectors": collectors}


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
    size = codec.encode_shard(shard, rows).compressed_bytes
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
