"""Shard names and labels (§5), the legacy format (§8) and the §11 workload calibration."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from checkpoint_runtime.constants import MAX_DNS_SUBDOMAIN
from checkpoint_runtime.errors import LegacyFormatError
from checkpoint_runtime.format.legacy import (
    LegacyState,
    byte_digest,
    decode_legacy,
    encode_legacy,
    legacy_digest,
)
from checkpoint_runtime.format.naming import is_dns_subdomain, shard_labels, shard_name, store_label
from checkpoint_runtime.format.reference_rows import CONFIGURATIONS, FeedWorkload

LEGACY_SCHEMA = json.loads(
    (Path(__file__).parents[2] / "schemas" / "legacy.schema.json").read_text()
)


def test_shard_names_are_readable_valid_and_distinct_per_lease() -> None:
    name = shard_name("cr-checkpoint-runtime", "tn_1/objectstore/feed.a")
    assert name.startswith("cr-checkpoint-runtime-tn-1.objectstore.feed.a-")
    assert is_dns_subdomain(name)
    assert shard_name("a", "flowlogs") != shard_name("b", "flowlogs")
    assert shard_name("a", "flowlogs") != shard_name("a", "tn/flowlogs")


def test_longest_inputs_still_fit_a_dns_subdomain() -> None:
    shard = f"{'t' * 63}/objectstore/{'f' * 63}"
    name = shard_name("l" * 253, shard)
    assert len(name) <= MAX_DNS_SUBDOMAIN
    assert is_dns_subdomain(name)


def test_labels_fit_the_63_character_limit_for_any_lease_name() -> None:
    assert len(store_label("x" * 253)) <= 63
    assert store_label("a") != store_label("b")
    assert all(len(value) <= 63 for value in shard_labels("x" * 253).values())


def test_legacy_writer_and_reader_round_trip_and_match_the_schema() -> None:
    rows = {"flowlogs/cursor": "2026", "objectstore/f/seen/x": "y"}
    value = encode_legacy(rows)
    assert decode_legacy("cm", value) == rows
    jsonschema.validate(json.loads(value), LEGACY_SCHEMA)
    assert legacy_digest(value).startswith("sha256:")
    assert legacy_digest(value) != legacy_digest(encode_legacy({**rows, "flowlogs/cursor": "2027"}))


def test_the_legacy_digest_is_over_content_not_formatting() -> None:
    rows = {"flowlogs/cursor": "é 2026", "objectstore/f/seen/x": "y"}
    value = encode_legacy(rows)  # compact, sorted, ASCII escapes
    reformatted = [
        value + "\n",
        json.dumps(dict(reversed(list(rows.items()))), indent=2),
        json.dumps(rows, ensure_ascii=False),
    ]
    for other in reformatted:
        assert other != value
        assert legacy_digest(other) == legacy_digest(value)
    for changed in ({**rows, "flowlogs/cursor": "é 2027"}, {"flowlogs/cursor": "é 2026"}):
        assert legacy_digest(encode_legacy(changed)) != legacy_digest(value)
    # Not JSON: digested as its bytes, still a digest (the reader names the error).
    assert legacy_digest("{not json") == byte_digest("{not json")


def test_a_legacy_value_matches_the_byte_digest_older_releases_recorded() -> None:
    value = json.dumps({"flowlogs/cursor": "2026"}, indent=1)
    state = LegacyState("cm", value)
    assert byte_digest(value) != legacy_digest(value)
    assert state.matches(legacy_digest(value))
    assert state.matches(byte_digest(value))
    assert not state.matches(byte_digest(value + " "))
    assert not state.matches(None)


@pytest.mark.parametrize(
    ("value", "message"),
    [("{not json", "not JSON"), ("[]", "not an object"), ('{"a": 1}', "not a string")],
)
def test_malformed_legacy_values_are_named_errors(value: str, message: str) -> None:
    with pytest.raises(LegacyFormatError, match=message):
        decode_legacy("cm", value)


def test_old_design_workload_is_calibrated_to_785001_bytes_a_feed() -> None:
    workload = FeedWorkload("tailnet-1/objectstore/feed-1", 5000)
    seen = {key: value for key, value in workload.rows.items() if "/seen/" in key}
    assert len(seen) == 5000
    assert len(encode_legacy(seen)) == 785_001
    assert abs(len(encode_legacy(workload.rows)) - 785_001) < 1000


def test_workloads_are_deterministic_by_seed_and_count_their_entropy() -> None:
    first = FeedWorkload("objectstore/f", 100, "uuid", seed=1)
    assert first.rows == FeedWorkload("objectstore/f", 100, "uuid", seed=1).rows
    assert first.rows != FeedWorkload("objectstore/f", 100, "uuid", seed=2).rows
    assert first.entropy_bits == 100 * (40 + 122)


def test_configurations_of_section_11() -> None:
    shards = [len(c.feed_shards()) for c in CONFIGURATIONS]
    assert shards == [1, 3, 9]
    rows = CONFIGURATIONS[1].rows(seen_rows=10)
    assert any(key.endswith("/flowlogs/cursor") for key in rows)
    assert any("/flowlogs/replay/" in key for key in rows)


@pytest.mark.parametrize(
    ("value", "message"),
    [("[" * 100_000, "nests too deeply"), ('{"flowlogs/cursor": "\\ud800"}', "surrogate")],
)
def test_pathological_legacy_values_are_named_errors(value: str, message: str) -> None:
    with pytest.raises(LegacyFormatError, match=message):
        decode_legacy("cm", value)
