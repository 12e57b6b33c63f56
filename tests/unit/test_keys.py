"""Key grammar and ShardKey (SPEC §3)."""

from __future__ import annotations

import pytest

from checkpoint_runtime.errors import KeyGrammarError
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    collector_namespace,
    parse_key,
    segment_problem,
    shard_key,
    validate_shard_key,
)


@pytest.mark.parametrize(
    ("key", "shard"),
    [
        ("flowlogs/cursor", "flowlogs"),
        ("flowlogs/replay/2026-03-01T00:00:00Z", "flowlogs"),
        ("tn1/flowlogs/cursor", "tn1/flowlogs"),
        ("tn1/flowlogs/replay/a/b", "tn1/flowlogs"),
        ("objectstore/feed-a/cursor", "objectstore/feed-a"),
        ("objectstore/feed-a/scan", "objectstore/feed-a"),
        ("objectstore/feed-a/seen/bG9ncy8x", "objectstore/feed-a"),
        ("objectstore/feed-a/gap/000001", "objectstore/feed-a"),
        ("tn1/objectstore/feed-a/seen/a/b/c==", "tn1/objectstore/feed-a"),
        ("tn.1_x/objectstore/f_1.x/cursor", "tn.1_x/objectstore/f_1.x"),
    ],
)
def test_every_row_of_a_collector_lands_in_its_namespace(key: str, shard: str) -> None:
    assert shard_key(key) == shard


@pytest.mark.parametrize(
    "key",
    [
        "",
        "cursor",
        "other/cursor",
        "a/b/objectstore/feed/cursor",  # kind must be segment 1 or 2
        "flowlogs",  # no row kind
        "flowlogs/seen/x",  # seen is not a flowlogs row
        "flowlogs/cursor/extra",  # cursor takes no id
        "flowlogs/replay",  # replay needs an id
        "flowlogs/replay/",  # empty id
        "objectstore/cursor",  # missing feed: "cursor" becomes the feed, then no row kind
        "objectstore/feed",
        "objectstore/Feed/cursor",  # bad segment
        "objectstore/flowlogs/cursor",  # a kind used as feed name is ambiguous
        "Bad/flowlogs/cursor",
        "tn/objectstore/feed/scan/x",
    ],
)
def test_keys_that_fit_no_grammar_are_rejected(key: str) -> None:
    with pytest.raises(KeyGrammarError) as raised:
        shard_key(key)
    assert raised.value.key == key


def test_parse_key_reports_row_kind_and_id() -> None:
    parsed = parse_key("tn/objectstore/f/seen/a/b")
    assert (parsed.shard, parsed.row_kind, parsed.row_id) == ("tn/objectstore/f", "seen", "a/b")
    assert parse_key("flowlogs/cursor").row_id is None


def test_segment_rules_are_shared_with_config_validation() -> None:
    assert segment_problem("feed-1") is None
    for kind in COLLECTOR_KINDS:
        assert "collector kind" in (segment_problem(kind) or "")
    assert segment_problem("-x") is not None
    assert segment_problem("a" * 64) is not None


def test_collector_namespace_is_the_inverse_of_the_grammar() -> None:
    assert collector_namespace("objectstore", "tn", "f") == "tn/objectstore/f"
    assert collector_namespace("flowlogs") == "flowlogs"
    with pytest.raises(KeyGrammarError):
        collector_namespace("objectstore", None)
    with pytest.raises(KeyGrammarError):
        collector_namespace("nope")


def test_validate_shard_key_accepts_only_namespaces() -> None:
    validate_shard_key("tn/objectstore/f")
    for bad in ("tn/objectstore/f/cursor", "tn/objectstore", "x", ""):
        with pytest.raises(KeyGrammarError):
            validate_shard_key(bad)
